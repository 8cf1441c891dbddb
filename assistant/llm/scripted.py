"""A deterministic ChatModel for tests and notebooks' quick mode.

Replies are taken from a queue (``enqueue``); when it is empty the model echoes the last user
message. Every call is recorded in ``calls`` so tests can see what the model received. Failures
can be scripted too: ``enqueue(error=UpstreamError("..."))``. A ``json_schema`` option is recorded
with the others and not enforced: the reply is the scripted text as it is (valid or not, which is
what tests of schema-constrained callers need).

``tool_choice`` is checked against the script, not enforced: a reply that contradicts it (text or
no call when a call is required, a call of another tool than the named one, a call under "none")
raises :class:`ScriptMismatch`, so a test that scripts the wrong thing fails loudly instead of
passing on behaviour no engine has. An unknown tool name is a ValidationFailed, as in the engines.
``GenerationOptions.adapter`` is recorded with the other options and has no effect on the reply.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from assistant.config import InferenceSettings
from assistant.llm.base import (
    ChatMessage,
    Delta,
    Finished,
    GenerationOptions,
    Health,
    ModelInfo,
    StreamEvent,
    TokenUsage,
    ToolCall,
    ToolCalls,
)
from assistant.llm.tool_format import ANSWER, CALL, resolve_tool_choice

_TOKEN = re.compile(r"\s*\S+")


class ScriptMismatch(AssertionError):
    """The scripted reply contradicts the request's ``tool_choice``: the test scripted it wrong."""


def _check_choice(options: GenerationOptions, calls: tuple[ToolCall, ...]) -> None:
    mode, callable_tools = resolve_tool_choice(options)
    names = {t.name for t in callable_tools}
    if mode == CALL and (not calls or any(c.name not in names for c in calls)):
        got = ", ".join(c.name for c in calls) or "a text reply"
        raise ScriptMismatch(f"tool_choice {options.tool_choice!r} needs a call of {sorted(names)}; scripted: {got}")
    if mode == ANSWER and options.tools and calls:
        raise ScriptMismatch(f"tool_choice {options.tool_choice!r} allows no call; scripted: "
                             f"{', '.join(c.name for c in calls)}")


def count_tokens(text: str) -> int:
    """Whitespace-separated pieces: a stand-in for a tokenizer."""
    return len(_TOKEN.findall(text))


@dataclass
class _Scripted:
    text: str | None = None
    error: Exception | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    delay_secs: float = 0.0


class ScriptedChatModel:
    id = "scripted"

    def __init__(
        self,
        replies: list[str] | None = None,
        *,
        model: str = "scripted",
        token_delay_secs: float = 0.0,
        healthy: bool = True,
    ):
        self.model = model
        self.token_delay_secs = token_delay_secs
        self.healthy = healthy
        self.calls: list[tuple[list[ChatMessage], GenerationOptions]] = []
        self._queue: deque[_Scripted] = deque(_Scripted(text=r) for r in replies or [])
        self._lock = threading.Lock()

    def enqueue(self, text: str | None = None, *, error: Exception | None = None,
                tool_calls: list[ToolCall] | list[tuple[str, dict]] | None = None, delay_secs: float = 0.0) -> None:
        """Script the next reply: text, an error to raise, or tool calls ``[("name", {args})]``."""
        calls = tuple(
            c if isinstance(c, ToolCall) else ToolCall(f"call_{len(self.calls)}_{i}", c[0], dict(c[1]))
            for i, c in enumerate(tool_calls or ())
        )
        with self._lock:
            self._queue.append(_Scripted(text=text, error=error, tool_calls=calls, delay_secs=delay_secs))

    def _next(self, messages: list[ChatMessage]) -> _Scripted:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        last_user = next((m.content for m in reversed(messages) if m.role == "user"), "")
        return _Scripted(text=f"You said: {last_user}")

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        self.calls.append((list(messages), options))
        scripted = self._next(messages)
        if scripted.delay_secs:
            deadline = time.monotonic() + scripted.delay_secs
            while time.monotonic() < deadline:
                if options.should_stop is not None and options.should_stop():
                    yield Finished(options.model or self.model, TokenUsage(0, 0), "cancelled")
                    return
                time.sleep(0.005)
        if scripted.error is not None:
            raise scripted.error
        _check_choice(options, scripted.tool_calls)
        if scripted.tool_calls:
            yield ToolCalls(scripted.tool_calls)
            prompt = sum(count_tokens(m.content) + 4 for m in messages)
            yield Finished(options.model or self.model, TokenUsage(prompt, 8 * len(scripted.tool_calls)), "tool_calls")
            return
        pieces = _TOKEN.findall(scripted.text or "")[: options.max_tokens]
        emitted = 0
        reason = "length" if len(pieces) < count_tokens(scripted.text or "") else "stop"
        for piece in pieces:
            if options.should_stop is not None and options.should_stop():
                reason = "cancelled"
                break
            if self.token_delay_secs:
                time.sleep(self.token_delay_secs)
            emitted += 1
            yield Delta(piece)
        prompt = sum(count_tokens(m.content) + 4 for m in messages)
        yield Finished(options.model or self.model, TokenUsage(prompt, emitted), reason)

    def health(self) -> Health:
        return Health(self.healthy, self.model, 0 if self.healthy else None,
                      "" if self.healthy else "scripted as unhealthy")

    def models(self) -> list[ModelInfo]:
        return [ModelInfo(self.model, "Scripted test model", "0", 4096, True)]


def create(settings: InferenceSettings, data_dir: Path) -> ScriptedChatModel:
    return ScriptedChatModel(model=settings.model)
