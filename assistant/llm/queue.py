"""One generation at a time, off the event loop, in arrival order, with deadlines.

Requests wait for an ``asyncio.Lock`` (FIFO) up to ``queue_timeout_secs`` and then get a 503;
the backend's synchronous stream runs on a single worker thread and its events are handed to the
loop with ``call_soon_threadsafe``. Closing the async iterator early (a client went away) or
passing ``request_timeout_secs`` tells the backend to stop between tokens; the lock is released
only when the worker thread has really finished, so generations never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from assistant.errors import ServiceUnavailableError
from assistant.llm.base import (
    ChatMessage,
    ChatModel,
    ChatResult,
    Delta,
    Finished,
    GenerationOptions,
    StreamEvent,
    TokenUsage,
    ToolCalls,
)

_END = object()


@dataclass(frozen=True)
class _Failure:
    exc: BaseException


class InferenceQueue:
    def __init__(self, model: ChatModel, *, queue_timeout_secs: float = 300.0, request_timeout_secs: float = 120.0):
        self.model = model
        self.queue_timeout_secs = queue_timeout_secs
        self.request_timeout_secs = request_timeout_secs
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
        self.waiting = 0

    async def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> AsyncIterator[StreamEvent]:
        self.waiting += 1
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can lose an acquired lock on timeout.
            async with asyncio.timeout(self.queue_timeout_secs):
                await self._lock.acquire()
        except TimeoutError:
            raise ServiceUnavailableError(
                f"the inference engine is busy: waited {self.queue_timeout_secs:g} s in the queue"
            ) from None
        finally:
            self.waiting -= 1
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()
        deadline = time.monotonic() + self.request_timeout_secs

        def should_stop() -> bool:
            return stop.is_set() or time.monotonic() > deadline

        run_options = replace(options, should_stop=should_stop)

        def hand_over(item: object) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()

        def work() -> None:
            try:
                for event in self.model.stream(messages, run_options):
                    if isinstance(event, Finished) and event.finish_reason == "cancelled" and not stop.is_set():
                        event = replace(event, finish_reason="timeout")
                    hand_over(event)
                    if stop.is_set():
                        break
            except BaseException as exc:  # handed to the awaiting side, never lost
                hand_over(_Failure(exc))
            finally:
                hand_over(_END)

        try:
            future = loop.run_in_executor(self._executor, work)
        except BaseException:
            self._lock.release()
            raise
        try:
            while True:
                item = await events.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item  # type: ignore[misc]
        finally:
            stop.set()
            # Release only once the worker has stopped (within one token), and do it here, on a
            # live loop: a done-callback would never run if the consumer's loop ended meanwhile.
            try:
                await asyncio.shield(future)
            except BaseException:  # cancelled again while waiting: release when the worker ends
                pass
            if future.done():
                self._lock.release()
            else:
                future.add_done_callback(lambda _: self._lock.release())

    async def complete(self, messages: list[ChatMessage], options: GenerationOptions) -> ChatResult:
        """One whole generation (text, tool calls, usage). The stream is closed promptly if the
        caller is cancelled, so the engine stops between tokens and the queue is free again."""
        parts: list[str] = []
        calls = []
        finished: Finished | None = None
        async with contextlib.aclosing(self.stream(messages, options)) as events:
            async for event in events:
                if isinstance(event, Delta):
                    parts.append(event.text)
                elif isinstance(event, ToolCalls):
                    calls.extend(event.calls)
                else:
                    finished = event
        if finished is None:
            return ChatResult("".join(parts), options.model or "", TokenUsage(), "stop", tuple(calls))
        return ChatResult("".join(parts), finished.model, finished.usage, finished.finish_reason, tuple(calls))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
