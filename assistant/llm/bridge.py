"""Blocking engine calls from worker threads, run on the event loop that owns the inference queue.

The queue's lock belongs to one event loop. Background workers (the knowledge graph's extractor, the
dream's REM engine step) run in threads of their own, so they hand each call to that loop: the
server's, bound at startup (:meth:`LoopBridge.bind_loop`), or, where none is bound or it is not
running (notebooks, tests, benchmarks), a private loop in a daemon thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from assistant.errors import AssistantError

T = TypeVar("T")


class LoopBridge:
    def __init__(self, name: str, failure: type[Exception]):
        self.name = name  # of the private loop's thread
        self.failure = failure  # what a failed call raises (the caller's error type)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def bind_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self._loop = loop

    def target(self) -> asyncio.AbstractEventLoop:
        if self._loop is not None and self._loop.is_running():
            return self._loop
        with self._lock:
            if self._own is None:
                self._own = asyncio.new_event_loop()
                threading.Thread(target=self._own.run_forever, name=self.name, daemon=True).start()
            return self._own

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        """Run ``coroutine`` on the target loop and wait for it: ``failure`` when it takes over
        ``timeout`` seconds (``what`` names the call), the engine fails or crashes; a ``failure`` the
        coroutine raised itself passes through. Never call it from the target loop (it would block it)."""
        loop = self.target()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coroutine.close()
            raise RuntimeError(f"{what} blocks: call it from a worker thread, not the event loop")
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise self.failure(f"{what} took over {timeout:g} s") from None
        except self.failure:
            raise
        except (AssistantError, OSError) as exc:  # UpstreamError, a dropped connection
            raise self.failure(f"the inference engine failed: {exc}") from exc
        except Exception as exc:  # an engine crash: the breaker has counted it
            raise self.failure(f"the inference engine crashed: {type(exc).__name__}") from exc

    def close(self) -> None:
        """Stop the private loop, if one was started."""
        with self._lock:
            if self._own is not None:
                self._own.call_soon_threadsafe(self._own.stop)
                self._own = None
