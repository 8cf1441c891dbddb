"""The inference queue: one generation at a time, in arrival order, with queue and request
deadlines, early close, and failures that reach the caller and release the engine."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from assistant.errors import ServiceUnavailableError, UpstreamError
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, StreamEvent
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel


class Recording:
    """Wraps a model and logs (what, tag) for each call's start, tokens and end."""

    id = "recording"

    def __init__(self, inner: ScriptedChatModel):
        self.inner = inner
        self.log: list[tuple[str, str]] = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        tag = messages[-1].content
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.log.append(("start", tag))
        try:
            for event in self.inner.stream(messages, options):
                if isinstance(event, Delta):
                    self.log.append(("token", tag))
                yield event
        finally:
            with self._lock:
                self.active -= 1
                self.log.append(("end", tag))

    def tokens_of(self, tag: str) -> int:
        return sum(1 for what, t in self.log if what == "token" and t == tag)

    def health(self):  # noqa: ANN201
        return self.inner.health()

    def models(self):  # noqa: ANN201
        return self.inner.models()


def ask(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


async def consume(queue: InferenceQueue, text: str, options: GenerationOptions | None = None):
    deltas: list[str] = []
    finished = None
    async for event in queue.stream(ask(text), options or GenerationOptions()):
        if isinstance(event, Delta):
            assert finished is None, "a delta after Finished"
            deltas.append(event.text)
        else:
            finished = event
    return deltas, finished


def test_a_single_request_streams_to_the_end() -> None:
    queue = InferenceQueue(ScriptedChatModel(["a b c"]))
    try:
        deltas, finished = asyncio.run(consume(queue, "hi"))
    finally:
        queue.close()
    assert "".join(deltas) == "a b c"
    assert isinstance(finished, Finished)
    assert finished.finish_reason == "stop"


def test_concurrent_requests_queue_and_never_interleave() -> None:
    model = Recording(ScriptedChatModel(token_delay_secs=0.005))
    queue = InferenceQueue(model)
    prompts = [f"request-{i} alpha beta gamma" for i in range(4)]

    async def main():
        return await asyncio.gather(*(consume(queue, p) for p in prompts))

    try:
        results = asyncio.run(main())
    finally:
        queue.close()

    for prompt, (deltas, finished) in zip(prompts, results, strict=True):
        assert "".join(deltas) == f"You said: {prompt}"  # each consumer got exactly its own answer
        assert finished.usage.completion == len(deltas)
    assert model.max_active == 1
    # The model's log is one contiguous block per request, in arrival order.
    blocks: list[str] = []
    for what, tag in model.log:
        if what == "start":
            assert not blocks or blocks[-1] != tag
            blocks.append(tag)
        else:
            assert tag == blocks[-1], f"{what} of {tag} inside the generation of {blocks[-1]}"
    assert blocks == prompts
    assert [("start", p) for p in prompts] == [e for e in model.log if e[0] == "start"]


def test_queue_timeout_is_service_unavailable() -> None:
    model = ScriptedChatModel(["w " * 500], token_delay_secs=0.01)
    queue = InferenceQueue(model, queue_timeout_secs=0.05)

    async def main():
        first = queue.stream(ask("first"), GenerationOptions())
        await anext(first)  # the first request holds the engine
        try:
            with pytest.raises(ServiceUnavailableError, match="busy"):
                await consume(queue, "second")
            assert queue.waiting == 0
        finally:
            await first.aclose()

    try:
        asyncio.run(main())
    finally:
        queue.close()
    assert len(model.calls) == 1  # the second request never reached the model


def test_request_timeout_finishes_with_reason_timeout() -> None:
    model = ScriptedChatModel(["w " * 200], token_delay_secs=0.01)
    queue = InferenceQueue(model, request_timeout_secs=0.05)
    try:
        deltas, finished = asyncio.run(consume(queue, "long"))
    finally:
        queue.close()
    assert finished.finish_reason == "timeout"
    assert len(deltas) < 200


def test_closing_early_stops_generation_and_frees_the_engine() -> None:
    model = Recording(ScriptedChatModel(["w " * 200], token_delay_secs=0.01))
    queue = InferenceQueue(model)

    async def main():
        stream = queue.stream(ask("abandoned"), GenerationOptions())
        got = [await anext(stream), await anext(stream)]
        assert all(isinstance(e, Delta) for e in got)
        await stream.aclose()
        return await consume(queue, "next")

    try:
        deltas, finished = asyncio.run(main())
    finally:
        queue.close()
    assert "".join(deltas) == "You said: next"
    assert model.tokens_of("abandoned") < 50  # stopped long before its 200 tokens
    # The abandoned generation ended before the next one started.
    assert model.log.index(("end", "abandoned")) < model.log.index(("start", "next"))


@pytest.mark.parametrize("error", [UpstreamError("engine failed"), RuntimeError("boom")])
def test_model_error_reaches_the_consumer_and_releases_the_engine(error: Exception) -> None:
    model = ScriptedChatModel()
    model.enqueue(error=error)
    queue = InferenceQueue(model, queue_timeout_secs=2)

    async def main():
        with pytest.raises(type(error), match=str(error)):
            await consume(queue, "fails")
        return await consume(queue, "works")

    try:
        deltas, finished = asyncio.run(main())
    finally:
        queue.close()
    assert "".join(deltas) == "You said: works"
    assert finished.finish_reason == "stop"


class FailsMidway:
    id = "fails-midway"

    def stream(self, messages, options):  # noqa: ANN001, ANN201
        yield Delta("partial")
        raise UpstreamError("connection dropped")


def test_error_after_some_tokens_reaches_the_consumer() -> None:
    queue = InferenceQueue(FailsMidway())

    async def main():
        seen = []
        with pytest.raises(UpstreamError, match="dropped"):
            async for event in queue.stream(ask("x"), GenerationOptions()):
                seen.append(event)
        return seen

    try:
        seen = asyncio.run(main())
    finally:
        queue.close()
    assert seen == [Delta("partial")]


def test_options_reach_the_model_with_a_stop_callback() -> None:
    model = ScriptedChatModel()
    queue = InferenceQueue(model)
    try:
        asyncio.run(consume(queue, "x", GenerationOptions(model="m2", temperature=0.2, max_tokens=7)))
    finally:
        queue.close()
    _, options = model.calls[0]
    assert (options.model, options.temperature, options.max_tokens) == ("m2", 0.2, 7)
    assert options.should_stop is not None
    assert options.should_stop() is True  # the request is over: the model is told to stop


def test_a_request_cancelled_while_queued_leaves_the_queue_working() -> None:
    model = ScriptedChatModel(["w " * 200], token_delay_secs=0.01)
    queue = InferenceQueue(model, queue_timeout_secs=30)

    async def main():
        holder = queue.stream(ask("first"), GenerationOptions())
        await anext(holder)  # the engine is busy with the first request
        waiter = asyncio.ensure_future(consume(queue, "second"))
        for _ in range(1000):
            if queue.waiting == 1:
                break
            await asyncio.sleep(0.001)
        assert queue.waiting == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert queue.waiting == 0
        await holder.aclose()
        return await consume(queue, "third")

    try:
        deltas, finished = asyncio.run(main())
    finally:
        queue.close()
    assert "".join(deltas) == "You said: third"
    assert [m[-1].content for m, _ in model.calls] == ["first", "third"]


def test_closing_early_then_leaving_the_event_loop_does_not_wedge_the_queue() -> None:
    """Known failure: the engine lock is released by a done-callback scheduled on the event loop
    that started the generation. When a consumer closes the stream early and that loop then ends
    (``asyncio.run`` per call, as a script would do), the worker finishes after the loop is gone,
    the callback never runs, and every later request waits out the queue timeout (503) forever."""
    model = ScriptedChatModel(["w " * 50], token_delay_secs=0.01)
    queue = InferenceQueue(model, queue_timeout_secs=1)

    async def take_one_and_leave():
        stream = queue.stream(ask("abandoned"), GenerationOptions())
        await anext(stream)
        await stream.aclose()

    try:
        asyncio.run(take_one_and_leave())
        deltas, finished = asyncio.run(consume(queue, "next"))
    finally:
        queue.close()
    assert "".join(deltas) == "You said: next"


# --- faults and the circuit breaker ------------------------------------------------------------


def test_garbage_from_the_engine_is_an_upstream_error() -> None:
    from assistant.testing.faults import FaultyChatModel

    queue = InferenceQueue(FaultyChatModel(mode="garbage"), queue_timeout_secs=2)
    try:
        with pytest.raises(UpstreamError, match="instead of a stream event"):
            asyncio.run(consume(queue, "x"))
    finally:
        queue.close()


def test_repeated_engine_failures_open_the_breaker_and_it_answers_fast() -> None:
    from assistant.breaker import CircuitBreaker, CircuitOpenError, CircuitState
    from assistant.testing.faults import FaultyChatModel

    clock = [0.0]
    breaker = CircuitBreaker("inference", failure_threshold=2, reset_timeout_secs=30, clock=lambda: clock[0])
    model = FaultyChatModel(mode="raise")
    queue = InferenceQueue(model, queue_timeout_secs=2, breaker=breaker)

    async def main():
        for _ in range(2):
            with pytest.raises(RuntimeError, match="CUDA error"):
                await consume(queue, "x")
        with pytest.raises(CircuitOpenError) as refused:
            await consume(queue, "x")
        assert refused.value.code == "SERVICE_UNAVAILABLE"
        assert model.calls == 2  # refused without reaching the engine
        clock[0] = 30.0  # cool-down over: one trial, the engine works again
        model.mode = "ok"
        return await consume(queue, "back")

    try:
        deltas, _ = asyncio.run(main())
    finally:
        queue.close()
    assert "".join(deltas) == "You said: back"
    assert breaker.state is CircuitState.CLOSED


def test_validation_errors_and_queue_timeouts_do_not_count_against_the_engine() -> None:
    from assistant.breaker import CircuitBreaker, CircuitState
    from assistant.errors import ValidationFailed

    model = ScriptedChatModel()
    model.enqueue(error=ValidationFailed("prompt too long"))
    breaker = CircuitBreaker("inference", failure_threshold=1)
    queue = InferenceQueue(model, queue_timeout_secs=2, breaker=breaker)
    try:
        with pytest.raises(ValidationFailed):
            asyncio.run(consume(queue, "x"))
    finally:
        queue.close()
    assert breaker.state is CircuitState.CLOSED


def test_a_hung_engine_gives_503_at_the_deadline_and_refuses_new_work_until_it_ends() -> None:
    from assistant.testing.faults import FaultyChatModel

    model = FaultyChatModel(mode="hang", hang_secs=30)
    queue = InferenceQueue(model, queue_timeout_secs=30, request_timeout_secs=0.2, stop_grace_secs=0.2)

    async def main():
        with pytest.raises(ServiceUnavailableError, match="did not answer within 0.2 s"):
            await consume(queue, "x")
        assert queue.hung
        with pytest.raises(ServiceUnavailableError, match="stuck"):
            await consume(queue, "y")  # at once, not after the 30 s queue timeout
        assert model.calls == 1
        model.mode = "ok"
        model.release()
        for _ in range(200):
            if not queue.hung:
                break
            await asyncio.sleep(0.05)
        return await consume(queue, "after")

    try:
        deltas, _ = asyncio.run(main())
    finally:
        model.release()
        queue.close()
    assert "".join(deltas) == "You said: after"


def test_the_callers_own_stop_ends_the_generation_as_cancelled() -> None:
    """A caller's ``should_stop`` (the OpenAI endpoint's stop sequences) stops the engine between
    tokens; the generation ends ``cancelled``, not ``timeout``, with its usage."""
    model = ScriptedChatModel(["one two three four five six seven eight"], token_delay_secs=0.1)
    stop = threading.Event()

    async def run() -> list[StreamEvent]:
        queue = InferenceQueue(model)
        events = []
        async for event in queue.stream([ChatMessage("user", "go")], GenerationOptions(should_stop=stop.is_set)):
            events.append(event)
            if isinstance(event, Delta) and event.text.strip() == "two":
                stop.set()
        return events

    events = asyncio.run(run())
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.finish_reason == "cancelled"
    assert sum(isinstance(e, Delta) for e in events) < 8
