"""The ChatModel protocol and the values that cross it.

Backends are synchronous: generation runs on a worker thread owned by
:class:`assistant.llm.queue.InferenceQueue`, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    # Names of the fields the tool's result carries (``{"token": ...}``): a parameter of another tool
    # with one of these names is taken to need this tool's output first (assistant/chat/prerequisites.py).
    produces: tuple[str, ...] = ()
    # Declared dependencies: (parameter, producing tool) pairs, for values whose names do not match.
    requires: tuple[tuple[str, str], ...] = ()

    def openai(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ChatMessage:
    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()  # on an assistant message that asked for tools
    tool_call_id: str | None = None  # on a tool message: which call it answers
    name: str | None = None  # on a tool message: the tool's name


@dataclass(frozen=True)
class GenerationOptions:
    model: str | None = None  # None = the backend's default model
    temperature: float = 0.7
    max_tokens: int = 512
    # Called between tokens; returning True stops generation (client gone, deadline passed).
    should_stop: Callable[[], bool] | None = None
    tools: tuple[ToolSpec, ...] = ()  # tools the model may call this turn
    # The reply must be JSON valid against this schema: llama.cpp decodes under a grammar built from
    # it, Ollama gets it as ``format``, OpenAI-compatible servers as ``response_format``. Not with tools.
    json_schema: dict[str, Any] | None = None
    # With tools: "auto" (answer or call), "required" (a call of one of the tools), "none" (answer,
    # the tools only described) or a tool's name (a call of that tool). Engines decode a required
    # call under a grammar from its first token (llama.cpp) or pass the choice natively.
    tool_choice: str = "auto"
    # With tools and tool_choice "auto": None lets the model write freely (a call it starts is then
    # finished under the grammar); a number makes the engine decide answer-or-call from its
    # probability that the reply opens a call (>= threshold: a call, decoded under the grammar of the
    # offered tools from its first token; else an answer). Set by the tool loop from
    # ToolCallingSettings (decoding, call_threshold); engines without token probabilities ignore it.
    call_threshold: float | None = None
    # A GGUF LoRA adapter (a file path) applied to this request only, e.g. the user's trained adapter
    # (assistant/learning/). llama.cpp switches adapters per request on the loaded base model
    # (assistant/llm/adapters.py) and raises ServiceUnavailableError for a missing or unloadable file;
    # Ollama, OpenAI-compatible servers and the scripted fake ignore it (they cannot load one per request).
    adapter: str | None = None


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
class ToolCalls:
    """The model asks for these tools instead of (or before) answering."""

    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class Finished:
    """End of a stream: the model that answered, token counts and why it stopped."""

    model: str
    usage: TokenUsage
    finish_reason: str = "stop"


StreamEvent = Delta | ToolCalls | Finished


@dataclass(frozen=True)
class ChatResult:
    content: str
    model: str
    usage: TokenUsage
    finish_reason: str = "stop"
    tool_calls: tuple[ToolCall, ...] = ()


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
    calls: list[ToolCall] = []
    for event in events:
        if isinstance(event, Delta):
            parts.append(event.text)
        elif isinstance(event, ToolCalls):
            calls.extend(event.calls)
        else:
            return ChatResult("".join(parts), event.model, event.usage, event.finish_reason, tuple(calls))
    raise RuntimeError("stream ended without a Finished event")
