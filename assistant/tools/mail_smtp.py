"""The SMTP side of the ``imap-smtp`` e-mail backend (:mod:`assistant.tools.mail`): sending."""

from __future__ import annotations

import smtplib
import ssl
from contextlib import suppress
from email.headerregistry import Address
from email.message import EmailMessage
from typing import Any

from assistant.tools.base import ToolError
from assistant.tools.mail_message import reason


class SmtpSender:
    """An SMTP submission server: the sender of :class:`assistant.tools.mail.ImapSmtpMail`."""

    settings: Any  # assistant.config.EmailSettings
    address: Address

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
            raise ToolError(f"cannot reach the {self._smtp_where}: {reason(exc)}") from None
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
                            f"{reason(exc.smtp_error)}") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise ToolError(f"{self._smtp_where} failed: {reason(exc)}") from None
        finally:
            with suppress(OSError, smtplib.SMTPException):
                conn.quit()
