"""search_emails, send_email (capability ``email``) and draft_email (``email_drafts``) over IMAP + SMTP.

Design choices:

- The standard library only: ``imaplib``, ``smtplib`` and the ``email`` package with
  ``email.policy.default`` (decoded headers, ``get_body`` for the text part). The module is named
  ``mail`` so that nothing in this package can be mistaken for the stdlib ``email``.
- Two small roles, :class:`MailReader` (IMAP: search, unread count, drafts) and :class:`MailSender`
  (SMTP: send); the ``imap-smtp`` backend :class:`ImapSmtpMail` plays both. Composing, address
  parsing and snippets are pure functions, so the tools stay thin and unit tests need no server.
- A connection per call, with ``timeout_secs``: nothing to keep alive, nothing stale after a server
  restart. Mailboxes are opened read-only (EXAMINE) and bodies fetched with ``BODY.PEEK``, so
  searching never marks mail as read. Only the first 64 KiB of a message are fetched: enough for
  headers and the text part, never a large attachment.
- The draft store is the IMAP drafts mailbox (created when missing): a draft is a message appended
  with the ``\\Draft`` flag, so every mail client shows it.
- Search words are ANDed; each must occur in the sender, subject or body. Non-ASCII words travel as
  non-synchronising literals (LITERAL+ / LITERAL-, which Dovecot, Cyrus, Exchange and Gmail offer).
- Every failure a user can act on (server unreachable, login refused, bad address) is a ToolError
  naming the server or the address.
"""

from __future__ import annotations

import imaplib
import re
import smtplib
import ssl
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from email import policy
from email.errors import HeaderParseError
from email.headerregistry import Address
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.utils import formatdate, make_msgid, parseaddr
from typing import Annotated, Any, Protocol

from pydantic import Field

from assistant.tools.base import (
    Capability,
    CapabilityDeps,
    CapabilityUnavailable,
    ToolContext,
    ToolError,
    pick_backend,
    tool,
)

SNIPPET_CHARS = 200
FETCH_BYTES = 64 * 1024
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_SEPARATORS = re.compile(r'[,;](?=(?:[^"]*"[^"]*")*[^"]*$)')  # commas/semicolons outside quotes
_FETCH_META = re.compile(rb"UID (\d+)|FLAGS \(([^)]*)\)")
_APPENDUID = re.compile(rb"APPENDUID \d+ (\d+)")


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


class MailReader(Protocol):
    address: Address  # the account's own address: the From of its drafts

    def search(self, words: list[str], *, unread_only: bool, limit: int, since: date | None) -> list[MailSummary]:
        """Messages with every word in sender, subject or body, newest first."""

    def unread_count(self) -> int: ...

    def save_draft(self, message: EmailMessage) -> SavedDraft: ...


class MailSender(Protocol):
    address: Address  # the From of what it sends

    def send(self, message: EmailMessage) -> list[str]:
        """Send ``message``; returns the recipients the server refused (the others got it)."""


# --- addresses, messages, snippets (pure) -------------------------------------------------------


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


# --- IMAP command pieces ---------------------------------------------------------------------------


def imap_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def imap_date(day: date) -> str:
    return f"{day.day}-{_MONTHS[day.month - 1]}-{day.year}"  # not strftime: %b follows the locale


def _imap_string(word: str, literals: bool) -> bytes:
    if word.isascii():
        return imap_quote(word).encode("ascii")
    if not literals:
        raise ToolError("this IMAP server cannot search for non-ASCII words; try ASCII words")
    data = word.encode("utf-8")
    return b"{%d+}\r\n" % len(data) + data


def search_criteria(words: list[str], *, unread_only: bool, since: date | None, literals: bool) -> list[bytes]:
    """IMAP SEARCH keys: each word in FROM, SUBJECT or BODY; UNSEEN; SINCE."""
    keys: list[bytes] = []
    for word in words:
        s = _imap_string(word, literals)
        keys += [b"OR OR FROM " + s + b" SUBJECT " + s + b" BODY " + s]
    if unread_only:
        keys.append(b"UNSEEN")
    if since is not None:
        keys.append(b"SINCE " + imap_date(since).encode("ascii"))
    return keys or [b"ALL"]


def parse_fetch(data: list[Any]) -> list[tuple[str, list[str], bytes]]:
    """(uid, flags, body) of each message in an imaplib FETCH answer."""
    found = []
    for i, item in enumerate(data):
        if not isinstance(item, tuple):
            continue
        following = data[i + 1] if i + 1 < len(data) and isinstance(data[i + 1], bytes) else b""
        uid, flags = None, []
        for m in _FETCH_META.finditer(item[0] + b" " + following):  # FLAGS may follow the body
            if m.group(1):
                uid = m.group(1).decode()
            else:
                flags = m.group(2).decode().split()
        if uid is not None:
            found.append((uid, flags, item[1]))
    return found


# --- the imap-smtp backend -------------------------------------------------------------------------


class ImapSmtpMail:
    """An IMAP mailbox (reader, draft store) and an SMTP submission server (sender)."""

    def __init__(self, settings: Any, address: Address):  # settings: assistant.config.EmailSettings
        self.settings = settings
        self.address = address

    @classmethod
    def from_settings(cls, settings: Any) -> ImapSmtpMail:
        if not (settings.username and settings.password):
            raise CapabilityUnavailable("[email] username and password are needed to log in to IMAP")
        address = parse_address(settings.from_address or settings.username)
        if address is None:
            raise CapabilityUnavailable("[email] from_address is missing or not an e-mail address")
        return cls(settings, address)

    # IMAP ----------------------------------------------------------------------------------------

    @property
    def _imap_where(self) -> str:
        return f"IMAP server {self.settings.imap_host}:{self.settings.imap_port}"

    def _imap_connect(self) -> imaplib.IMAP4:
        s = self.settings
        if s.imap_security == "ssl":
            return imaplib.IMAP4_SSL(s.imap_host, s.imap_port, ssl_context=ssl.create_default_context(),
                                     timeout=s.timeout_secs)
        conn = imaplib.IMAP4(s.imap_host, s.imap_port, timeout=s.timeout_secs)
        if s.imap_security == "starttls":
            conn.starttls(ssl.create_default_context())
        return conn

    @contextmanager
    def imap(self) -> Iterator[imaplib.IMAP4]:
        """A logged-in IMAP connection; any failure becomes a ToolError naming the server."""
        try:
            conn = self._imap_connect()
        except (OSError, imaplib.IMAP4.error) as exc:
            raise ToolError(f"cannot reach the {self._imap_where}: {_reason(exc)}") from None
        try:
            try:
                conn.login(self.settings.username, self.settings.password)
            except imaplib.IMAP4.error:
                raise ToolError(f"{self._imap_where} refused login for user {self.settings.username}") from None
            yield conn
        except (OSError, imaplib.IMAP4.error) as exc:
            raise ToolError(f"{self._imap_where} failed: {_reason(exc)}") from None
        finally:
            with suppress(OSError, imaplib.IMAP4.error):
                conn.logout()

    def _examine(self, conn: imaplib.IMAP4, mailbox: str) -> None:
        typ, data = conn.select(imap_quote(mailbox), readonly=True)
        if typ != "OK":
            raise ToolError(f"{self._imap_where} has no mailbox {mailbox!r}: {_reason(data)}")

    def search(self, words: list[str], *, unread_only: bool, limit: int, since: date | None) -> list[MailSummary]:
        with self.imap() as conn:
            caps = _capabilities(conn)
            self._examine(conn, self.settings.mailbox)
            criteria = search_criteria(words, unread_only=unread_only, since=since,
                                       literals=bool(caps & {"LITERAL+", "LITERAL-"}))
            uids = self._newest_first(conn, criteria, sort="SORT" in caps)[:limit]
            if not uids:
                return []
            typ, data = conn.uid("FETCH", b",".join(uids), f"(UID FLAGS BODY.PEEK[]<0.{FETCH_BYTES}>)")
            fetched = {uid: summarize(uid, raw, flags) for uid, flags, raw in parse_fetch(data)}
            return [fetched[u.decode()] for u in uids if u.decode() in fetched]

    def _newest_first(self, conn: imaplib.IMAP4, criteria: list[bytes], *, sort: bool) -> list[bytes]:
        """UIDs of the matches: by Date with SORT (RFC 5256), else by arrival (UID order)."""
        if sort:
            typ, data = conn.uid("SORT", "(REVERSE DATE)", "UTF-8", *criteria)
        else:
            typ, data = conn.uid("SEARCH", "CHARSET", "UTF-8", *criteria)
        if typ != "OK":
            raise ToolError(f"{self._imap_where} refused the search: {_reason(data)}")
        uids = (data[0] or b"").split()
        return uids if sort else uids[::-1]

    def unread_count(self) -> int:
        """How many messages of the mailbox are unread (for the briefing)."""
        with self.imap() as conn:
            typ, data = conn.status(imap_quote(self.settings.mailbox), "(UNSEEN)")
            match = re.search(rb"UNSEEN (\d+)", data[0] or b"") if typ == "OK" else None
            if match is None:
                raise ToolError(f"{self._imap_where} did not report unread messages: {_reason(data)}")
            return int(match.group(1))

    def save_draft(self, message: EmailMessage) -> SavedDraft:
        mailbox = imap_quote(self.settings.drafts_mailbox)
        raw = message.as_bytes(policy=policy.SMTP)
        with self.imap() as conn:
            typ, data = _append_draft(conn, mailbox, raw)
            if typ != "OK" and b"TRYCREATE" in (data[0] or b""):  # the mailbox does not exist yet
                typ, created = conn.create(mailbox)
                if typ != "OK":
                    raise ToolError(f"{self._imap_where} cannot create {self.settings.drafts_mailbox!r}: "
                                    f"{_reason(created)}")
                typ, data = _append_draft(conn, mailbox, raw)
            if typ != "OK":
                raise ToolError(f"{self._imap_where} refused the draft: {_reason(data)}")
        match = _APPENDUID.search(data[0] or b"")  # UIDPLUS; else the Message-ID identifies it
        return SavedDraft(match.group(1).decode() if match else str(message["Message-ID"]),
                          self.settings.drafts_mailbox)

    # SMTP ----------------------------------------------------------------------------------------

    @property
    def _smtp_where(self) -> str:
        return f"SMTP server {self.settings.smtp_host}:{self.settings.smtp_port}"

    def _smtp_connect(self) -> smtplib.SMTP:
        s = self.settings
        if s.smtp_security == "ssl":
            return smtplib.SMTP_SSL(s.smtp_host, s.smtp_port, timeout=s.timeout_secs,
                                    context=ssl.create_default_context())
        conn = smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=s.timeout_secs)
        if s.smtp_security == "starttls":
            conn.starttls(context=ssl.create_default_context())
        return conn

    def send(self, message: EmailMessage) -> list[str]:
        s = self.settings
        try:
            conn = self._smtp_connect()
        except (OSError, smtplib.SMTPException) as exc:
            raise ToolError(f"cannot reach the {self._smtp_where}: {_reason(exc)}") from None
        try:
            conn.ehlo_or_helo_if_needed()
            if conn.has_extn("auth"):  # servers that need a login say so
                conn.login(s.username, s.password)
            return sorted(conn.send_message(message))
        except smtplib.SMTPAuthenticationError:
            raise ToolError(f"{self._smtp_where} refused login for user {s.username}") from None
        except smtplib.SMTPRecipientsRefused as exc:
            refused = ", ".join(sorted(exc.recipients))
            raise ToolError(f"{self._smtp_where} refused every recipient: {refused}") from None
        except smtplib.SMTPSenderRefused as exc:
            raise ToolError(f"{self._smtp_where} refused the sender {self.address.addr_spec}: "
                            f"{_reason(exc.smtp_error)}") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise ToolError(f"{self._smtp_where} failed: {_reason(exc)}") from None
        finally:
            with suppress(OSError, smtplib.SMTPException):
                conn.quit()


def _append_draft(conn: imaplib.IMAP4, mailbox: str, raw: bytes) -> tuple[str, list[Any]]:
    return conn.append(mailbox, r"(\Draft \Seen)", imaplib.Time2Internaldate(time.time()), raw)


def _capabilities(conn: imaplib.IMAP4) -> set[str]:
    """The capabilities after login (servers often announce more than in their greeting)."""
    typ, data = conn.capability()
    return set(data[0].decode("ascii", "replace").upper().split()) if typ == "OK" and data[0] else set()


def _reason(value: Any) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, OSError) and value.strerror:
        return value.strerror
    if isinstance(value, imaplib.IMAP4.error) and value.args and isinstance(value.args[0], bytes):
        return value.args[0].decode("utf-8", "replace")
    return str(value) or type(value).__name__


BACKENDS: dict[str, Callable[[Any], ImapSmtpMail]] = {"imap-smtp": ImapSmtpMail.from_settings}


# --- tools ---------------------------------------------------------------------------------------

Recipients = Annotated[
    list[str] | str,
    Field(description="E-mail addresses: a list, or one string separated by commas."),
]


def _message(account: MailReader | MailSender, to: list[str] | str, subject: str, body: str,
             cc: list[str] | str | None) -> EmailMessage:
    recipients = parse_addresses(to)
    if not recipients:
        raise ToolError("give at least one recipient in 'to'")
    return compose(account.address, recipients, subject, body, parse_addresses(cc))


@tool("email", icon="📬")
def search_emails(
    ctx: ToolContext,
    query: Annotated[str, Field(max_length=500, description="Words to find in sender, subject or text; "
                                                          "empty for any message.")] = "",
    unread_only: Annotated[bool, Field(description="Only messages not read yet.")] = False,
    limit: Annotated[int, Field(ge=1, le=50, description="How many messages at most.")] = 10,
    since_days: Annotated[int | None, Field(ge=0, le=36500, description="Only messages of the last N days.")] = None,
) -> list[dict]:
    """Search the user's e-mail inbox, newest first."""
    reader: MailReader = ctx.backend("email")
    since = date.today() - timedelta(days=since_days) if since_days is not None else None
    found = reader.search(query.split(), unread_only=unread_only, limit=limit, since=since)
    return [summary.to_dict() for summary in found]


@tool("email", icon="📤")
def send_email(
    ctx: ToolContext,
    to: Recipients,
    subject: Annotated[str, Field(max_length=998, description="The subject line.")],
    body: Annotated[str, Field(max_length=100_000, description="The message text.")],
    cc: Annotated[list[str] | str | None, Field(description="Addresses to copy, if any.")] = None,
) -> dict:
    """Send an e-mail from the user's address."""
    sender: MailSender = ctx.backend("email")
    message = _message(sender, to, subject, body, cc)
    refused = sender.send(message)
    result = {"sent": True, "message_id": str(message["Message-ID"]),
              "to": [a.addr_spec for a in message["To"].addresses]}
    if refused:
        result["refused"] = refused
    return result


@tool("email_drafts", icon="📝")
def draft_email(
    ctx: ToolContext,
    to: Recipients,
    subject: Annotated[str, Field(max_length=998, description="The subject line.")],
    body: Annotated[str, Field(max_length=100_000, description="The message text.")],
    cc: Annotated[list[str] | str | None, Field(description="Addresses to copy, if any.")] = None,
) -> dict:
    """Save an e-mail as a draft for the user to review and send later."""
    drafts: MailReader = ctx.backend("email_drafts")
    message = _message(drafts, to, subject, body, cc)
    saved = drafts.save_draft(message)
    return {"draft_id": saved.id, "mailbox": saved.mailbox, "subject": str(message["Subject"])}


def _configured(settings: Any) -> bool:
    return bool(settings.email.imap_host and settings.email.smtp_host)


def _create(deps: CapabilityDeps) -> ImapSmtpMail:
    section = deps.settings.email
    return pick_backend("email", BACKENDS, section.backend)(section)


CAPABILITY = Capability(
    "email", (search_emails, send_email), configured=_configured, create=_create,
    description="the user's mailbox over IMAP (search) and SMTP (send)",
)
DRAFTS_CAPABILITY = Capability(
    "email_drafts", (draft_email,), configured=_configured, create=_create,
    description="drafts saved in the IMAP drafts mailbox",
)
