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

Modules: values and pure functions in :mod:`assistant.tools.mail_message`, the IMAP side in
:mod:`assistant.tools.mail_imap`, the SMTP side in :mod:`assistant.tools.mail_smtp`; this module
holds the roles, the backend that joins both sides, the tools and the capabilities, and re-exports
the rest (``from assistant.tools.mail import ...`` keeps working).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from email.headerregistry import Address
from email.message import EmailMessage
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
from assistant.tools.mail_imap import (
    FETCH_BYTES,
    ImapMailbox,
    imap_date,
    imap_quote,
    parse_fetch,
    search_criteria,
)
from assistant.tools.mail_message import (
    SNIPPET_CHARS,
    MailSummary,
    SavedDraft,
    compose,
    html_text,
    parse_address,
    parse_addresses,
    snippet,
    summarize,
)
from assistant.tools.mail_smtp import SmtpSender

__all__ = [
    "BACKENDS", "CAPABILITY", "DRAFTS_CAPABILITY", "FETCH_BYTES", "SNIPPET_CHARS", "ImapMailbox", "ImapSmtpMail",
    "MailReader", "MailSender", "MailSummary", "SavedDraft", "SmtpSender", "compose", "draft_email", "html_text",
    "imap_date", "imap_quote", "parse_address", "parse_addresses", "parse_fetch", "search_criteria",
    "search_emails", "send_email", "snippet", "summarize",
]


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


class ImapSmtpMail(ImapMailbox, SmtpSender):
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
