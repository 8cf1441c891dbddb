"""E-mail values and pure functions (:mod:`assistant.tools.mail`): addresses, composing a message,
the snippet and summary of a fetched one, and the text of a server's error."""

from __future__ import annotations

import imaplib
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from email import policy
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any

from assistant.tools.base import ToolError

SNIPPET_CHARS = 200
_SEPARATORS = re.compile(r'[,;](?=(?:[^"]*"[^"]*")*[^"]*$)')  # commas/semicolons outside quotes


@dataclass(frozen=True)
class MailSummary:
    id: str  # the IMAP UID in the searched mailbox
    sender: str
    to: str
    subject: str
    date: str | None  # ISO 8601
    snippet: str
    unread: bool

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["from"] = data.pop("sender")
        return {key: data[key] for key in ("id", "from", "to", "subject", "date", "snippet", "unread")}


@dataclass(frozen=True)
class SavedDraft:
    id: str
    mailbox: str


def parse_address(text: str) -> Address | None:
    """One address (``a@b.org`` or ``Name <a@b.org>``), None when it is not a usable address."""
    name, spec = parseaddr(text.strip())
    try:
        address = Address(display_name=name, addr_spec=spec)
    except (ValueError, IndexError, HeaderParseError):
        return None
    domain = address.domain.strip(".")
    return address if address.username and "." in domain and " " not in spec else None


def parse_addresses(value: str | list[str] | None) -> list[Address]:
    """Addresses from a list and/or comma- or semicolon-separated strings; a ToolError names the bad ones."""
    items = [value] if isinstance(value, str) else list(value or [])
    tokens = [t.strip() for item in items for t in _SEPARATORS.split(item) if t.strip()]
    parsed = [(token, parse_address(token)) for token in tokens]
    bad = [token for token, address in parsed if address is None]
    if bad:
        raise ToolError(f"invalid e-mail address{'es' if len(bad) > 1 else ''}: {', '.join(bad)}")
    return [address for _, address in parsed if address is not None]


def compose(sender: Address, to: Sequence[Address], subject: str, body: str,
            cc: Sequence[Address] = ()) -> EmailMessage:
    """A plain-text message with From, To, Cc, Subject, Date and Message-ID."""
    message = EmailMessage(policy=policy.default)
    message["From"] = sender
    message["To"] = list(to)
    if cc:
        message["Cc"] = list(cc)
    message["Subject"] = " ".join(subject.split())  # a header cannot hold line breaks
    message["Date"] = formatdate(localtime=True)
    message["Message-ID"] = make_msgid(domain=sender.domain)
    message.set_content(body)
    return message


def _decoded(part: Message) -> str:
    try:
        return part.get_content()
    except (LookupError, ValueError):  # unknown charset or broken encoding
        payload = part.get_payload(decode=True) or b""
        return payload.decode("utf-8", "replace")


def html_text(html: str) -> str:
    from bs4 import BeautifulSoup  # already a dependency (search_web); imported when needed

    soup = BeautifulSoup(html, "html.parser")
    for hidden in soup(["script", "style", "head"]):
        hidden.decompose()
    return soup.get_text(" ")


def snippet(message: EmailMessage, limit: int = SNIPPET_CHARS) -> str:
    """The start of the text body (plain text preferred, else HTML as text), whitespace collapsed."""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    text = _decoded(part)
    if part.get_content_subtype() == "html":
        text = html_text(text)
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return cut + "…"


def summarize(uid: str, raw: bytes, flags: list[str]) -> MailSummary:
    """The search result of one fetched message."""
    message = BytesParser(policy=policy.default).parsebytes(raw)
    return MailSummary(
        id=uid,
        sender=str(message.get("From", "")),
        to=str(message.get("To", "")),
        subject=str(message.get("Subject", "")),
        date=_iso_date(message),
        snippet=snippet(message),
        unread="\\seen" not in {f.lower() for f in flags},
    )


def _iso_date(message: EmailMessage) -> str | None:
    try:
        header = message.get("Date")
        moment = getattr(header, "datetime", None)
    except (ValueError, TypeError, IndexError):
        return None
    return moment.isoformat() if moment is not None else None


def reason(value: Any) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, OSError) and value.strerror:
        return value.strerror
    if isinstance(value, imaplib.IMAP4.error) and value.args and isinstance(value.args[0], bytes):
        return value.args[0].decode("utf-8", "replace")
    return str(value) or type(value).__name__
