"""The OpenAI-compatible chat completion, memory-augmented (``POST /v1/chat/completions``).

A :class:`Completion` (:mod:`assistant.chat.completions_input`) runs on the chat service's engine
queue with the same memory and defence steps as ``/v1/chat`` (:meth:`ChatService.recall`,
:meth:`ChatService.learn_from`, :mod:`assistant.chat.recall`):

- the user's memories are retrieved for the **last user message** and reach the prompt fenced as
  data after :data:`~assistant.defence.wrap.DATA_RULE`, in a system message of their own after the
  client's leading system messages. The configured system prompt is not added: the model sees what an
  OpenAI client sent (benchmarks/bfcl.py: adding the assistant's persona to BFCL's system-less cases
  turned 5 of 40 calls of the default model into text answers);
- the client's ``tool`` messages (results of its own tools) are inspected and fenced as data too;
- the exchange (last user message, answer) is learned when the answer is text, when nothing the
  defence inspected was flagged, and when the turn answers that message (it is the last message, or
  only the client's tool calls and their results follow it: the answer after a tool round);
- the request's ``memory`` extension (``{"retrieve": bool, "learn": bool}``) switches either off.

Stateless: no conversation is stored (the client sends the history each time); memories learned
here have no conversation id. Client tools are returned as tool calls, never executed; the
assistant's own tools are not offered. ``user`` is logged and counted in the analytics table
(kind ``openai_user``, with the tokens used); it never selects whose memories are used: the API
key's user does.

``stop`` sequences are applied here: the text up to the first one is returned and the engine is
told to stop (``GenerationOptions.should_stop``), so the rest is not generated.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from uuid import UUID

from assistant.chat.completions_input import Completion
from assistant.chat.recall import TurnMemory, UsedMemory, system_messages
from assistant.chat.service import ChatService
from assistant.defence.types import Source
from assistant.errors import NotFoundError, ServiceUnavailableError
from assistant.llm.base import (
    ChatMessage,
    Delta,
    Finished,
    GenerationOptions,
    ModelInfo,
    TokenUsage,
    ToolCall,
    ToolCalls,
)

log = logging.getLogger("assistant.chat.completions")


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class CallsEvent:
    """The model asks for these client tools (returned to the client, never run here)."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class CompletionDone:
    model: str
    usage: TokenUsage
    finish_reason: str  # stop, length or tool_calls
    memories: tuple[UsedMemory, ...] = ()  # the memories that reached the prompt
    learned: bool = False  # whether the exchange was learned into the user's memories


CompletionEvent = TextDelta | CallsEvent | CompletionDone


class StopScanner:
    """Cuts streamed text at the first stop sequence, holding back the few characters that could
    be the start of one until the next piece shows whether it is."""

    def __init__(self, stops: tuple[str, ...]):
        self.stops = stops
        self.hold = max((len(s) for s in stops), default=1) - 1
        self.held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        """The text that may be sent now; after a stop sequence, nothing more."""
        if self.stopped:
            return ""
        buffer = self.held + text
        found = [i for i in (buffer.find(s) for s in self.stops) if i >= 0]
        if found:
            self.stopped, self.held = True, ""
            return buffer[:min(found)]
        cut = len(buffer) - self.hold if self.hold else len(buffer)
        cut = max(cut, 0)
        self.held = buffer[cut:]
        return buffer[:cut]

    def flush(self) -> str:
        rest, self.held = self.held, ""
        return "" if self.stopped else rest


class Completions:
    """Chat completions over the chat service's queue, memory and defence."""

    def __init__(self, chat: ChatService):
        self.chat = chat

    def models(self) -> list[ModelInfo]:
        """The configured engine's models (its ``models()``)."""
        return self.chat.queue.model.models()

    def model(self, name: str) -> ModelInfo:
        """One model by id; 404 ``model_not_found`` when the engine has no such model."""
        found = next((m for m in self.models() if m.id == name), None)
        if found is None:
            raise self._unknown(name)
        return found

    def _unknown(self, name: str) -> NotFoundError:
        known = ", ".join(m.id for m in self.models()) or "none installed"
        return NotFoundError(f"The model {name!r} does not exist (available: {known})",
                             {"param": "model", "code": "model_not_found"})

    def check_model(self, name: str | None) -> None:
        """An omitted model or the configured default is the engine's to resolve (it may be 503
        when not installed); any other name must be one of the engine's models (404 otherwise)."""
        if name is None or name == self.chat.settings.model:
            return
        if not any(m.id == name for m in self.models()):
            raise self._unknown(name)

    def _prompt(self, turn: TurnMemory, completion: Completion) -> list[ChatMessage]:
        """The client's leading system messages, the memory context, then the rest of the conversation
        with the client's tool results fenced as data."""
        messages = list(completion.messages)
        lead = next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))
        system = "\n\n".join(m.content for m in messages[:lead] if m.content)
        rest = []
        for m in messages[lead:]:
            if m.role == "tool":
                fenced, _ = turn.guard.wrap(m.content, Source.TOOL_RESULT, f"result of {m.name}", m.tool_call_id)
                m = replace(m, content=fenced)
            rest.append(m)
        fenced_tools = any(m.role == "tool" for m in rest)
        return system_messages(system, turn.context, separate=bool(completion.tools),
                               data_rule=bool(turn.context) or fenced_tools) + rest

    def _options(self, completion: Completion, should_stop: threading.Event,
                 user_id: UUID | str | None = None) -> GenerationOptions:
        """The request's values, else the configuration's. Client tools under "auto" are decoded as
        the assistant's own are ([tool_calling] decoding, call_threshold): with "constrained" the
        engine's probability that the reply opens a call decides answer or call. The caller's active
        LoRA adapter applies here as in the assistant's own chat (``ChatService.adapter_for``)."""
        settings, tooling = self.chat.settings, self.chat.tool_settings
        adapter_for = self.chat.adapter_for
        adapter = adapter_for(str(user_id)) if adapter_for is not None and user_id is not None else None
        return GenerationOptions(
            adapter=str(adapter) if adapter is not None else None,
            model=completion.model,
            temperature=settings.temperature if completion.temperature is None else completion.temperature,
            max_tokens=settings.max_tokens if completion.max_tokens is None else completion.max_tokens,
            should_stop=should_stop.is_set,
            tools=completion.tools,
            tool_choice=completion.tool_choice,
            json_schema=completion.json_schema,
            call_threshold=tooling.call_threshold if tooling.decoding == "constrained" else None,
        )

    async def stream(self, user_id: UUID | str, completion: Completion) -> AsyncIterator[CompletionEvent]:
        """``TextDelta``s and at most one ``CallsEvent``, then one ``CompletionDone``. Errors found
        before the model runs (unknown model, engine unavailable) are raised before the first event."""
        chat = self.chat
        self.check_model(completion.model)
        chat.touch(user_id)
        last = completion.last_user
        answers_last = last is not None and all(
            m.role == "tool" or (m.role == "assistant" and m.tool_calls) for m in completion.messages[last + 1:])
        if last is not None:
            message = completion.messages[last].content
            turn = await chat.recall(user_id, message, use_memories=completion.memory.retrieve,
                                     learn=completion.memory.learn and answers_last)
        else:  # no user message: nothing to retrieve for or learn from
            message, turn = "", TurnMemory(chat.new_guard(user_id))
        prompt = self._prompt(turn, completion)
        stopping = threading.Event()
        options = self._options(completion, stopping, user_id)
        scanner = StopScanner(completion.stop)
        parts: list[str] = []
        calls: list[ToolCall] = []
        finished: Finished | None = None
        start = time.perf_counter()
        ok = False
        try:
            async with contextlib.aclosing(chat.queue.stream(prompt, options)) as events:
                async for event in events:
                    if isinstance(event, Delta):
                        text = scanner.feed(event.text)
                        if scanner.stopped:
                            stopping.set()  # the engine stops within a token; its Finished still comes
                        if text:
                            parts.append(text)
                            yield TextDelta(text)
                    elif isinstance(event, ToolCalls):
                        calls.extend(event.calls)
                        yield CallsEvent(event.calls)
                    elif isinstance(event, Finished):
                        finished = event
            rest = scanner.flush()
            if rest:
                parts.append(rest)
                yield TextDelta(rest)
            if finished is None:
                raise ServiceUnavailableError("the inference engine ended without finishing the answer")
            if finished.finish_reason == "timeout":
                raise ServiceUnavailableError(
                    f"generation passed the request timeout of {chat.queue.request_timeout_secs:g} s")
            ok = True
        finally:
            chat.account(options, start, finished, ok, completion.user)
        reason = "tool_calls" if calls else ("stop" if scanner.stopped else finished.finish_reason)
        if reason == "cancelled":
            reason = "stop"
        if calls:
            turn.learn = False  # a turn that ends in tool calls is not an answer yet
        will_learn = turn.learn
        refusal = await chat.learn_from(user_id, turn, message, "".join(parts), None) if last is not None else None
        learned = will_learn and refusal is None
        log.info("openai completion for %s (end user %r): %s, %d memories, learned: %s", user_id, completion.user,
                 reason, len(turn.used), learned)
        yield CompletionDone(finished.model, finished.usage, reason, turn.memories, learned)
