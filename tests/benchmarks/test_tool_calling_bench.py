"""The API-Bank benchmark's reading and scoring, with the scripted model (no generation)."""

from __future__ import annotations

from assistant.llm.base import ToolCall
from assistant.llm.scripted import ScriptedChatModel
from benchmarks import tool_calling as bench


def test_level_1_samples_and_api_table_are_read() -> None:
    apis = bench.load_apis()
    assert apis["AddAlarm"].parameters["time"]["type"] == "datetime"
    spec = apis["AddAlarm"].spec()
    assert spec.parameters["properties"]["time"]["type"] == "string" and spec.description
    samples = list(bench.load_samples())
    assert len({s.file for s in samples}) > 100 and all("level-1" in s.file for s in samples)
    alarm = next(s for s in samples if s.file == "AddAlarm-level-1-1.jsonl" and s.expected.name == "AddAlarm")
    assert alarm.expected.arguments == {"token": "z9x8c7v6b5n4m3q2w1", "time": "2021-10-14 08:00:00"}
    # the earlier GetUserToken call and its result are in the history, as a call and a tool message
    (result,) = [m for m in alarm.history if m.role == "tool"]
    assert result.name == "GetUserToken" and "z9x8c7v6b5n4m3q2w1" in result.content
    assert alarm.history[-1] == bench.ChatMessage("assistant", "Okay, I'm setting the alarm.")
    assert set(alarm.apis) == {"AddAlarm", "GetUserToken"}


def test_scoring() -> None:
    want = ToolCall("a", "AddAlarm", {"token": "t", "time": "2021-10-14 08:00:00"})
    assert bench.score(want, ToolCall("b", "AddAlarm", {"token": "t", "time": "2021-10-14 08:00:00"})) == (True,) * 3
    assert bench.score(want, ToolCall("b", "AddAlarm", {"token": "T ", "time": "2021-10-14  08:00:00"})) == \
        (True, False, True)
    assert bench.score(want, ToolCall("b", "AddAlarm", {"token": "t"})) == (True, False, False)
    assert bench.score(want, ToolCall("b", "AddAgenda", {})) == (False, False, False)
    assert bench.score(want, None) == (False, False, False)


def test_evaluate_runs_the_loop_and_separates_overhead_from_generation() -> None:
    apis = bench.load_apis()
    samples = [s for s in bench.load_samples() if s.file == "AddAlarm-level-1-1.jsonl"]
    model = ScriptedChatModel()
    for s in samples:  # a perfect model: the annotated call
        model.enqueue(tool_calls=[(s.expected.name, s.expected.arguments)])
    outcomes = bench.evaluate(model, samples, apis)
    summary = bench.summary(outcomes)
    assert summary["tool_name_accuracy"] == summary["exact_arguments"] == 1.0
    assert summary["samples"] == len(samples) and all(o.overhead_ms >= 0 for o in outcomes)
    # the tools the model saw are the dialogue's APIs, with API-Bank's schemas
    assert sorted(t.name for t in model.calls[0][1].tools) == ["AddAlarm", "GetUserToken"]
