"""Outbound text messages through a Graph-style Send API: the one client that webhook replies and
reminders share.

Which endpoint carries a message depends on the recipient (:class:`Recipient`):

- **Messenger style** (no ``phone_number_id``): ``POST {api_base_url}/me/messages?access_token=<token>``
  with ``{"recipient": {"id": <id>}, "messaging_type": "RESPONSE", "message": {"text": ...}}``. A message
  that answers nothing (a reminder) names a message tag instead: ``"messaging_type": "MESSAGE_TAG",
  "tag": <tag>``. Texts are cut into parts of at most 2,000 characters (the Send API's limit).
- **WhatsApp Cloud style** (``phone_number_id`` set: the business number that received the inbound
  message): ``POST {api_base_url}/{phone_number_id}/messages`` with ``Authorization: Bearer <token>`` and
  ``{"messaging_product": "whatsapp", "to": <id>, "type": "text", "text": {"body": ...}}``. Parts of at most
  4,096 characters.

Parts are cut at a paragraph, line or word boundary when one is near, and sent in order; the first
failure stops the rest. Failures raise :class:`MessageSendError` whose message never contains the
access token (it is in the Messenger URL).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

MESSENGER, WHATSAPP = "messenger", "whatsapp"
TEXT_LIMITS = {MESSENGER: 2000, WHATSAPP: 4096}


class MessageSendError(Exception):
    """The platform's API could not be reached or refused the message."""


@dataclass(frozen=True)
class Recipient:
    """Who gets a message: the platform's id for the person (a page-scoped id, or a WhatsApp number)
    and, for WhatsApp, the id of the business phone number that sends it."""

    id: str
    phone_number_id: str | None = None

    @property
    def channel(self) -> str:
        return WHATSAPP if self.phone_number_id else MESSENGER


@dataclass(frozen=True)
class SentMessage:
    channel: str  # "messenger" or "whatsapp"
    message_ids: tuple[str, ...]  # one per part, as the platform named them (empty when it named none)

    @property
    def message_id(self) -> str | None:
        return self.message_ids[0] if self.message_ids else None


class MessageSender(Protocol):
    def send_text(self, recipient: Recipient, text: str, *, tag: str | None = None) -> SentMessage:
        """Send ``text`` (in parts when long) or raise :class:`MessageSendError`. ``tag`` marks a
        Messenger message sent outside a conversation (ignored for WhatsApp)."""
        ...

    def close(self) -> None: ...


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in parts of at most ``limit`` characters, cut at the last paragraph break, line break
    or space in the second half of a part (else hard at the limit). Nothing but the cut whitespace is lost."""
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            cut = window.rfind(separator)
            if cut >= limit // 2:
                break
        if cut < limit // 2:
            cut = limit
        parts.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        parts.append(rest)
    return parts


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def graph_error(response: httpx.Response) -> str:
    """The Graph error's message (``{"error": {"message"}}``), else the body or the reason phrase."""
    error = _json(response).get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return str(message or response.text or response.reason_phrase)[:300]


def _message_id(channel: str, data: dict[str, Any]) -> str | None:
    if channel == WHATSAPP:
        messages = data.get("messages")
        first = messages[0] if isinstance(messages, list) and messages else None
        found = first.get("id") if isinstance(first, dict) else None
    else:
        found = data.get("message_id")
    return str(found) if found else None


class GraphMessageSender:
    """:class:`MessageSender` over httpx. ``api_base_url`` includes any version prefix
    (``https://graph.facebook.com/v19.0``). A given ``client`` is used as is (and closed by
    :meth:`close`); otherwise one is opened on first use and reopened after :meth:`close`."""

    def __init__(self, api_base_url: str, access_token: str, *, timeout_secs: float = 15.0,
                 client: httpx.Client | None = None):
        self.base_url = api_base_url.rstrip("/")
        self._token = access_token
        self._timeout = timeout_secs
        self._client = client
        self._lock = threading.Lock()

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self._timeout)
            return self._client

    def _scrub(self, text: str) -> str:
        return text.replace(self._token, "***") if self._token else text

    def _post(self, channel: str, url: str, body: dict[str, Any], **kwargs: Any) -> str | None:
        try:
            response = self._http().post(url, json=body, **kwargs)
        except httpx.HTTPError as exc:
            raise MessageSendError(self._scrub(f"{channel} API unreachable: {type(exc).__name__}: {exc}")) from None
        if not response.is_success:
            raise MessageSendError(
                self._scrub(f"{channel} API answered HTTP {response.status_code}: {graph_error(response)}")
            )
        return _message_id(channel, _json(response))

    def _send_part(self, recipient: Recipient, text: str, tag: str | None) -> str | None:
        if recipient.channel == WHATSAPP:
            body: dict[str, Any] = {"messaging_product": "whatsapp", "to": recipient.id, "type": "text",
                                    "text": {"body": text}}
            return self._post(WHATSAPP, f"{self.base_url}/{recipient.phone_number_id}/messages", body,
                              headers={"Authorization": f"Bearer {self._token}"})
        body = {"recipient": {"id": recipient.id}}
        body.update({"messaging_type": "MESSAGE_TAG", "tag": tag} if tag else {"messaging_type": "RESPONSE"})
        body["message"] = {"text": text}
        return self._post(MESSENGER, f"{self.base_url}/me/messages", body, params={"access_token": self._token})

    def send_text(self, recipient: Recipient, text: str, *, tag: str | None = None) -> SentMessage:
        parts = split_text(text, TEXT_LIMITS[recipient.channel])
        if not parts:
            raise MessageSendError("nothing to send: the text is empty")
        ids: list[str] = []
        for number, part in enumerate(parts, start=1):
            try:
                message_id = self._send_part(recipient, part, tag)
            except MessageSendError as exc:
                if len(parts) == 1:
                    raise
                raise MessageSendError(f"part {number} of {len(parts)}: {exc}") from None
            if message_id:
                ids.append(message_id)
        return SentMessage(recipient.channel, tuple(ids))

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
