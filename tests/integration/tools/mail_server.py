"""Real mail servers on loopback for the e-mail tools: Dovecot (IMAP) and aiosmtpd (SMTP).

Dovecot runs in the foreground (``dovecot -F``) from a throwaway config in a fresh temporary
directory: IMAP only, plain-text login allowed (loopback, no TLS), users in a passwd-file, maildirs
under the same directory. As root (CI), Dovecot will not run mail processes as root, so its own
``dovenull``/``dovecot`` users do the logins and internals and ``nobody`` owns the maildirs; the
directory lives under the system temp dir (world-traversable) because pytest's ``tmp_path`` is only
readable by root. As another user everything runs as that user.

aiosmtpd's ``Controller`` accepts mail after an AUTH LOGIN/PLAIN with the test credentials, keeps
every envelope and delivers it into the Dovecot INBOX with IMAP APPEND, so a message sent with
send_email can be found with search_emails.
"""

from __future__ import annotations

import grp
import imaplib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword

from assistant.config import Settings
from tests.integration.support import free_port

DOVECOT = "/usr/sbin/dovecot"
USER, PASSWORD, ADDRESS = "alice", "wonderland-7", "alice@example.org"


@dataclass
class DovecotServer:
    """A running Dovecot with one user; helpers to look into the mailboxes without the tools."""

    root: Path
    port: int
    process: subprocess.Popen
    host: str = "127.0.0.1"
    user: str = USER
    password: str = PASSWORD

    def connect(self) -> imaplib.IMAP4:
        conn = imaplib.IMAP4(self.host, self.port, timeout=10)
        conn.login(self.user, self.password)
        return conn

    def append(self, message: EmailMessage | bytes, *, flags: str = "", mailbox: str = "INBOX") -> None:
        """Store ``message``; it arrives (INTERNALDATE) when its Date header says, as with real mail."""
        raw = message if isinstance(message, bytes) else message.as_bytes(policy=policy.SMTP)
        arrived = message["Date"].datetime if isinstance(message, EmailMessage) else time.time()
        conn = self.connect()
        try:
            typ, data = conn.append(f'"{mailbox}"', f"({flags})" if flags else None,
                                    imaplib.Time2Internaldate(arrived), raw)
            assert typ == "OK", data
        finally:
            conn.logout()

    def messages(self, mailbox: str = "INBOX") -> list[tuple[set[str], EmailMessage]]:
        """(flags, message) of every message in ``mailbox``, in UID order (read-only, no \\Seen set)."""
        conn = self.connect()
        try:
            typ, data = conn.select(f'"{mailbox}"', readonly=True)
            assert typ == "OK", data
            typ, data = conn.uid("FETCH", "1:*", "(FLAGS BODY.PEEK[])")
            found = []
            for item in data:
                if isinstance(item, tuple):
                    flags = set(imaplib.ParseFlags(item[0])) if b"FLAGS" in item[0] else set()
                    raw = item[1].replace(b"\r\n", b"\n")  # as stored: CRLF line ends
                    found.append(({f.decode() for f in flags}, BytesParser(policy=policy.default).parsebytes(raw)))
            return found
        finally:
            conn.logout()

    def has_mailbox(self, mailbox: str) -> bool:
        conn = self.connect()
        try:
            return conn.select(f'"{mailbox}"', readonly=True)[0] == "OK"
        finally:
            conn.logout()


def _accounts() -> tuple[str, str, int, int]:
    """(login user, internal user, uid, gid) for Dovecot's processes and the maildir owner."""
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        return "dovenull", "dovecot", nobody.pw_uid, nobody.pw_gid
    me = pwd.getpwuid(os.geteuid()).pw_name
    return me, me, os.geteuid(), os.getegid()


def _config(root: Path, port: int) -> str:
    login_user, internal_user, uid, gid = _accounts()
    (root / "users").write_text(f"{USER}:{{PLAIN}}{PASSWORD}:{uid}:{gid}::{root / 'mail' / USER}::\n")
    not_root = "" if os.geteuid() == 0 else (
        f"default_internal_group = {grp.getgrgid(gid).gr_name}\nservice anvil {{\n  chroot =\n}}\n")
    return f"""\
protocols = imap
listen = 127.0.0.1
base_dir = {root / 'run'}
state_dir = {root / 'state'}
instance_name = test-{port}
log_path = {root / 'dovecot.log'}
info_log_path = {root / 'dovecot.log'}
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
auth_failure_delay = 0
default_login_user = {login_user}
default_internal_user = {internal_user}
first_valid_uid = 1
mail_location = maildir:{root / 'mail'}/%u
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root / 'users'}
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root / 'users'}
}}
service imap-login {{
  chroot = {'login' if os.geteuid() == 0 else ''}
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
{not_root}"""


def _wait_for_greeting(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                if s.recv(200).startswith(b"* OK"):
                    return
        except OSError:
            time.sleep(0.1)
    log_text = log.read_text() if log.exists() else "(no log)"
    raise RuntimeError(f"dovecot did not greet on 127.0.0.1:{port} (exit {process.poll()}):\n{log_text}")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()  # the master stops its children before it exits
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(name="dovecot_server")
def dovecot_server_fixture() -> Iterator[DovecotServer]:
    """Dovecot on a free loopback port with the user alice (empty mailbox)."""
    root = Path(tempfile.mkdtemp(prefix="dovecot-test-"))
    try:
        root.chmod(0o755)
        _, _, uid, gid = _accounts()
        (root / "mail").mkdir()
        os.chown(root / "mail", uid, gid)
        port = free_port()
        (root / "dovecot.conf").write_text(_config(root, port))
        process = subprocess.Popen([DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            _wait_for_greeting(port, process, root / "dovecot.log")
            yield DovecotServer(root, port, process)
        finally:
            _stop(process)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def make_message(sender: str, subject: str, body: str | None = None, *, html: str | None = None,
                 when: datetime | None = None, to: str = ADDRESS) -> EmailMessage:
    """A message as a mail client would send it: plain text, HTML, or both (multipart/alternative)."""
    from email.utils import format_datetime, make_msgid

    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message["Date"] = format_datetime(when or datetime.now().astimezone())
    message["Message-ID"] = make_msgid(domain="example.net")
    if body is not None:
        message.set_content(body)
    if html is not None:
        if body is None:
            message.set_content(html, subtype="html")
        else:
            message.add_alternative(html, subtype="html")
    return message


@dataclass
class SmtpSink:
    """The aiosmtpd server: what it received (envelopes), delivered to Dovecot's INBOX."""

    host: str
    port: int
    envelopes: list[Envelope] = field(default_factory=list)

    def messages(self) -> list[EmailMessage]:
        return [BytesParser(policy=policy.default).parsebytes((e.original_content or e.content).replace(b"\r\n", b"\n"))
                for e in self.envelopes]


class _DeliveringHandler:
    def __init__(self, sink: SmtpSink, deliver: Callable[[bytes], Any]):
        self.sink, self.deliver = sink, deliver

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:  # noqa: N802 (aiosmtpd's name)
        self.sink.envelopes.append(envelope)
        self.deliver(envelope.original_content or envelope.content)
        return "250 Message accepted for delivery"


def _authenticator(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and auth_data.login == USER.encode() \
        and auth_data.password == PASSWORD.encode()
    return AuthResult(success=ok, handled=False)


@pytest.fixture(name="smtp_server")
def smtp_server_fixture(dovecot_server: DovecotServer) -> Iterator[SmtpSink]:
    """aiosmtpd on a free loopback port requiring alice's login (no TLS: loopback only)."""
    sink = SmtpSink("127.0.0.1", free_port())
    handler = _DeliveringHandler(sink, lambda raw: dovecot_server.append(raw))
    controller = Controller(handler, hostname=sink.host, port=sink.port, authenticator=_authenticator,
                            auth_required=True, auth_require_tls=False)
    controller.start()
    try:
        yield sink
    finally:
        controller.stop()


@pytest.fixture(name="email_settings")
def email_settings_fixture(make_settings: Callable[..., Settings], dovecot_server: DovecotServer,
                   smtp_server: SmtpSink) -> Settings:
    """Settings whose [email] section points at both servers."""
    return make_settings(email={
        "imap_host": dovecot_server.host, "imap_port": dovecot_server.port, "imap_security": "none",
        "smtp_host": smtp_server.host, "smtp_port": smtp_server.port, "smtp_security": "none",
        "username": USER, "password": PASSWORD, "from_address": f"Alice Liddell <{ADDRESS}>",
        "timeout_secs": 20,
    })
