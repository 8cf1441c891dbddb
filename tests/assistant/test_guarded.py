"""Backends behind their breakers: the embedder, the tools, the messenger's sender."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from assistant.breaker import Breakers, CircuitBreaker, CircuitOpenError, CircuitState
from assistant.guarded import (
    EmbedderUnavailable,
    GuardedEmbedder,
    GuardedSender,
    guard_tools,
    is_backend_failure,
)
from assistant.messaging.sender import MessageSendError, Recipient, SentMessage
from assistant.tools.base import ToolContext, ToolError, ToolRegistry, tool
from assistant.tools.webclient import ServiceError


class FlakyEmbedder:
    id = "flaky"
    dimension = 3

    def __init__(self) -> None:
        self.fail = True
        self.calls = 0

    def embed(self, texts: Any) -> np.ndarray:
        self.calls += 1
        if self.fail:
            raise RuntimeError("model file vanished")
        return np.ones((len(texts), 3), dtype=np.float32)


def test_guarded_embedder_names_the_failure_and_opens() -> None:
    inner = FlakyEmbedder()
    embedder = GuardedEmbedder(inner, CircuitBreaker("embedder", failure_threshold=2, reset_timeout_secs=60))
    assert (embedder.id, embedder.dimension) == ("flaky", 3)
    for _ in range(2):
        with pytest.raises(EmbedderUnavailable, match="RuntimeError: model file vanished"):
            embedder.embed(["a"])
    with pytest.raises(EmbedderUnavailable, match="not called again"):
        embedder.embed(["a"])
    assert inner.calls == 2  # refused without calling the model
    assert embedder.breaker.state is CircuitState.OPEN


def test_guarded_embedder_passes_results_through() -> None:
    inner = FlakyEmbedder()
    inner.fail = False
    assert GuardedEmbedder(inner, CircuitBreaker("embedder")).embed(["a", "b"]).shape == (2, 3)


@pytest.mark.parametrize(("exc", "counts"), [
    (ServiceError("weather could not be reached (refused)"), True),
    (ServiceError("weather answered HTTP 503", 503), True),
    (ServiceError("weather answered HTTP 404", 404), False),
    (ToolError("no place called 'Xyz' was found"), False),
    (OSError("disk I/O error"), True),
])
def test_what_counts_as_a_tool_backend_failure(exc: Exception, counts: bool) -> None:
    assert is_backend_failure(exc) is counts


def test_guarded_tools_use_their_capabilitys_breaker() -> None:
    @tool("weather")
    def get_weather(ctx: ToolContext, location: str) -> str:
        """Weather."""
        if location == "down":
            raise ServiceError("open-meteo could not be reached")
        if location == "nowhere":
            raise ToolError("no place called 'nowhere' was found")
        return f"sunny in {location}"

    breakers = Breakers(failure_threshold=2, reset_timeout_secs=60)
    registry = guard_tools(ToolRegistry([get_weather]), breakers)
    guarded = registry.get("get_weather")
    ctx = ToolContext("u")
    assert guarded(ctx, {"location": "Berlin"}) == "sunny in Berlin"
    for _ in range(3):  # the caller's mistakes never open it
        with pytest.raises(ToolError):
            guarded(ctx, {"location": "nowhere"})
    for _ in range(2):
        with pytest.raises(ServiceError):
            guarded(ctx, {"location": "down"})
    assert breakers.get("tool:weather").state is CircuitState.OPEN
    with pytest.raises(CircuitOpenError):
        guarded(ctx, {"location": "Berlin"})
    assert guarded.spec == get_weather.spec  # the model sees the same tool


class FailingSender:
    def __init__(self) -> None:
        self.sent = 0
        self.closed = False

    def send_text(self, recipient: Recipient, text: str, *, tag: str | None = None) -> SentMessage:
        self.sent += 1
        raise MessageSendError("graph API unreachable")

    def close(self) -> None:
        self.closed = True


def test_guarded_sender_turns_an_open_breaker_into_a_send_error() -> None:
    inner = FailingSender()
    sender = GuardedSender(inner, CircuitBreaker("messenger", failure_threshold=1, reset_timeout_secs=60))
    recipient = Recipient("123")
    with pytest.raises(MessageSendError, match="unreachable"):
        sender.send_text(recipient, "hi")
    with pytest.raises(MessageSendError, match="not called again"):
        sender.send_text(recipient, "hi")
    assert inner.sent == 1
    sender.close()
    assert inner.closed
