"""The values of mesh inference: a request, a reply (from a peer or the local engine), the route a
request took (one :class:`Attempt` per peer considered) and the answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from assistant.errors import AssistantError
from assistant.llm.base import ChatMessage
from assistant.llm.base import TokenUsage as Usage  # a reply's tokens: the engines' own value

LOCAL = "local"  # ``served_by`` of an answer of the local engine (a peer may not take this name)


@dataclass(frozen=True)
class MeshRequest:
    """A chat request: OpenAI's chat shape without tools (``messages``: system, user, assistant).

    ``peer``: try this peer first (when healthy and not full; else the usual choice). ``local_only``:
    answer with the local engine, no peer asked. ``allow_fallback``: when no peer can serve, or the
    chosen one fails or times out, answer locally (True) or fail with the peer's error (False)."""

    messages: tuple[ChatMessage, ...]
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    peer: str | None = None
    local_only: bool = False
    allow_fallback: bool = True


@dataclass(frozen=True)
class Reply:
    """What one engine answered: text only (a peer's tool calls are never taken)."""

    content: str
    model: str
    finish_reason: str
    usage: Usage = Usage()


class Outcome(StrEnum):
    """What happened to one peer in a request's route."""

    SERVED = "served"  # it answered
    DOWN = "down"  # marked down after a failed probe or forward; skipped until ``down_until``
    UNHEALTHY = "unhealthy"  # its health probe failed just now (it is marked down)
    FULL = "full"  # max_concurrency forwards already in flight: skipped, not waited for
    TIMEOUT = "timeout"  # the forward passed mesh.timeout_secs (the peer is marked down)
    FAILED = "failed"  # the forward failed: unreachable, an HTTP error, an answer that is not a chat completion
    NOT_TRIED = "not_tried"  # healthy and free, but another peer was chosen


@dataclass(frozen=True)
class Attempt:
    peer: str
    outcome: Outcome
    detail: str = ""
    latency_ms: float | None = None  # of a forward (served, timeout or failed)

    def as_dict(self) -> dict[str, Any]:
        return {"peer": self.peer, "outcome": self.outcome.value, "detail": self.detail,
                "latency_ms": None if self.latency_ms is None else round(self.latency_ms, 1)}


@dataclass(frozen=True)
class MeshAnswer:
    reply: Reply
    served_by: str  # a peer's name or "local"
    latency_ms: float  # the whole request: choice, probes, forward and any local fallback
    fallback_reason: str | None = None  # why the local engine answered (None when a peer did)
    route: tuple[Attempt, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        r = self.reply
        return {"content": r.content, "model": r.model, "finish_reason": r.finish_reason,
                "usage": {"prompt_tokens": r.usage.prompt, "completion_tokens": r.usage.completion,
                          "total_tokens": r.usage.total},
                "served_by": self.served_by, "fallback_reason": self.fallback_reason,
                "latency_ms": round(self.latency_ms, 1), "route": [a.as_dict() for a in self.route]}


@dataclass(frozen=True)
class PeerStatus:
    """One peer as the status route shows it (never its key)."""

    name: str
    url: str
    healthy: bool | None  # None: never probed
    down_until: float | None  # epoch seconds, while marked down
    last_error: str | None
    checked_at: float | None  # epoch seconds of the last probe
    latency_ewma_ms: float | None  # None before a successful forward
    in_flight: int
    max_concurrency: int
    served: int
    failed: int

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class PeerTimeoutError(AssistantError):
    """The chosen peer did not answer within mesh.timeout_secs and the request allowed no fallback (504)."""

    code = "GATEWAY_TIMEOUT"


class PeerFailedError(AssistantError):
    """The chosen peer failed and the request allowed no fallback (502)."""

    code = "UPSTREAM_ERROR"
