"""The tool-calling loop with the scripted model: iterations, errors, timeouts, parallelism,
approvals, enabled tools, and the events of a run."""

from __future__ import annotations

import asyncio
import threading
import time

from assistant.chat.tool_loop import LoopEventType, ToolLoop, _repeats, timeline
from assistant.config import ToolCallingSettings
from assistant.llm.base import ChatMessage, GenerationOptions, ToolCall
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel
from assistant.tools.base import ToolContext, ToolError, ToolRegistry, tool

CALLS: list[tuple[str, float]] = []


@tool("weather")
def get_weather(ctx: ToolContext, location: str) -> dict:
    """Current weather."""
    CALLS.append(("get_weather", time.monotonic()))
    return {"location": location, "temperature_c": 21}


@tool("weather")
def slow_lookup(ctx: ToolContext, seconds: float) -> str:
    """Sleeps."""
    CALLS.append(("slow_lookup", time.monotonic()))
    time.sleep(seconds)
    return "done"


@tool("weather")
def broken(ctx: ToolContext) -> str:
    """Always fails."""
    raise RuntimeError("backend down")


@tool("weather")
def refuses(ctx: ToolContext) -> str:
    """Reports an error."""
    raise ToolError("no such city")


REGISTRY = ToolRegistry([get_weather, slow_lookup, broken, refuses])


def run(model, settings=None, enabled=None, events=None, approvals=None):  # noqa: ANN001, ANN201
    CALLS.clear()
    loop = ToolLoop(InferenceQueue(model), REGISTRY, settings or ToolCallingSettings(),
                    on_event=(events.append if events is not None else None), approvals=approvals)
    return asyncio.run(loop.run([ChatMessage("user", "Weather in Paris?")], GenerationOptions(),
                                ToolContext("u1"), enabled))


def tool_messages(model, turn):  # noqa: ANN001, ANN201
    return [m for m in model.calls[turn][0] if m.role == "tool"]


def test_call_observe_answer() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])
    model.enqueue("It is 21 °C in Paris.")
    events = []
    result = run(model, events=events)
    assert result.content == "It is 21 °C in Paris." and result.finish_reason == "stop" and result.iterations == 2
    (record,) = result.records
    assert record.call.name == "get_weather" and record.result == {"location": "Paris", "temperature_c": 21}
    assert record.error is None and record.duration_ms >= 0
    (tool_message,) = tool_messages(model, 1)
    assert '"temperature_c": 21' in tool_message.content and tool_message.name == "get_weather"
    assert [t.name for t in model.calls[0][1].tools] == ["broken", "get_weather", "refuses", "slow_lookup"]
    deltas = [e.data["delta"] for e in events if e.type is LoopEventType.MESSAGE_DELTA]
    assert "".join(deltas) == "It is 21 °C in Paris." and len(deltas) > 1  # streamed, not held back
    assert [e.type for e in events if e.type is not LoopEventType.MESSAGE_DELTA] == [
        LoopEventType.RUN_START, LoopEventType.MODEL_START, LoopEventType.MODEL_END, LoopEventType.TOOL_START,
        LoopEventType.TOOL_END, LoopEventType.MODEL_START, LoopEventType.MODEL_END, LoopEventType.RUN_END,
    ]


def test_json_in_the_content_is_a_call() -> None:
    model = ScriptedChatModel(['{"name": "get_weather", "arguments": {"location": "Oslo"}}', "Mild in Oslo."])
    result = run(model)
    assert result.records[0].result["location"] == "Oslo" and result.content == "Mild in Oslo."


def test_errors_are_reported_to_the_model_not_raised() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("nope", {}), ("get_weather", {"city": "Paris"}), ("broken", {}), ("refuses", {})])
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])  # the repair round: get_weather forced
    model.enqueue("Sorry.")
    result = run(model)
    errors = {r.call.name: r.error for r in result.records[:4]}
    assert "unknown or disabled tool 'nope'" in errors["nope"]
    # bad arguments do not run: the model is asked once to correct them (a repair round)
    assert "get_weather did not run: invalid arguments" in errors["get_weather"]
    assert "location: missing" in errors["get_weather"]
    assert result.records[1].status == "repair"
    assert (result.records[4].call.name, result.records[4].status) == ("get_weather", "ok")  # repaired
    assert errors["broken"] == "broken failed: RuntimeError: backend down"
    assert errors["refuses"] == "no such city"
    assert result.content == "Sorry." and len(tool_messages(model, 1)) == 4


def test_max_iterations_stops_the_loop() -> None:
    model = ScriptedChatModel()
    for city in ("Paris", "Oslo", "Rome", "Bern", "Riga", "Kyiv"):
        model.enqueue(tool_calls=[("get_weather", {"location": city})])
    result = run(model, ToolCallingSettings(max_iterations=3))
    assert result.finish_reason == "max_iterations" and result.iterations == 3 and len(model.calls) == 3
    assert len(result.records) == 3 and "stopped (max_iterations)" in result.content


def test_enabled_tools_restrict_what_runs_and_what_the_model_sees() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("slow_lookup", {"seconds": 0})])
    model.enqueue("ok")
    result = run(model, enabled=["get_weather"])
    assert [t.name for t in model.calls[0][1].tools] == ["get_weather"]
    assert "unknown or disabled tool 'slow_lookup'" in result.records[0].error and CALLS == []


def test_parallel_execution_overlaps_and_sequential_does_not() -> None:
    for parallel in (True, False):
        model = ScriptedChatModel()
        model.enqueue(tool_calls=[("slow_lookup", {"seconds": 0.3}), ("slow_lookup", {"seconds": 0.3})])
        model.enqueue("done")
        threads_before = threading.active_count()
        result = run(model, ToolCallingSettings(parallel_tool_execution=parallel))
        starts = sorted(t for _, t in CALLS)
        assert len(result.records) == 2 and threads_before >= 1
        # Parallel: the second starts before the first finished; sequential: after it.
        assert (starts[1] - starts[0] < 0.3) is parallel


def test_iteration_timeout_on_a_slow_model_and_on_a_slow_tool() -> None:
    model = ScriptedChatModel()
    model.enqueue("late", delay_secs=2)
    result = run(model, ToolCallingSettings(iteration_timeout_secs=0.2))
    assert result.finish_reason == "timeout" and result.iterations == 1

    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("slow_lookup", {"seconds": 1})])
    model.enqueue("gave up waiting")
    result = run(model, ToolCallingSettings(iteration_timeout_secs=0.2))
    assert "did not finish within" in result.records[0].error and result.content == "gave up waiting"


def test_total_timeout_ends_the_run() -> None:
    model = ScriptedChatModel()
    for n in range(5):
        model.enqueue(tool_calls=[("slow_lookup", {"seconds": 0.15 + n / 1000})])
    result = run(model, ToolCallingSettings(total_timeout_secs=0.25, iteration_timeout_secs=5))
    assert result.finish_reason == "timeout" and result.iterations < 5


class Gate:
    """Stores approval requests in a list (the chat's gate stores them in the database)."""

    def __init__(self) -> None:
        self.requested: list[ToolCall] = []

    def __call__(self, call: ToolCall) -> str:
        self.requested.append(call)
        return f"approval-{len(self.requested)}"


def test_calls_needing_approval_do_not_run_and_become_requests() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"}), ("slow_lookup", {"seconds": 0})])
    model.enqueue("I need your approval for the lookup.")
    events, gate = [], Gate()
    result = run(model, ToolCallingSettings(require_approval_for=["slow_lookup"]), events=events, approvals=gate)
    assert [name for name, _ in CALLS] == ["get_weather"]
    (approval,) = result.approvals
    assert approval.call.name == "slow_lookup" and approval.id == "approval-1"
    assert [(c.name, c.arguments) for c in gate.requested] == [("slow_lookup", {"seconds": 0})]
    gated = next(r for r in result.records if r.call.name == "slow_lookup")
    assert gated.result["status"] == "approval_required" and gated.result["approval_id"] == approval.id
    assert any(e.type == LoopEventType.APPROVAL_REQUIRED and e.data["approval_id"] == approval.id for e in events)
    assert gated.status == "approval_required"
    told = next(m for m in model.calls[1][0] if m.role == "tool" and m.name == "slow_lookup")
    assert "approval-1" in told.content and "did not run" in told.content


def test_a_gated_call_with_bad_arguments_or_no_gate_is_an_error_and_requests_nothing() -> None:
    settings = ToolCallingSettings(require_approval_for=["slow_lookup"])
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("slow_lookup", {"seconds": "soon"})])
    model.enqueue(tool_calls=[("slow_lookup", {"seconds": "later"})])  # the repair round, still invalid
    model.enqueue("Sorry.")
    gate = Gate()
    result = run(model, settings, approvals=gate)
    assert gate.requested == [] and result.approvals == [] and CALLS == []
    assert result.records[0].status == "repair" and "invalid arguments" in result.records[0].error
    assert result.records[1].status == "error" and "invalid arguments" in result.records[1].error
    model.enqueue(tool_calls=[("slow_lookup", {"seconds": 0})])
    model.enqueue("Sorry.")
    result = run(model, settings)  # a run nobody can approve (no gate): refused, never run
    assert result.approvals == [] and CALLS == []
    assert result.records[0].status == "error" and "cannot be requested here" in result.records[0].error


def test_malformed_json_call_is_reported_back_and_the_model_retries() -> None:
    model = ScriptedChatModel(['{"name": "get_weather", "arguments": {"location": "Oslo"', 'It is mild in Oslo.'])
    events = []
    result = run(model, events=events)
    assert result.content == "It is mild in Oslo." and result.iterations == 2
    (record,) = result.records
    assert record.status == "error" and "not a valid tool call" in record.error
    feedback = model.calls[1][0][-1]
    assert feedback.role == "user" and "not valid JSON" in feedback.content
    # the broken call text was never streamed to the user as an answer
    deltas = "".join(e.data["delta"] for e in events if e.type is LoopEventType.MESSAGE_DELTA)
    assert deltas == "It is mild in Oslo."


def test_unparsable_native_arguments_are_a_tool_error() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("get_weather", {"_unparsed": '{"location": Par'})])
    model.enqueue("Sorry.")
    result = run(model)
    assert "not valid JSON" in result.records[0].error and CALLS == []


def test_a_fenced_code_answer_is_streamed_not_parsed() -> None:
    code = "```python\nprint({\"name\": 1})\n```"
    model = ScriptedChatModel([code])
    result = run(model)
    assert result.content.replace(" ", "") == code.replace(" ", "") and result.records == []


def test_stream_yields_events_and_ends_with_the_result() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])
    model.enqueue("Sunny.")
    loop = ToolLoop(InferenceQueue(model), REGISTRY, ToolCallingSettings())

    async def collect():  # noqa: ANN202
        return [e async for e in loop.stream([ChatMessage("user", "hi")], GenerationOptions(), ToolContext("u"))]

    events = asyncio.run(collect())
    assert events[-1].type is LoopEventType.RUN_END
    result = events[-1].data["result"]
    assert result.content == "Sunny." and result.generation_ms > 0
    tool_end = next(e for e in events if e.type is LoopEventType.TOOL_END)
    assert tool_end.data["result"]["temperature_c"] == 21 and tool_end.data["duration_ms"] >= 0


def test_a_repeated_call_is_not_run_again_and_the_next_turn_must_answer() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])  # small models loop like this
    model.enqueue("It is 21 °C in Paris.")
    result = run(model)
    assert result.content == "It is 21 °C in Paris." and result.iterations == 3
    assert [name for name, _ in CALLS] == ["get_weather"]  # run once
    assert [t.name for t in model.calls[1][1].tools] != [] and model.calls[2][1].tools == ()
    assert model.calls[2][0][-1].role == "user" and "Answer" in model.calls[2][0][-1].content


def test_event_summaries_and_timeline() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])
    model.enqueue("Sunny.")
    events = []
    run(model, events=events)
    lines = [e.summary() for e in events if e.type is not LoopEventType.MESSAGE_DELTA]
    assert lines[0].startswith("run-start: tools broken, get_weather")
    assert '[1] model-end: calls get_weather({"location": "Paris"})' in lines
    assert any(line.startswith("[1] tool-end: get_weather in") and "temperature_c" in line for line in lines)
    assert lines[-1] == "run-end: stop after 2 model turn(s)"
    rows = timeline(events)
    assert [r["label"] for r in rows] == ["model turn 1", "get_weather", "model turn 2"]
    assert all(0 <= r["start_ms"] <= r["end_ms"] for r in rows)
    assert rows[1]["start_ms"] >= rows[0]["end_ms"]


def test_a_call_whose_arguments_extend_an_earlier_one_is_a_repeat() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("slow_lookup", {"seconds": 0})])
    model.enqueue(tool_calls=[("get_weather", {"location": "Paris"})])  # new: runs
    model.enqueue(tool_calls=[("get_weather", {"location": "Oslo"})])  # new: runs
    model.enqueue("Both are mild.")
    result = run(model)
    assert [r.call.name for r in result.records] == ["slow_lookup", "get_weather", "get_weather"]
    assert result.content == "Both are mild."
    assert _repeats(ToolCall("a", "t", {"x": 1, "when": "now"}), ToolCall("b", "t", {"x": 1}))
    assert not _repeats(ToolCall("a", "t", {"x": 2}), ToolCall("b", "t", {"x": 1}))
    assert not _repeats(ToolCall("a", "u", {"x": 1}), ToolCall("b", "t", {"x": 1}))
