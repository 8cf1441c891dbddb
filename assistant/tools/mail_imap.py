"""The IMAP side of the ``imap-smtp`` e-mail backend (:mod:`assistant.tools.mail`): search, unread
count and drafts, over a logged-in connection per call; the SEARCH/FETCH pieces are pure."""

from __future__ import annotations

import imaplib
import re
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import date
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from typing import Any

from assistant.tools.base import ToolError
from assistant.tools.mail_message import MailSummary, SavedDraft, reason, summarize

FETCH_BYTES = 64 * 1024
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_FETCH_META = re.compile(rb"UID (\d+)|FLAGS \(([^)]*)\)")
_APPENDUID = re.compile(rb"APPENDUID \d+ (\d+)")


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


class ImapMailbox:
    """An IMAP mailbox: the reader and draft store of :class:`assistant.tools.mail.ImapSmtpMail`."""

    settings: Any  # assistant.config.EmailSettings
    address: Address

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
            raise ToolError(f"cannot reach the {self._imap_where}: {reason(exc)}") from None
        try:
            try:
                conn.login(self.settings.username, self.settings.password)
            except imaplib.IMAP4.error:
                raise ToolError(f"{self._imap_where} refused login for user {self.settings.username}") from None
            yield conn
        except (OSError, imaplib.IMAP4.error) as exc:
            raise ToolError(f"{self._imap_where} failed: {reason(exc)}") from None
        finally:
            with suppress(OSError, imaplib.IMAP4.error):
                conn.logout()

    def _examine(self, conn: imaplib.IMAP4, mailbox: str) -> None:
        typ, data = conn.select(imap_quote(mailbox), readonly=True)
        if typ != "OK":
            raise ToolError(f"{self._imap_where} has no mailbox {mailbox!r}: {reason(data)}")

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
            raise ToolError(f"{self._imap_where} refused the search: {reason(data)}")
        uids = (data[0] or b"").split()
        return uids if sort else uids[::-1]

    def unread_count(self) -> int:
        """How many messages of the mailbox are unread (for the briefing)."""
        with self.imap() as conn:
            typ, data = conn.status(imap_quote(self.settings.mailbox), "(UNSEEN)")
            match = re.search(rb"UNSEEN (\d+)", data[0] or b"") if typ == "OK" else None
            if match is None:
                raise ToolError(f"{self._imap_where} did not report unread messages: {reason(data)}")
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
                                    f"{reason(created)}")
                typ, data = _append_draft(conn, mailbox, raw)
            if typ != "OK":
                raise ToolError(f"{self._imap_where} refused the draft: {reason(data)}")
        match = _APPENDUID.search(data[0] or b"")  # UIDPLUS; else the Message-ID identifies it
        return SavedDraft(match.group(1).decode() if match else str(message["Message-ID"]),
                          self.settings.drafts_mailbox)


def _append_draft(conn: imaplib.IMAP4, mailbox: str, raw: bytes) -> tuple[str, list[Any]]:
    return conn.append(mailbox, r"(\Draft \Seen)", imaplib.Time2Internaldate(time.time()), raw)


def _capabilities(conn: imaplib.IMAP4) -> set[str]:
    """The capabilities after login (servers often announce more than in their greeting)."""
    typ, data = conn.capability()
    return set(data[0].decode("ascii", "replace").upper().split()) if typ == "OK" and data[0] else set()
