"""One generation at a time, off the event loop, in arrival order, with deadlines.

Requests wait for an ``asyncio.Lock`` (FIFO) up to ``queue_timeout_secs`` and then get a 503;
the backend's synchronous stream runs on a single worker thread and its events are handed to the
loop with ``call_soon_threadsafe``. Closing the async iterator early (a client went away),
passing ``request_timeout_secs`` or the caller's own ``options.should_stop`` returning True (its
generation then ends ``cancelled``) tells the backend to stop between tokens; the lock is released
only when the worker thread has really finished, so generations never interleave.

Faults (see :mod:`assistant.breaker`): an engine that crashes (an exception that is not an
AssistantError) reaches the caller as is (the API answers 500 ``INTERNAL_ERROR``, its text only in
the log); one that sends something that is not a stream event gives an ``UpstreamError`` (502);
one that sends nothing for ``request_timeout_secs`` (hung, deaf to the stop signal) gives a 503 at
that deadline. Each of these, and the engine's own ``SERVICE_UNAVAILABLE``/``UPSTREAM_ERROR``,
counts against the engine's circuit breaker; while the breaker is open, or while a hung generation
still holds the engine, requests get a 503 at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from assistant.breaker import CircuitBreaker
from assistant.errors import AssistantError, ServiceUnavailableError, UpstreamError
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
STOP_GRACE_SECS = 2.0  # how long a stopped generation may take to end before it counts as hung
_STREAM_EVENTS = (Delta, ToolCalls, Finished)


class QueueTimeoutError(ServiceUnavailableError):
    """Waited too long for the engine (busy with other requests): not the engine's failure."""


@dataclass(frozen=True)
class _Failure:
    exc: BaseException


class InferenceQueue:
    def __init__(self, model: ChatModel, *, queue_timeout_secs: float = 300.0, request_timeout_secs: float = 120.0,
                 breaker: CircuitBreaker | None = None, stop_grace_secs: float = STOP_GRACE_SECS):
        self.model = model
        self.queue_timeout_secs = queue_timeout_secs
        self.request_timeout_secs = request_timeout_secs
        self.breaker = breaker
        self.stop_grace_secs = stop_grace_secs
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
        self.waiting = 0
        self.hung = False  # a generation passed its deadline and has not ended yet

    async def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> AsyncIterator[StreamEvent]:
        if self.hung:
            raise ServiceUnavailableError(
                "the inference engine is stuck in a generation that passed its deadline; try again later"
            )
        if self.breaker is not None:
            self.breaker.before_call()
        try:
            async with contextlib.aclosing(self._stream(messages, options)) as events:
                async for event in events:
                    yield event
        except BaseException as exc:
            if self.breaker is not None:
                if _engine_failure(exc):
                    self.breaker.record_failure(exc)
                else:
                    self.breaker.release_trial()
            raise
        if self.breaker is not None:
            self.breaker.record_success()

    async def _stream(self, messages: list[ChatMessage], options: GenerationOptions) -> AsyncIterator[StreamEvent]:
        self.waiting += 1
        try:
            # asyncio.timeout, not wait_for: on 3.11 wait_for can lose an acquired lock on timeout.
            async with asyncio.timeout(self.queue_timeout_secs):
                await self._lock.acquire()
        except TimeoutError:
            raise QueueTimeoutError(
                f"the inference engine is busy: waited {self.queue_timeout_secs:g} s in the queue"
            ) from None
        finally:
            self.waiting -= 1
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[object] = asyncio.Queue()
        stop = threading.Event()
        deadline = time.monotonic() + self.request_timeout_secs

        caller_stop = options.should_stop  # the caller's own reason to stop (a stop sequence reached)

        def should_stop() -> bool:
            return stop.is_set() or time.monotonic() > deadline or (caller_stop is not None and caller_stop())

        run_options = replace(options, should_stop=should_stop)

        def hand_over(item: object) -> None:
            try:
                loop.call_soon_threadsafe(events.put_nowait, item)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                stop.set()

        def work() -> None:
            try:
                for event in self.model.stream(messages, run_options):
                    if not isinstance(event, _STREAM_EVENTS):
                        raise UpstreamError(
                            f"the inference engine sent {type(event).__name__} instead of a stream event"
                        )
                    if isinstance(event, Finished) and event.finish_reason == "cancelled" and not stop.is_set() \
                            and not (caller_stop is not None and caller_stop()):
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
                try:
                    # a generation that sends nothing past its deadline (plus the time to stop) is hung
                    wait = deadline - time.monotonic() + self.stop_grace_secs
                    item = await asyncio.wait_for(events.get(), max(wait, 0.0))
                except TimeoutError:
                    raise ServiceUnavailableError(
                        f"the inference engine did not answer within {self.request_timeout_secs:g} s"
                    ) from None
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item  # type: ignore[misc]
        finally:
            stop.set()
            # Release only once the worker has stopped (within one token), and do it here, on a
            # live loop: a done-callback would never run if the consumer's loop ended meanwhile.
            # A worker that does not stop within the grace time is hung: the lock stays held until
            # it ends (generations never interleave) and new requests are refused meanwhile.
            try:
                await asyncio.wait_for(asyncio.shield(future), self.stop_grace_secs)
            except BaseException:  # hung, or cancelled again while waiting: release when it ends
                pass
            if future.done():
                self._lock.release()
            else:
                self.hung = True
                future.add_done_callback(self._worker_ended)

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

    def _worker_ended(self, _: object) -> None:
        self.hung = False
        self._lock.release()

    def restart(self) -> None:
        """What sanitation's supervisor does for a failing engine: close the breaker so requests
        flow again. Refused while a generation hangs past its deadline: the model is not safe to
        run twice at once, and the hung thread cannot be killed (the component ends degraded)."""
        if self.hung:
            raise RuntimeError("a generation is still running past its deadline; the engine cannot be "
                               "restarted under it")
        if self.breaker is not None:
            self.breaker.reset()

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _engine_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says the engine is failing (the breaker counts it) rather than the request
    being wrong (validation) or the client going away (cancellation)."""
    if isinstance(exc, AssistantError):
        return isinstance(exc, ServiceUnavailableError | UpstreamError) and not isinstance(exc, QueueTimeoutError)
    return isinstance(exc, Exception)  # a crash; not GeneratorExit or CancelledError
