"""The chat service: builds the prompt, runs the model through the queue, persists the exchange.

``chat`` returns the whole reply; ``stream`` yields typed events (``message`` deltas, then one
``done``) that the API turns into Server-Sent Events.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import StrEnum
from uuid import UUID

from assistant.chat.conversations import ConversationStore
from assistant.config import InferenceSettings, MemorySettings
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, TokenUsage
from assistant.llm.queue import InferenceQueue
from assistant.memory.store import MemoryStore
from assistant.observability.metrics import Metrics
from assistant.storage.analytics import Analytics


@dataclass(frozen=True)
class ChatRequest:
    message: str
    conversation_id: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    mentioned_profile_ids: tuple[str, ...] = ()
    enabled_tools: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ChatReply:
    id: str
    conversation_id: str
    content: str
    model: str
    usage: TokenUsage
    created_at: str
    role: str = "assistant"
    finish_reason: str = "stop"


class ChatEventType(StrEnum):
    MESSAGE = "message"
    DONE = "done"


@dataclass(frozen=True)
class MessageEvent:
    delta: str
    type: ChatEventType = field(default=ChatEventType.MESSAGE, init=False)


@dataclass(frozen=True)
class DoneEvent:
    usage: TokenUsage
    message_id: str
    conversation_id: str
    model: str
    finish_reason: str
    created_at: str
    type: ChatEventType = field(default=ChatEventType.DONE, init=False)


ChatEvent = MessageEvent | DoneEvent


class ChatService:
    def __init__(
        self,
        queue: InferenceQueue,
        conversations: ConversationStore,
        settings: InferenceSettings,
        metrics: Metrics,
        analytics: Analytics | None = None,
        *,
        tool_names: frozenset[str] = frozenset(),
        profile_ids: frozenset[str] = frozenset(),
        memory: MemoryStore | None = None,
        memory_settings: MemorySettings | None = None,
    ):
        self.memory = memory
        self.memory_settings = memory_settings or MemorySettings()
        self.tool_names = tool_names
        self.profile_ids = profile_ids
        self.queue = queue
        self.conversations = conversations
        self.settings = settings
        self.metrics = metrics
        self.analytics = analytics

    def validate(self, request: ChatRequest) -> None:
        """Refuse references to things that do not exist, naming each one."""
        fields = []
        for tool in request.enabled_tools or ():
            if tool not in self.tool_names:
                known = ", ".join(sorted(self.tool_names)) or "none are registered"
                fields.append({"field": "enabled_tools", "error": f"unknown tool {tool!r} (registered: {known})"})
        for profile in request.mentioned_profile_ids:
            if profile not in self.profile_ids:
                fields.append({"field": "mentioned_profile_ids", "error": f"unknown agent profile {profile!r}"})
        limit = self.settings.context_length
        if request.max_tokens is not None and request.max_tokens > limit:
            fields.append({"field": "max_tokens", "error": f"must be at most the context length {limit}"})
        if fields:
            raise ValidationFailed("request validation failed: " + "; ".join(f["error"] for f in fields), fields)

    def _prompt(self, user_id: UUID | str, request: ChatRequest, memory_context: str = "") -> list[ChatMessage]:
        system = request.system_prompt if request.system_prompt is not None else self.settings.system_prompt
        system = "\n\n".join(part for part in (system, memory_context) if part)
        messages = [ChatMessage("system", system)] if system else []
        if request.conversation_id is not None:
            messages += self.conversations.history(request.conversation_id, self.settings.history_messages)
        messages.append(ChatMessage("user", request.message))
        return messages

    def _options(self, request: ChatRequest) -> GenerationOptions:
        return GenerationOptions(
            model=request.model,
            temperature=self.settings.temperature if request.temperature is None else request.temperature,
            max_tokens=self.settings.max_tokens if request.max_tokens is None else request.max_tokens,
        )

    async def stream(self, user_id: UUID | str, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        """Yield ``MessageEvent``s then one ``DoneEvent``; the exchange is stored (and learned
        from) before ``done``. Relevant memories are injected into the system prompt."""
        self.validate(request)
        if request.conversation_id is not None:
            self.conversations.get(user_id, request.conversation_id)  # 404 before any model work
        memory_on = self.memory is not None and self.memory_settings.enabled
        query_vector = None
        context = ""
        if memory_on and (self.memory_settings.enable_rag or self.memory_settings.enable_learning):
            query_vector = (await asyncio.to_thread(self.memory.embedder.embed, [request.message]))[0]
        if memory_on and self.memory_settings.enable_rag:
            context, _ = await asyncio.to_thread(
                self.memory.retrieve_for_prompt, str(user_id), request.message, query_vector
            )
        messages = self._prompt(user_id, request, context)
        options = self._options(request)
        start = time.perf_counter()
        parts: list[str] = []
        finished: Finished | None = None
        ok = False
        try:
            async for event in self.queue.stream(messages, options):
                if isinstance(event, Delta):
                    parts.append(event.text)
                    yield MessageEvent(event.text)
                else:
                    finished = event
            if finished is None:
                raise ServiceUnavailableError("the inference engine ended without finishing the answer")
            if finished.finish_reason == "timeout":
                raise ServiceUnavailableError(
                    f"generation passed the request timeout of {self.queue.request_timeout_secs:g} s"
                )
            ok = True
        finally:
            duration_ms = (time.perf_counter() - start) * 1000
            tokens = finished.usage.total if finished else 0
            self.metrics.observe_inference(duration_ms, tokens, ok)
            if self.analytics is not None:
                self.analytics.record("inference", options.model or self.settings.model, duration_ms, ok, tokens)
        conversation_id, message_id, created_at = self.conversations.record_exchange(
            user_id=user_id,
            conversation_id=request.conversation_id,
            user_message=request.message,
            reply="".join(parts),
            model=finished.model,
            prompt_tokens=finished.usage.prompt,
            completion_tokens=finished.usage.completion,
        )
        if memory_on and self.memory_settings.enable_learning:
            await asyncio.to_thread(
                self.memory.learn, str(user_id), request.message, "".join(parts),
                conversation_id=conversation_id, query_vector=query_vector,
            )
        yield DoneEvent(
            finished.usage, message_id, conversation_id, finished.model, finished.finish_reason, created_at
        )

    async def chat(self, user_id: UUID | str, request: ChatRequest) -> ChatReply:
        parts: list[str] = []
        async for event in self.stream(user_id, request):
            if isinstance(event, MessageEvent):
                parts.append(event.delta)
            else:
                done = event
        return ChatReply(
            id=done.message_id,
            conversation_id=done.conversation_id,
            content="".join(parts),
            model=done.model,
            usage=done.usage,
            created_at=done.created_at,
            finish_reason=done.finish_reason,
        )

