"""The ChatModel protocol and the values that cross it.

Backends are synchronous: generation runs on a worker thread owned by
:class:`assistant.llm.queue.InferenceQueue`, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True)
class GenerationOptions:
    model: str | None = None  # None = the backend's default model
    temperature: float = 0.7
    max_tokens: int = 512
    # Called between tokens; returning True stops generation (client gone, deadline passed).
    should_stop: Callable[[], bool] | None = None


@dataclass(frozen=True)
class TokenUsage:
    prompt: int = 0
    completion: int = 0
    cached_prompt: int = 0  # prompt tokens served from a cache, when the engine says so

    @property
    def total(self) -> int:
        return self.prompt + self.completion


@dataclass(frozen=True)
class Delta:
    """One piece of streamed text."""

    text: str


@dataclass(frozen=True)
class Finished:
    """End of a stream: the model that answered, token counts and why it stopped."""

    model: str
    usage: TokenUsage
    finish_reason: str = "stop"


StreamEvent = Delta | Finished


@dataclass(frozen=True)
class ChatResult:
    content: str
    model: str
    usage: TokenUsage
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ModelInfo:
    id: str
    name: str
    parameters: str = "unknown"
    context_length: int = 0
    default: bool = False


@dataclass(frozen=True)
class Health:
    healthy: bool
    model: str
    latency_ms: int | None = None
    detail: str = ""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@runtime_checkable
class ChatModel(Protocol):
    """A local inference engine. ``stream`` yields Delta events and ends with one Finished."""

    id: str

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]: ...

    def health(self) -> Health: ...

    def models(self) -> list[ModelInfo]: ...


def collect(events: Iterator[StreamEvent]) -> ChatResult:
    """Run a stream to its end and return the whole answer."""
    parts: list[str] = []
    for event in events:
        if isinstance(event, Delta):
            parts.append(event.text)
        else:
            return ChatResult("".join(parts), event.model, event.usage, event.finish_reason)
    raise RuntimeError("stream ended without a Finished event")
