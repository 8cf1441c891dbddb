"""Backends wrapped in their circuit breaker (:mod:`assistant.breaker`), where ``build_services``
creates them: the embedder, every tool capability's tools, the messenger's sender. (The LLM engine's
breaker sits in :class:`assistant.llm.queue.InferenceQueue`, where each generation starts and ends.)

What counts as the backend failing:
- embedder: any exception from ``embed``; it reaches callers as :class:`EmbedderUnavailable` (503),
  and the chat service then answers without memories;
- tools: a :class:`~assistant.tools.webclient.ServiceError` without an HTTP status (unreachable,
  timed out) or with a 5xx one, and any exception that is not a ToolError (OSError, a library
  crash). A plain ToolError ("no place called X") is the caller's matter: not counted. An open
  breaker raises CircuitOpenError, which the tool loop tells the model as the tool's error;
- messenger: any :class:`~assistant.messaging.sender.MessageSendError`; an open breaker is one too,
  so the webhook log records the message as not delivered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from assistant.breaker import Breakers, CircuitBreaker, CircuitOpenError, public_description
from assistant.errors import AssistantError, ServiceUnavailableError
from assistant.messaging.sender import MessageSendError, Recipient, SentMessage
from assistant.tools.base import Tool, ToolContext, ToolError, ToolRegistry
from assistant.tools.webclient import ServiceError

EMBEDDER = "embedder"
LLM = "inference"
MESSENGER = "messenger"


def tool_breaker_name(capability: str) -> str:
    return f"tool:{capability}"


class EmbedderUnavailable(ServiceUnavailableError):
    """The embedder failed or its breaker is open; memory features degrade or answer 503."""


class GuardedEmbedder:
    """An Embedder whose ``embed`` goes through the embedder's breaker."""

    def __init__(self, inner: Any, breaker: CircuitBreaker):
        self.inner = inner
        self.breaker = breaker
        self.id = inner.id
        self.dimension = inner.dimension

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return self.breaker.call(self.inner.embed, texts)
        except CircuitOpenError as exc:
            raise EmbedderUnavailable(exc.message, exc.details) from None
        except EmbedderUnavailable:
            raise
        except Exception as exc:
            raise EmbedderUnavailable(f"the embedder ({self.id}) failed: {type(exc).__name__}: {exc}") from exc

    def __getattr__(self, name: str) -> Any:  # the backend's own extras (model name, cache info)
        return getattr(self.inner, name)


def is_backend_failure(exc: BaseException) -> bool:
    """Whether a tool's exception says its backend is failing (see the module docstring)."""
    if isinstance(exc, ServiceError):
        return exc.status is None or exc.status >= 500
    if isinstance(exc, ToolError | AssistantError):
        return isinstance(exc, ServiceUnavailableError)
    return True


def describe_tool_failure(exc: BaseException) -> str:
    """A ToolError's text is written for the model (and the user); anything else stays in the log."""
    return str(exc) if isinstance(exc, ToolError) else public_description(exc)


def guard_tool(tool: Tool, breaker: CircuitBreaker) -> Tool:
    func = tool.func

    def guarded(ctx: ToolContext, **arguments: Any) -> Any:
        return breaker.call(func, ctx, is_failure=is_backend_failure, describe=describe_tool_failure, **arguments)

    guarded.__wrapped__ = func  # type: ignore[attr-defined]
    guarded.__doc__ = func.__doc__
    return replace(tool, func=guarded)


def guard_tools(registry: ToolRegistry, breakers: Breakers) -> ToolRegistry:
    """A registry of the same tools, each calling through its capability's breaker."""
    return ToolRegistry(guard_tool(t, breakers.get(tool_breaker_name(t.capability))) for t in registry.tools())


class GuardedSender:
    """A MessageSender whose ``send_text`` goes through the messenger's breaker."""

    def __init__(self, inner: Any, breaker: CircuitBreaker):
        self.inner = inner
        self.breaker = breaker

    def send_text(self, recipient: Recipient, text: str, *, tag: str | None = None) -> SentMessage:
        try:
            return self.breaker.call(self.inner.send_text, recipient, text, tag=tag,
                                     is_failure=lambda exc: isinstance(exc, MessageSendError | OSError),
                                     describe=lambda exc: str(exc) if isinstance(exc, MessageSendError)
                                     else public_description(exc))
        except CircuitOpenError as exc:
            raise MessageSendError(exc.message) from None

    def close(self) -> None:
        self.inner.close()
