"""The e-mail tools against real servers on loopback: Dovecot (IMAP) and aiosmtpd (SMTP)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from assistant.config import Settings
from assistant.tools import mail_imap
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.catalog import Toolbox, build_toolbox
from assistant.tools.mail import CAPABILITY, DRAFTS_CAPABILITY, ImapSmtpMail, draft_email, search_emails, send_email
from tests.integration.support import free_port
from tests.integration.tools.mail_server import (  # noqa: F401
    ADDRESS,
    USER,
    DovecotServer,
    SmtpSink,
    dovecot_server_fixture,
    email_settings_fixture,
    make_message,
    smtp_server_fixture,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS"),  # loopback only
]

NOW = datetime.now().astimezone().replace(microsecond=0)


def _toolbox(settings: Settings) -> Toolbox:
    return build_toolbox(CapabilityDeps(settings), [CAPABILITY, DRAFTS_CAPABILITY])


@pytest.fixture
def ctx(email_settings: Settings) -> ToolContext:
    return _toolbox(email_settings).context("user-1")


@pytest.fixture
def inbox(dovecot_server: DovecotServer) -> DovecotServer:
    """Five messages, appended out of date order; two of them read."""
    seed = [
        (make_message("Bob <bob@example.net>", "Garden party on Saturday",
                      "Hi Alice,\n\ncome to the garden party on Saturday at three.", when=NOW - timedelta(days=3)),
         "\\Seen"),
        (make_message("Old Friend <old@example.net>", "Photos from last summer", "The photos are attached.",
                      when=NOW - timedelta(days=40)), "\\Seen"),
        (make_message("Carol <carol@example.com>", "Invoice 2024-117", html=(
            "<html><head><style>p {color: red}</style></head><body><p>Your <b>invoice</b> is due "
            "on Friday.</p></body></html>"), when=NOW - timedelta(days=2)), ""),
        (make_message("Dave <dave@example.org>", "Re: garden tools", "I can lend you the garden tools.",
                      html="<p>I can lend you the <i>garden</i> tools.</p>", when=NOW - timedelta(days=1)), ""),
        (make_message("Erin Müller <erin@example.de>", "Bericht für Müller", "Grüße aus München.",
                      when=NOW - timedelta(hours=5)), ""),
    ]
    for message, flags in seed:
        dovecot_server.append(message, flags=flags)
    return dovecot_server


def _subjects(found: list[dict]) -> list[str]:
    return [m["subject"] for m in found]


def test_search_by_word_finds_sender_subject_and_body_newest_first(ctx: ToolContext, inbox: DovecotServer) -> None:
    found = search_emails(ctx, {"query": "garden"})
    assert _subjects(found) == ["Re: garden tools", "Garden party on Saturday"]
    tools, party = found
    assert tools["from"] == "Dave <dave@example.org>" and tools["to"] == ADDRESS
    assert tools["snippet"] == "I can lend you the garden tools." and tools["unread"] is True
    assert datetime.fromisoformat(tools["date"]) == NOW - timedelta(days=1)
    assert party["unread"] is False and party["snippet"].startswith("Hi Alice, come to the garden party")
    assert int(tools["id"]) > 0 and tools["id"] != party["id"]
    assert _subjects(search_emails(ctx, {"query": "carol"})) == ["Invoice 2024-117"]  # the sender
    assert _subjects(search_emails(ctx, {"query": "garden TOOLS"})) == ["Re: garden tools"]  # every word
    assert search_emails(ctx, {"query": "garden submarine"}) == []


def test_html_mail_gives_a_text_snippet(ctx: ToolContext, inbox: DovecotServer) -> None:
    [invoice] = search_emails(ctx, {"query": "invoice"})
    assert invoice["snippet"] == "Your invoice is due on Friday."


def test_non_ascii_words(ctx: ToolContext, inbox: DovecotServer) -> None:
    [found] = search_emails(ctx, {"query": "Müller"})
    assert found["subject"] == "Bericht für Müller" and found["from"] == "Erin Müller <erin@example.de>"
    assert search_emails(ctx, {"query": "München"})[0]["snippet"] == "Grüße aus München."


def test_unread_only_limit_and_since(ctx: ToolContext, inbox: DovecotServer) -> None:
    unread = search_emails(ctx, {"unread_only": True})
    assert _subjects(unread) == ["Bericht für Müller", "Re: garden tools", "Invoice 2024-117"]
    assert all(m["unread"] for m in unread)
    everything = search_emails(ctx, {})
    assert len(everything) == 5 and everything[-1]["subject"] == "Photos from last summer"
    assert _subjects(search_emails(ctx, {"limit": 2})) == ["Bericht für Müller", "Re: garden tools"]
    recent = search_emails(ctx, {"since_days": 7})
    assert len(recent) == 4 and "Photos from last summer" not in _subjects(recent)
    assert _subjects(search_emails(ctx, {"query": "garden", "unread_only": True})) == ["Re: garden tools"]


def test_searching_does_not_mark_messages_read(ctx: ToolContext, inbox: DovecotServer,
                                               email_settings: Settings) -> None:
    before = {m["Subject"]: flags for flags, m in inbox.messages()}
    assert len(search_emails(ctx, {"limit": 50})) == 5
    assert {m["Subject"]: flags for flags, m in inbox.messages()} == before
    assert ImapSmtpMail.from_settings(email_settings.email).unread_count() == 3


def test_draft_email_creates_the_drafts_mailbox(ctx: ToolContext, inbox: DovecotServer) -> None:
    assert not inbox.has_mailbox("Drafts")
    result = draft_email(ctx, {"to": "bob@example.net", "cc": ["Carol <carol@example.com>"],
                               "subject": "Saturday", "body": "Dear Bob,\n\nI will bring a cake."})
    assert result["mailbox"] == "Drafts" and result["subject"] == "Saturday"
    assert inbox.has_mailbox("Drafts")
    [(flags, draft)] = inbox.messages("Drafts")
    assert "\\Draft" in flags
    assert draft["From"] == f"Alice Liddell <{ADDRESS}>" and draft["To"] == "bob@example.net"
    assert draft["Cc"] == "Carol <carol@example.com>" and draft.get_content() == "Dear Bob,\n\nI will bring a cake.\n"
    second = draft_email(ctx, {"to": ["bob@example.net"], "subject": "Second thoughts", "body": "Or a pie."})
    assert int(second["draft_id"]) == int(result["draft_id"]) + 1  # the UIDs of the Drafts mailbox
    assert len(inbox.messages("Drafts")) == 2 and len(inbox.messages()) == 5  # nothing sent


def test_send_email_reaches_the_smtp_server(ctx: ToolContext, inbox: DovecotServer,
                                            smtp_server: SmtpSink) -> None:
    result = send_email(ctx, {"to": "bob@example.net, Dave <dave@example.org>", "cc": "carol@example.com",
                              "subject": "Cake for the garden party", "body": "I will bring a lemon cake."})
    assert result["sent"] is True and result["to"] == ["bob@example.net", "dave@example.org"]
    [envelope] = smtp_server.envelopes
    assert envelope.mail_from == ADDRESS
    assert envelope.rcpt_tos == ["bob@example.net", "dave@example.org", "carol@example.com"]
    [message] = smtp_server.messages()
    assert message["From"] == f"Alice Liddell <{ADDRESS}>"
    assert message["To"] == "bob@example.net, Dave <dave@example.org>" and message["Cc"] == "carol@example.com"
    assert message["Subject"] == "Cake for the garden party" and message["Message-ID"] == result["message_id"]
    assert abs(message["Date"].datetime - datetime.now().astimezone()) < timedelta(hours=1)
    assert message.get_content() == "I will bring a lemon cake.\n"
    found = search_emails(ctx, {"query": "lemon cake", "unread_only": True})  # delivered to the INBOX
    assert _subjects(found) == ["Cake for the garden party"] and found[0]["from"] == f"Alice Liddell <{ADDRESS}>"


def test_invalid_addresses_are_named_and_nothing_is_sent(ctx: ToolContext, smtp_server: SmtpSink) -> None:
    with pytest.raises(ToolError, match="invalid e-mail addresses: bob, carol@"):
        send_email(ctx, {"to": ["bob", "dave@example.org", "carol@"], "subject": "Hi", "body": "Hello"})
    assert smtp_server.envelopes == []


def test_wrong_password_is_a_tool_error(make_settings: Callable[..., Settings],
                                        email_settings: Settings) -> None:
    section = email_settings.email.model_dump() | {"password": "not-the-password"}
    ctx = _toolbox(make_settings(email=section)).context("user-1")
    where = f"{section['imap_host']}:{section['imap_port']}"
    with pytest.raises(ToolError, match=f"IMAP server {where} refused login for user {USER}"):
        search_emails(ctx, {"query": "garden"})
    with pytest.raises(ToolError, match="refused login for user alice"):
        draft_email(ctx, {"to": "bob@example.net", "subject": "x", "body": "y"})
    with pytest.raises(ToolError, match=f"SMTP server 127.0.0.1:{section['smtp_port']} refused login for user alice"):
        send_email(ctx, {"to": "bob@example.net", "subject": "x", "body": "y"})


def test_servers_down_are_tool_errors(make_settings: Callable[..., Settings]) -> None:
    imap_port, smtp_port = free_port(), free_port()  # nothing listens there
    ctx = _toolbox(make_settings(email={
        "imap_host": "127.0.0.1", "imap_port": imap_port, "imap_security": "none",
        "smtp_host": "127.0.0.1", "smtp_port": smtp_port, "smtp_security": "none",
        "username": USER, "password": "x", "from_address": ADDRESS, "timeout_secs": 5,
    })).context("user-1")
    with pytest.raises(ToolError, match=f"cannot reach the IMAP server 127.0.0.1:{imap_port}: Connection refused"):
        search_emails(ctx, {})
    with pytest.raises(ToolError, match=f"cannot reach the SMTP server 127.0.0.1:{smtp_port}: Connection refused"):
        send_email(ctx, {"to": "bob@example.net", "subject": "x", "body": "y"})


def test_capabilities_are_registered_only_when_configured(make_settings: Callable[..., Settings],
                                                          email_settings: Settings) -> None:
    configured = _toolbox(email_settings)
    assert configured.registry.names() == ["draft_email", "search_emails", "send_email"]
    assert isinstance(configured.backends["email"], ImapSmtpMail)
    unset = _toolbox(make_settings())
    assert unset.registry.names() == [] and unset.backends == {}
    assert [(s.name, s.configured, s.reason) for s in unset.status] == [
        ("email", False, "not configured"), ("email_drafts", False, "not configured")]


def test_servers_without_sort_or_literal_plus(ctx: ToolContext, inbox: DovecotServer,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Without SORT the newest arrivals come first; without LITERAL+/- non-ASCII words are refused."""
    plain_imap4 = {"IMAP4REV1", "AUTH=PLAIN"}
    monkeypatch.setattr(mail_imap, "_capabilities", lambda conn: plain_imap4)
    assert _subjects(search_emails(ctx, {"query": "garden"})) == ["Re: garden tools", "Garden party on Saturday"]
    assert _subjects(search_emails(ctx, {"limit": 2})) == ["Bericht für Müller", "Re: garden tools"]
    with pytest.raises(ToolError, match="cannot search for non-ASCII words"):
        search_emails(ctx, {"query": "Müller"})
