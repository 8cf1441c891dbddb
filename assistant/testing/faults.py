"""Fakes that fail on demand, for the fault-injection tests and the notebooks' failure demos.

``FaultyChatModel`` wraps a working model (the scripted one by default) and, while ``mode`` says
so, raises (``"raise"``), hangs without looking at the stop signal (``"hang"``, until ``release``
or ``hang_secs``), or sends garbage instead of stream events (``"garbage"``). ``FaultyEmbedder``
wraps an embedder and raises while ``failing`` is set. Both count their calls, so a test can see
that an open circuit breaker stopped calling them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np

from assistant.llm.base import ChatMessage, GenerationOptions, Health, ModelInfo, StreamEvent
from assistant.llm.scripted import ScriptedChatModel

Mode = Literal["ok", "raise", "hang", "garbage"]


class FaultyChatModel:
    id = "faulty"

    def __init__(self, inner: Any | None = None, mode: Mode = "ok", *, hang_secs: float = 60.0):
        self.inner = inner if inner is not None else ScriptedChatModel()
        self.mode: Mode = mode
        self.hang_secs = hang_secs
        self.calls = 0
        self._released = threading.Event()

    def release(self) -> None:
        """Let every hanging call end (tests call it before they finish)."""
        self._released.set()

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        self.calls += 1
        if self.mode == "raise":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if self.mode == "hang":
            self._released.wait(self.hang_secs)  # deaf to options.should_stop, as a wedged engine is
            return
        if self.mode == "garbage":
            yield "\x00\x9f not an event"  # type: ignore[misc]
            return
        yield from self.inner.stream(messages, options)

    def health(self) -> Health:
        if self.mode == "ok":
            return self.inner.health()
        return Health(False, getattr(self.inner, "model", "faulty"), None, f"injected fault: {self.mode}")

    def models(self) -> list[ModelInfo]:
        return self.inner.models()


class FaultyEmbedder:
    def __init__(self, inner: Any):
        self.inner = inner
        self.id = inner.id
        self.dimension = inner.dimension
        self.failing = False
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.failing:
            raise OSError("embedding model unavailable (injected fault)")
        return self.inner.embed(texts)
