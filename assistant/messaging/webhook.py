"""The webhook's checks, the inbound payload, and the log of message ids that makes processing once-only.

- **Platform**: the last path segment must equal ``[messenger] platform`` (else 404).
- **Verification** (GET): ``hub.mode`` must be ``subscribe`` and ``hub.verify_token`` equal to
  ``[messenger] verify_token`` (constant-time); the answer is ``hub.challenge``. A wrong mode or token is
  403 ``FORBIDDEN``; no verify token configured is 503.
- **Signature** (POST), when ``signature_required``: ``X-Hub-Signature-256: sha256=<hex>`` must be the
  HMAC-SHA256 of the raw body keyed with ``app_secret``, compared with :func:`hmac.compare_digest`.
  Missing, malformed or wrong is 401 ``UNAUTHORIZED`` (:class:`SignatureError`); no ``app_secret``
  while a signature is required is 503. With ``signature_required = false`` nothing is checked.
- **Payload**: read by shape, whatever its ``object`` names. WhatsApp Cloud style (the spec's):
  ``entry[].changes[].value.messages[]`` with ``{id, from, type, text: {body}}`` and the receiving number
  in ``value.metadata.phone_number_id``; Messenger style: ``entry[].messaging[]`` with ``{sender: {id},
  message: {mid, text}}``. Anything else in an entry (statuses, read receipts, echoes of our own
  messages, postbacks) carries no message and is skipped, so a delivery of another kind is accepted
  with no messages. Not JSON or not an object is 400; a known part with the wrong type or a message
  without its sender is 422 naming the field (``entry[0].changes[0].value.messages[0].from``).
  A message without an id is identified by a digest of its content (so an identical redelivery is
  still a duplicate).
- **Dedupe**: :meth:`WebhookLog.claim` inserts the message id (insert-or-ignore, one statement) before
  any processing; only the delivery whose insert succeeded processes it, even when copies arrive at
  the same moment. The row then records the outcome (:class:`Status`). No message text is stored here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from assistant.clock import iso
from assistant.config import MessengerSettings
from assistant.errors import (
    AssistantError,
    BadRequestError,
    ForbiddenError,
    NotFoundError,
    ServiceUnavailableError,
    ValidationFailed,
)
from assistant.messaging.sender import Recipient
from assistant.storage.db import Database

SIGNATURE_HEADER = "X-Hub-Signature-256"
_SIGNATURE = re.compile(r"sha256=([0-9a-fA-F]{64})")


class SignatureError(AssistantError):
    """The POST's signature is missing, malformed or wrong: 401 ``UNAUTHORIZED`` (no Bearer challenge:
    the webhook is not authenticated by API keys)."""

    code = "UNAUTHORIZED"


# --- checks --------------------------------------------------------------------------------------


def check_platform(settings: MessengerSettings, platform: str) -> None:
    if platform != settings.platform:
        raise NotFoundError(f"no webhook for platform {platform!r} (the configured platform is "
                            f"{settings.platform!r}: messenger.platform)")


def verify_subscription(settings: MessengerSettings, mode: str | None, token: str | None,
                        challenge: str | None) -> str:
    """The challenge to echo when the platform's subscription request is genuine."""
    if not settings.verify_token:
        raise ServiceUnavailableError("messenger.verify_token is not configured: subscriptions cannot be verified")
    if mode != "subscribe":
        got = "missing" if mode is None else f"{mode!r}"
        raise ForbiddenError(f"hub.mode must be 'subscribe' ({got})")
    if token is None or not hmac.compare_digest(token.encode(), settings.verify_token.encode()):
        raise ForbiddenError("hub.verify_token does not match messenger.verify_token")
    if not challenge:
        raise ValidationFailed("hub.challenge is required", [{"field": "hub.challenge", "error": "required"}])
    return challenge


def signature_of(app_secret: str, body: bytes) -> str:
    """The header value a platform sends for ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


def check_signature(settings: MessengerSettings, body: bytes, header: str | None) -> None:
    if not settings.signature_required:
        return
    if not settings.app_secret:
        raise ServiceUnavailableError(
            "messenger.signature_required is true but messenger.app_secret is not set: deliveries cannot be "
            "verified, so none is accepted (set the app secret, or signature_required = false)"
        )
    if not header or not header.strip():
        raise SignatureError(f"missing {SIGNATURE_HEADER} header (sha256=<hex HMAC-SHA256 of the body>)")
    found = _SIGNATURE.fullmatch(header.strip())
    if found is None:
        raise SignatureError(f"{SIGNATURE_HEADER} must be 'sha256=' followed by 64 hexadecimal digits")
    expected = signature_of(settings.app_secret, body).removeprefix("sha256=")
    if not hmac.compare_digest(expected.encode(), found.group(1).lower().encode()):
        raise SignatureError(f"{SIGNATURE_HEADER} does not match the body (HMAC-SHA256 with messenger.app_secret)")


# --- the payload ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class InboundMessage:
    message_id: str
    sender_id: str
    type: str  # "text", "image", "audio", ... as the platform names it; "unknown" when it names none
    text: str | None = None
    phone_number_id: str | None = None  # WhatsApp: the business number that received it

    @property
    def recipient(self) -> Recipient:
        """Where the reply goes: back to the sender, through the endpoint matching the payload."""
        return Recipient(self.sender_id, self.phone_number_id)


@dataclass(frozen=True)
class Delivery:
    object: str
    messages: tuple[InboundMessage, ...]


class _Reader:
    """Collects ``{field, error}`` for every part of the payload with the wrong shape."""

    def __init__(self) -> None:
        self.fields: list[dict[str, str]] = []

    def fail(self, path: str, error: str) -> None:
        self.fields.append({"field": path, "error": error})

    def get(self, obj: dict[str, Any], key: str, path: str, kind: type | tuple[type, ...], *,
            required: bool = False, what: str = "") -> Any:
        value = obj.get(key)
        where = f"{path}.{key}" if path else key
        if value is None:
            if required:
                self.fail(where, "required" + (f" ({what})" if what else ""))
            return None
        if not isinstance(value, kind) or isinstance(value, bool):
            self.fail(where, f"must be {_kind_name(kind)}")
            return None
        return value

    def items(self, obj: dict[str, Any], key: str, path: str, *, required: bool = False) -> list[tuple[str, dict]]:
        """``(path, object)`` of each element of an array of objects."""
        values = self.get(obj, key, path, list, required=required)
        found = []
        for i, item in enumerate(values or ()):
            where = f"{path}.{key}[{i}]" if path else f"{key}[{i}]"
            if isinstance(item, dict):
                found.append((where, item))
            else:
                self.fail(where, "must be an object")
        return found


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "an object", list: "an array", str: "a string", int: "a number"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _digest_id(item: dict[str, Any]) -> str:
    canonical = json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:40]


def _cloud_message(reader: _Reader, path: str, item: dict[str, Any], phone_number_id: str | None) -> InboundMessage | None:
    sender = reader.get(item, "from", path, (str, int), required=True, what="the sender's id")
    message_id = reader.get(item, "id", path, str)
    kind = reader.get(item, "type", path, str)
    text_obj = reader.get(item, "text", path, dict)
    body = reader.get(text_obj, "body", f"{path}.text", str) if text_obj is not None else None
    kind = kind or ("text" if text_obj is not None else "unknown")
    if kind == "text" and body is None and not any(f["field"].startswith(f"{path}.text") for f in reader.fields):
        reader.fail(f"{path}.text.body", "required for a text message")
    if sender is None or (kind == "text" and body is None):
        return None
    return InboundMessage(message_id or _digest_id(item), str(sender), kind, body, phone_number_id)


def _messenger_message(reader: _Reader, path: str, event: dict[str, Any]) -> InboundMessage | None:
    message = reader.get(event, "message", path, dict)
    if message is None or message.get("is_echo") is True:
        return None  # a delivery or read receipt, a postback, or the echo of a message we sent
    sender_obj = reader.get(event, "sender", path, dict, required=True)
    sender = reader.get(sender_obj, "id", f"{path}.sender", (str, int), required=True) if sender_obj else None
    mid = reader.get(message, "mid", f"{path}.message", str)
    text = reader.get(message, "text", f"{path}.message", str)
    attachments = reader.get(message, "attachments", f"{path}.message", list)
    if text is not None:
        kind = "text"
    elif attachments and isinstance(attachments[0], dict) and isinstance(attachments[0].get("type"), str):
        kind = attachments[0]["type"]
    else:
        kind = "unknown"
    if sender is None:
        return None
    return InboundMessage(mid or _digest_id(event), str(sender), kind, text)


def parse_delivery(body: bytes) -> Delivery:
    """The messages of one webhook POST, in payload order; 400 or 422 for a body of the wrong shape."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequestError(f"malformed JSON body: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequestError("the request body must be a JSON object")
    reader = _Reader()
    kind = reader.get(data, "object", "", str, required=True)
    messages: list[InboundMessage] = []
    for entry_path, entry in reader.items(data, "entry", "", required=True):
        for change_path, change in reader.items(entry, "changes", entry_path):
            value = reader.get(change, "value", change_path, dict)
            if value is None:
                continue
            value_path = f"{change_path}.value"
            metadata = reader.get(value, "metadata", value_path, dict)
            number = reader.get(metadata, "phone_number_id", f"{value_path}.metadata", (str, int)) if metadata else None
            for path, item in reader.items(value, "messages", value_path):
                found = _cloud_message(reader, path, item, None if number is None else str(number))
                if found is not None:
                    messages.append(found)
        for path, event in reader.items(entry, "messaging", entry_path):
            found = _messenger_message(reader, path, event)
            if found is not None:
                messages.append(found)
    if reader.fields:
        summary = "; ".join(f"{f['field']}: {f['error']}" for f in reader.fields[:3])
        raise ValidationFailed(f"the webhook payload has the wrong shape: {summary}", reader.fields)
    return Delivery(kind, tuple(messages))


# --- the log of message ids ----------------------------------------------------------------------


class Status(StrEnum):
    QUEUED = "queued"  # accepted, waiting for its turn
    PROCESSING = "processing"  # going through chat / being sent
    REPLIED = "replied"  # the reply was sent
    IGNORED = "ignored"  # recorded, not processed (unmapped sender, not text, empty or too long)
    FAILED = "failed"  # chat or sending failed, or the server stopped first (detail says which)


UNFINISHED = (Status.QUEUED, Status.PROCESSING)


@dataclass(frozen=True)
class MessageRecord:
    platform: str
    message_id: str
    sender_id: str
    user_id: str | None
    message_type: str
    status: Status
    detail: str | None
    conversation_id: str | None
    reply_ids: tuple[str, ...]
    received_at: str
    updated_at: str


def _record(row: dict[str, Any]) -> MessageRecord:
    replies = tuple(row["reply_ids"].split(",")) if row["reply_ids"] else ()
    return MessageRecord(**{**row, "status": Status(row["status"]), "reply_ids": replies})


class WebhookLog:
    """Table ``webhook_messages`` (one row per platform message id) and ``webhook_conversations``
    (the conversation kept per sender and user), migration m010."""

    def __init__(self, db: Database, platform: str):
        self.db = db
        self.platform = platform

    def claim(self, message: InboundMessage, user_id: str | None, status: Status = Status.QUEUED,
              detail: str | None = None) -> bool:
        """Record the message id; False if it was already recorded (a duplicate delivery)."""
        now = iso()
        inserted = self.db.query(
            "INSERT INTO webhook_messages (platform, message_id, sender_id, user_id, message_type, status, detail, "
            "received_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (platform, message_id) DO NOTHING RETURNING message_id",
            (self.platform, message.message_id, message.sender_id, user_id, message.type, str(status), detail,
             now, now),
        )
        return bool(inserted)

    def update(self, message_id: str, status: Status, detail: str | None = None, *,
               conversation_id: str | None = None, reply_ids: tuple[str, ...] = ()) -> None:
        self.db.execute(
            "UPDATE webhook_messages SET status = ?, detail = ?, conversation_id = COALESCE(?, conversation_id), "
            "reply_ids = ?, updated_at = ? WHERE platform = ? AND message_id = ?",
            (str(status), detail, conversation_id, ",".join(reply_ids) or None, iso(), self.platform, message_id),
        )

    def get(self, message_id: str) -> MessageRecord | None:
        row = self.db.one("SELECT * FROM webhook_messages WHERE platform = ? AND message_id = ?",
                          (self.platform, message_id))
        return None if row is None else _record(row)

    def list(self, limit: int = 100, status: Status | None = None) -> list[MessageRecord]:
        """Newest first."""
        where, params = ("AND status = ?", (str(status),)) if status is not None else ("", ())
        rows = self.db.query(
            f"SELECT * FROM webhook_messages WHERE platform = ? {where} ORDER BY received_at DESC, rowid DESC LIMIT ?",
            (self.platform, *params, limit),
        )
        return [_record(r) for r in rows]

    def conversation_for(self, sender_id: str, user_id: str) -> str | None:
        return self.db.scalar(
            "SELECT conversation_id FROM webhook_conversations WHERE platform = ? AND sender_id = ? AND user_id = ?",
            (self.platform, sender_id, user_id),
        )

    def remember_conversation(self, sender_id: str, user_id: str, conversation_id: str) -> None:
        now = iso()
        self.db.execute(
            "INSERT INTO webhook_conversations (platform, sender_id, user_id, conversation_id, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (platform, sender_id, user_id) "
            "DO UPDATE SET conversation_id = excluded.conversation_id, updated_at = excluded.updated_at",
            (self.platform, sender_id, user_id, conversation_id, now, now),
        )

    def interrupt_unfinished(self, detail: str) -> int:
        """Mark messages left queued or processing (the server stopped) as failed; returns how many."""
        rows = self.db.query(
            "UPDATE webhook_messages SET status = ?, detail = ?, updated_at = ? "
            "WHERE platform = ? AND status IN (?, ?) RETURNING message_id",
            (str(Status.FAILED), detail, iso(), self.platform, *map(str, UNFINISHED)),
        )
        return len(rows)

    def prune(self, before: datetime) -> int:
        """Forget message ids received before ``before`` (platforms stop redelivering long before)."""
        rows = self.db.query("DELETE FROM webhook_messages WHERE received_at < ? RETURNING message_id", (iso(before),))
        return len(rows)
