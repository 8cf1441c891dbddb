"""The e-mail tools with a fake mailbox, and their pure parts: addresses, messages, snippets, IMAP keys."""

from __future__ import annotations

from datetime import date, timedelta
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from types import SimpleNamespace

import pytest

from assistant.errors import ConfigError
from assistant.tools.base import CapabilityDeps, CapabilityUnavailable, ToolContext, ToolError
from assistant.tools.catalog import build_toolbox
from assistant.tools.mail import (
    CAPABILITY,
    DRAFTS_CAPABILITY,
    ImapSmtpMail,
    MailSummary,
    SavedDraft,
    compose,
    draft_email,
    imap_date,
    parse_address,
    parse_addresses,
    parse_fetch,
    search_criteria,
    search_emails,
    send_email,
    snippet,
    summarize,
)

ALICE = Address("Alice Liddell", addr_spec="alice@example.org")


class FakeMail:
    """A MailReader and MailSender that records what it was asked."""

    def __init__(self, found: list[MailSummary] = (), refused: list[str] = ()):
        self.address = ALICE
        self.found, self.refused = list(found), list(refused)
        self.searches: list[dict] = []
        self.sent: list[EmailMessage] = []
        self.drafts: list[EmailMessage] = []

    def search(self, words: list[str], *, unread_only: bool, limit: int, since: date | None) -> list[MailSummary]:
        self.searches.append({"words": words, "unread_only": unread_only, "limit": limit, "since": since})
        return self.found[:limit]

    def unread_count(self) -> int:
        return sum(m.unread for m in self.found)

    def save_draft(self, message: EmailMessage) -> SavedDraft:
        self.drafts.append(message)
        return SavedDraft(str(len(self.drafts)), "Drafts")

    def send(self, message: EmailMessage) -> list[str]:
        self.sent.append(message)
        return self.refused


def _ctx(mail: FakeMail) -> ToolContext:
    return ToolContext("user-1", {"email": mail, "email_drafts": mail})


def _summary(uid: str, subject: str, unread: bool = True) -> MailSummary:
    return MailSummary(uid, "Bob <bob@example.net>", "alice@example.org", subject, "2024-05-01T10:00:00+02:00",
                       "Hello", unread)


# --- tools --------------------------------------------------------------------------------------


def test_tool_names_capabilities_and_schemas() -> None:
    assert [t.name for t in CAPABILITY.tools] == ["search_emails", "send_email"]
    assert [t.name for t in DRAFTS_CAPABILITY.tools] == ["draft_email"]
    assert CAPABILITY.name == "email" and DRAFTS_CAPABILITY.name == "email_drafts"
    assert "required" not in search_emails.spec.parameters
    assert send_email.spec.parameters["required"] == ["to", "subject", "body"]
    assert draft_email.spec.parameters["required"] == ["to", "subject", "body"]


def test_search_emails_passes_words_and_window() -> None:
    mail = FakeMail([_summary("7", "Garden party"), _summary("3", "Invoice", unread=False)])
    found = search_emails(_ctx(mail), {"query": "  garden   party ", "unread_only": True, "limit": 1,
                                       "since_days": 3})
    assert found == [{"id": "7", "from": "Bob <bob@example.net>", "to": "alice@example.org",
                      "subject": "Garden party", "date": "2024-05-01T10:00:00+02:00", "snippet": "Hello",
                      "unread": True}]
    assert mail.searches == [{"words": ["garden", "party"], "unread_only": True, "limit": 1,
                              "since": date.today() - timedelta(days=3)}]
    search_emails(_ctx(mail), {})
    assert mail.searches[-1] == {"words": [], "unread_only": False, "limit": 10, "since": None}
    assert mail.unread_count() == 1


@pytest.mark.parametrize("arguments", [
    {"limit": 0}, {"limit": 51}, {"since_days": -1}, {"query": "x" * 501}, {"folder": "Sent"}, {"unread_only": "maybe"},
])
def test_search_arguments_are_validated(arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for search_emails"):
        search_emails(_ctx(FakeMail()), arguments)


def test_send_email_composes_and_sends() -> None:
    mail = FakeMail()
    result = send_email(_ctx(mail), {"to": "bob@example.net; \"Doe, Dave\" <dave@example.org>",
                                     "cc": ["carol@example.com"], "subject": "Cake\nfor Saturday",
                                     "body": "I will bring a cake."})
    [message] = mail.sent
    assert result == {"sent": True, "message_id": message["Message-ID"], "to": ["bob@example.net", "dave@example.org"]}
    assert message["From"] == "Alice Liddell <alice@example.org>"
    assert message["To"] == 'bob@example.net, "Doe, Dave" <dave@example.org>'
    assert message["Cc"] == "carol@example.com" and message["Subject"] == "Cake for Saturday"
    assert message.get_content() == "I will bring a cake.\n"


def test_send_email_reports_refused_recipients() -> None:
    result = send_email(_ctx(FakeMail(refused=["bob@example.net"])),
                        {"to": ["bob@example.net", "carol@example.com"], "subject": "Hi", "body": "Hello"})
    assert result["sent"] is True and result["refused"] == ["bob@example.net"]


@pytest.mark.parametrize(("to", "named"), [
    ("bob", "invalid e-mail address: bob"),
    (["bob@example.net", "carol@", "dave at example"], "invalid e-mail addresses: carol@, dave at example"),
    ("", "at least one recipient"),
    ([], "at least one recipient"),
])
def test_bad_recipients_are_named_and_nothing_is_sent(to: str | list[str], named: str) -> None:
    mail = FakeMail()
    for tool in (send_email, draft_email):
        with pytest.raises(ToolError, match=named):
            tool(_ctx(mail), {"to": to, "subject": "Hi", "body": "Hello"})
    with pytest.raises(ToolError, match="invalid e-mail address: nobody"):
        send_email(_ctx(mail), {"to": "bob@example.net", "cc": "nobody", "subject": "Hi", "body": "Hello"})
    assert mail.sent == [] and mail.drafts == []


def test_draft_email_saves_a_draft() -> None:
    mail = FakeMail()
    result = draft_email(_ctx(mail), {"to": ["bob@example.net"], "subject": "Saturday", "body": "Dear Bob"})
    assert result == {"draft_id": "1", "mailbox": "Drafts", "subject": "Saturday"}
    assert mail.drafts[0]["To"] == "bob@example.net" and mail.sent == []


def test_backend_errors_reach_the_model_as_tool_errors() -> None:
    class Down(FakeMail):
        def search(self, *args: object, **kwargs: object) -> list[MailSummary]:
            raise ToolError("cannot reach the IMAP server 127.0.0.1:1: Connection refused")

    with pytest.raises(ToolError, match="cannot reach the IMAP server"):
        search_emails(_ctx(Down()), {"query": "x"})
    with pytest.raises(ToolError, match="email capability is not configured"):
        search_emails(ToolContext("u"), {})


# --- addresses and messages -----------------------------------------------------------------------


def test_parse_address() -> None:
    assert parse_address("Bob <bob@example.net>") == Address("Bob", addr_spec="bob@example.net")
    assert parse_address(" bob@example.net ").addr_spec == "bob@example.net"
    for bad in ("bob", "bob@", "@example.net", "bob@localhost", "bob smith@example.net", "<>", ""):
        assert parse_address(bad) is None, bad


def test_parse_addresses_accepts_lists_and_separated_strings() -> None:
    parsed = parse_addresses(['"Smith, Ann" <ann@example.com>, bob@example.net', "carol@example.com;"])
    assert [a.addr_spec for a in parsed] == ["ann@example.com", "bob@example.net", "carol@example.com"]
    assert parsed[0].display_name == "Smith, Ann"
    assert parse_addresses(None) == [] and parse_addresses(" , ") == []


def test_compose_sets_the_headers() -> None:
    message = compose(ALICE, [Address(addr_spec="bob@example.net")], "Hi", "Hello Bob")
    assert message["From"] == "Alice Liddell <alice@example.org>" and "Cc" not in message
    assert message["Message-ID"].endswith("@example.org>") and message["Date"].datetime is not None
    assert b"\r\n" in message.as_bytes(policy=policy.SMTP)


# --- snippets and summaries ---------------------------------------------------------------------


def _message(**headers: str) -> EmailMessage:
    message = EmailMessage()
    for name, value in {"From": "Bob <bob@example.net>", "To": "alice@example.org", "Subject": "Hi",
                        "Date": "Wed, 01 May 2024 10:00:00 +0200", **headers}.items():
        message[name] = value
    return message


def test_snippet_prefers_plain_text_in_alternative() -> None:
    message = _message()
    message.set_content("Plain   text\n\nbody")
    message.add_alternative("<p>HTML body</p>", subtype="html")
    assert snippet(message) == "Plain text body"


def test_snippet_of_html_mail_is_its_visible_text() -> None:
    message = _message()
    message.set_content("<html><head><title>T</title><style>p{}</style></head><body><script>x()</script>"
                        "<p>Your <b>invoice</b>&nbsp;is due.</p></body></html>", subtype="html")
    assert snippet(message) == "Your invoice is due."


def test_snippet_skips_attachments_and_is_cut_at_a_word() -> None:
    message = _message()
    message.set_content("word " * 100)
    message.add_attachment(b"%PDF-1.4 binary", maintype="application", subtype="pdf", filename="a.pdf")
    text = snippet(message)
    assert text.endswith("word…") and len(text) <= 201 and "PDF" not in text
    only_attachment = _message()
    only_attachment.add_attachment(b"\x00\x01", maintype="application", subtype="octet-stream")
    assert snippet(only_attachment) == ""


def test_snippet_survives_an_unknown_charset() -> None:
    raw = (b"From: bob@example.net\r\nSubject: x\r\nContent-Type: text/plain; charset=x-unknown\r\n\r\n"
           b"caf\xc3\xa9 au lait\r\n")
    assert summarize("1", raw, []).snippet == "café au lait"


def test_summarize_reads_headers_flags_and_date() -> None:
    message = _message(Subject="=?utf-8?q?Gr=C3=BC=C3=9Fe?=")
    message.set_content("Hello")
    summary = summarize("42", message.as_bytes(), ["\\Seen", "\\Recent"])
    assert summary == MailSummary("42", "Bob <bob@example.net>", "alice@example.org", "Grüße",
                                  "2024-05-01T10:00:00+02:00", "Hello", False)
    assert summarize("43", b"Subject: no date\r\n\r\nx", []).date is None
    assert summarize("44", b"Date: yesterday-ish\r\n\r\nx", []).date is None
    assert summarize("45", b"\r\nx", ["\\Flagged"]).unread is True


# --- IMAP pieces ----------------------------------------------------------------------------------


def test_search_criteria() -> None:
    assert search_criteria([], unread_only=False, since=None, literals=True) == [b"ALL"]
    assert search_criteria(['say "hi"'], unread_only=True, since=date(2024, 3, 5), literals=False) == [
        b'OR OR FROM "say \\"hi\\"" SUBJECT "say \\"hi\\"" BODY "say \\"hi\\""', b"UNSEEN", b"SINCE 5-Mar-2024"]
    [key] = search_criteria(["Müller"], unread_only=False, since=None, literals=True)
    assert key == b"OR OR FROM {7+}\r\nM\xc3\xbcller SUBJECT {7+}\r\nM\xc3\xbcller BODY {7+}\r\nM\xc3\xbcller"
    with pytest.raises(ToolError, match="non-ASCII"):
        search_criteria(["Müller"], unread_only=False, since=None, literals=False)
    assert imap_date(date(2024, 12, 25)) == "25-Dec-2024"


def test_parse_fetch_finds_uid_and_flags_before_or_after_the_body() -> None:
    data = [(b"1 (UID 5 FLAGS (\\Seen) BODY[]<0> {3}", b"abc"), b")",
            (b"2 (UID 9 BODY[]<0> {3}", b"def"), b" FLAGS (\\Draft \\Recent))"]
    assert parse_fetch(data) == [("5", ["\\Seen"], b"abc"), ("9", ["\\Draft", "\\Recent"], b"def")]


# --- configuration --------------------------------------------------------------------------------


def _email(**overrides: object) -> SimpleNamespace:
    values = {"backend": "imap-smtp", "imap_host": "imap.example.org", "smtp_host": "smtp.example.org",
              "username": "alice@example.org", "password": "secret", "from_address": None, **overrides}
    return SimpleNamespace(**values)


def test_backend_from_settings() -> None:
    assert ImapSmtpMail.from_settings(_email()).address.addr_spec == "alice@example.org"  # the username
    named = ImapSmtpMail.from_settings(_email(username="alice", from_address="Alice <a@example.org>"))
    assert str(named.address) == "Alice <a@example.org>"
    with pytest.raises(CapabilityUnavailable, match="username and password"):
        ImapSmtpMail.from_settings(_email(password=None))
    with pytest.raises(CapabilityUnavailable, match="from_address"):
        ImapSmtpMail.from_settings(_email(username="alice"))


def test_capabilities_follow_the_email_section(make_settings) -> None:  # noqa: ANN001
    capabilities = [CAPABILITY, DRAFTS_CAPABILITY]
    unset = build_toolbox(CapabilityDeps(make_settings()), capabilities)
    assert unset.registry.names() == [] and {s.reason for s in unset.status} == {"not configured"}
    section = {"imap_host": "127.0.0.1", "smtp_host": "127.0.0.1", "username": "alice", "password": "x",
               "from_address": "alice@example.org"}
    configured = build_toolbox(CapabilityDeps(make_settings(email=section)), capabilities)
    assert configured.registry.names() == ["draft_email", "search_emails", "send_email"]  # no connection yet
    no_login = build_toolbox(CapabilityDeps(make_settings(email={**section, "password": None})), capabilities)
    assert no_login.registry.names() == [] and all(s.configured and not s.available for s in no_login.status)
    with pytest.raises(ConfigError, match="email.backend: unknown backend 'pop3'"):
        build_toolbox(CapabilityDeps(make_settings(email={**section, "backend": "pop3"})), capabilities)
