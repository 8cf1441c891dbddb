"""Processing webhook deliveries: accept fast, answer through chat in the background, reply once.

:meth:`MessagingService.receive` checks the platform and the signature, parses the payload and
records each message id (:meth:`WebhookLog.claim`, before any processing) with a first decision:

- a duplicate id (already recorded: a redelivery) is counted and skipped;
- a sender that ``[messenger] allowed_senders`` does not map to a user is recorded ``ignored`` (no reply:
  strangers learn nothing, not even that the number is a bot);
- a message that is not text, or whose text is empty or over 32,000 characters, is recorded ``ignored``
  with the reason;
- any other message is ``queued`` and handed to a background task (an asyncio task that the service
  keeps until it ends).

It returns at once; the platform gets 200 whatever happens next (platforms redeliver on any other
status, and a redelivery would now be a duplicate anyway). In the background, messages of one sender
are handled one at a time in arrival order: each goes through :meth:`ChatService.chat` for the mapped
user, in the one conversation kept per sender (a new one when none is kept or the kept one was
deleted), and the reply is sent back to the sender through the endpoint matching the payload
(:mod:`~assistant.messaging.sender`). The outcome is recorded: ``replied`` with the platform's message
ids, or ``failed`` with the reason (chat failed, the platform refused, no access token, the server
stopped first). Failures are logged without the message text and never retried.

:meth:`shutdown` lets the messages in flight finish (up to a time limit), cancels the rest (recorded
``failed``), and closes the sender. Messages still queued when a process died are marked ``failed`` by
the next start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol
from uuid import UUID

from assistant.chat.service import ChatReply, ChatRequest
from assistant.clock import utcnow
from assistant.config import MessengerSettings
from assistant.errors import AssistantError, NotFoundError
from assistant.messaging.sender import GraphMessageSender, MessageSender, MessageSendError
from assistant.messaging.webhook import (
    InboundMessage,
    Status,
    WebhookLog,
    check_platform,
    check_signature,
    parse_delivery,
    verify_subscription,
)
from assistant.storage.db import Database

log = logging.getLogger("assistant.messaging")

MAX_TEXT_CHARS = 32_000  # as a chat message over the API
RETENTION_DAYS = 30  # message ids are kept this long for dedupe (platforms redeliver for at most days)
SHUTDOWN_TIMEOUT_SECS = 30.0
INTERRUPTED = "interrupted: the server stopped before the reply was sent"


class Chat(Protocol):
    async def chat(self, user_id: UUID | str, request: ChatRequest) -> ChatReply: ...


@dataclass(frozen=True)
class Receipt:
    """What one delivery brought: ``messages`` taken for processing, ``duplicates`` already seen,
    ``ignored`` recorded without processing."""

    messages: int
    duplicates: int
    ignored: int
    status: str = "accepted"


def _ignore_reason(message: InboundMessage, user_id: str | None) -> str | None:
    if user_id is None:
        return f"sender {message.sender_id} is not mapped to a user (messenger.allowed_senders)"
    if message.type != "text":
        return f"message type {message.type!r} is not handled: only text messages are"
    if not (message.text or "").strip():
        return "the text is empty"
    if len(message.text) > MAX_TEXT_CHARS:
        return f"the text is longer than {MAX_TEXT_CHARS:,} characters"
    return None


class MessagingService:
    def __init__(self, settings: MessengerSettings, webhook_log: WebhookLog, chat: Chat,
                 sender: MessageSender | None, *, shutdown_timeout_secs: float = SHUTDOWN_TIMEOUT_SECS):
        self.settings = settings
        self.log = webhook_log
        self.chat = chat
        self.sender = sender
        self.shutdown_timeout_secs = shutdown_timeout_secs
        self._senders = {str(sender_id): str(user) for sender_id, user in settings.allowed_senders.items()}
        self._tasks: set[asyncio.Task[None]] = set()
        self._locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}
        interrupted = self.log.interrupt_unfinished(INTERRUPTED)
        if interrupted:
            log.warning("%d webhook message(s) were left unanswered by the previous run", interrupted)
        self.log.prune(utcnow() - timedelta(days=RETENTION_DAYS))

    # --- the HTTP side ---------------------------------------------------------------------------

    def verify(self, platform: str, mode: str | None, token: str | None, challenge: str | None) -> str:
        check_platform(self.settings, platform)
        return verify_subscription(self.settings, mode, token, challenge)

    async def receive(self, platform: str, body: bytes, signature: str | None) -> Receipt:
        """Check, parse and record one delivery; its text messages are answered in the background."""
        check_platform(self.settings, platform)
        check_signature(self.settings, body, signature)
        delivery = parse_delivery(body)
        accepted, duplicates, ignored = await asyncio.to_thread(self._admit, delivery.messages)
        for message, user_id in accepted:
            task = asyncio.create_task(self._process(message, user_id), name=f"webhook {message.message_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return Receipt(len(accepted), duplicates, ignored)

    def _admit(self, messages: tuple[InboundMessage, ...]) -> tuple[list[tuple[InboundMessage, str]], int, int]:
        accepted: list[tuple[InboundMessage, str]] = []
        duplicates = ignored = 0
        for message in messages:
            user_id = self._senders.get(message.sender_id)
            reason = _ignore_reason(message, user_id)
            status = Status.QUEUED if reason is None else Status.IGNORED
            if not self.log.claim(message, user_id, status, reason):
                duplicates += 1
            elif reason is not None:
                ignored += 1
                log.info("webhook message %s ignored: %s", message.message_id, reason)
            else:
                accepted.append((message, user_id))
        return accepted, duplicates, ignored

    # --- the background side ---------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Messages being processed or waiting for their sender's turn."""
        return len(self._tasks)

    @contextmanager
    def _turn(self, key: tuple[str, str]) -> Iterator[asyncio.Lock]:
        """The sender's lock (one message of a sender at a time), dropped when nobody holds or awaits it."""
        lock, users = self._locks.get(key, (None, 0))
        lock = lock or asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            yield lock
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def _process(self, message: InboundMessage, user_id: str) -> None:
        try:
            with self._turn((message.sender_id, user_id)) as lock:
                async with lock:
                    await self._answer(message, user_id)
        except asyncio.CancelledError:
            self.log.update(message.message_id, Status.FAILED, INTERRUPTED)
            raise
        except Exception as exc:  # recorded and logged: a background task never crashes anything
            log.exception("webhook message %s failed", message.message_id)
            self.log.update(message.message_id, Status.FAILED, f"internal error: {type(exc).__name__}: {exc}"[:500])

    async def _answer(self, message: InboundMessage, user_id: str) -> None:
        record = self.log.update
        record(message.message_id, Status.PROCESSING)
        if self.sender is None:
            record(message.message_id, Status.FAILED, "cannot reply: messenger.access_token is not set")
            return
        kept = self.log.conversation_for(message.sender_id, user_id)
        try:
            try:
                reply = await self.chat.chat(user_id, ChatRequest(message.text, conversation_id=kept))
            except NotFoundError:
                if kept is None:
                    raise
                reply = await self.chat.chat(user_id, ChatRequest(message.text))  # the kept one was deleted
        except AssistantError as exc:
            log.warning("webhook message %s: chat failed: %s %s", message.message_id, exc.code, exc.message)
            record(message.message_id, Status.FAILED, f"chat failed: {exc.code}: {exc.message}"[:500])
            return
        self.log.remember_conversation(message.sender_id, user_id, reply.conversation_id)
        if not reply.content.strip():
            record(message.message_id, Status.FAILED, "the reply was empty: nothing was sent",
                   conversation_id=reply.conversation_id)
            return
        try:
            sent = await asyncio.to_thread(self.sender.send_text, message.recipient, reply.content)
        except MessageSendError as exc:
            log.warning("webhook message %s: reply not delivered: %s", message.message_id, exc)
            record(message.message_id, Status.FAILED, f"reply not delivered: {exc}"[:500],
                   conversation_id=reply.conversation_id)
            return
        record(message.message_id, Status.REPLIED, conversation_id=reply.conversation_id, reply_ids=sent.message_ids)

    async def wait_idle(self) -> None:
        """Return when no message is being processed (tests and notebooks)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def shutdown(self, timeout_secs: float | None = None) -> None:
        """Let the messages in flight finish (up to ``timeout_secs``), cancel the rest, close the sender."""
        tasks = list(self._tasks)
        if tasks:
            timeout = self.shutdown_timeout_secs if timeout_secs is None else timeout_secs
            _, late = await asyncio.wait(tasks, timeout=timeout)
            for task in late:
                task.cancel()
            if late:
                log.warning("%d webhook message(s) cancelled at shutdown", len(late))
                await asyncio.gather(*late, return_exceptions=True)
        self.close()

    def close(self) -> None:
        if self.sender is not None:
            self.sender.close()


def create_messaging(settings: MessengerSettings, db: Database, chat: Chat) -> MessagingService | None:
    """The webhook's service when ``[messenger] enabled``; None otherwise (the routes then answer 503)."""
    if not settings.enabled:
        return None
    sender = GraphMessageSender(settings.api_base_url, settings.access_token) if settings.access_token else None
    return MessagingService(settings, WebhookLog(db, settings.platform), chat, sender)
