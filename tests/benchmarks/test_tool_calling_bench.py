"""The tool-calling benchmark's reading, scoring and running, with the scripted model (no generation)."""

from __future__ import annotations

from datetime import date

from assistant.config import ToolCallingSettings
from assistant.llm.base import ToolCall
from assistant.llm.scripted import ScriptedChatModel
from benchmarks import _tool_rows as rows
from benchmarks import tool_calling as bench


def test_level_1_samples_and_api_table_are_read() -> None:
    apis = bench.load_apis()
    assert apis["AddAlarm"].parameters["time"]["type"] == "datetime"
    spec = apis["AddAlarm"].spec()
    assert spec.parameters["properties"]["time"]["type"] == "string" and spec.description
    # output_parameters become ToolSpec.produces: the loop sees that AddAlarm's token comes from GetUserToken
    assert apis["GetUserToken"].spec().produces == ("token",) and "token" in spec.parameters["required"]
    samples = list(bench.load_samples())
    assert len({s.file for s in samples}) > 100 and all("level-1" in s.file for s in samples)
    alarm = next(s for s in samples if s.file == "AddAlarm-level-1-1.jsonl" and s.expected.name == "AddAlarm")
    assert alarm.expected.arguments == {"token": "z9x8c7v6b5n4m3q2w1", "time": "2021-10-14 08:00:00"}
    # the earlier GetUserToken call and its result are in the history, as a call and a tool message
    (result,) = [m for m in alarm.history if m.role == "tool"]
    assert result.name == "GetUserToken" and "z9x8c7v6b5n4m3q2w1" in result.content
    assert alarm.history[-1] == bench.ChatMessage("assistant", "Okay, I'm setting the alarm.")
    assert set(alarm.apis) == {"AddAlarm", "GetUserToken"}
    # "8 am tomorrow. Today is 2021-10-13.": the conversation's date, at the fixed now's time of day
    assert alarm.date == date(2021, 10, 13)
    (task,) = bench.apibank_tasks([alarm], apis)
    assert task.now == bench.DEFAULT_NOW.replace(year=2021, month=10, day=13)
    undated = next(s for s in samples if s.date is None)
    assert bench.apibank_tasks([undated], apis)[0].now == bench.DEFAULT_NOW


def test_stated_date() -> None:
    assert bench.stated_date(["hello", "It is today, at 10:30 am. Today is 2021-09-17"]) == date(2021, 9, 17)
    assert bench.stated_date(["Today's date is 2023-03-31. How else can I assist you?"]) == date(2023, 3, 31)
    assert bench.stated_date(["my date of birth is 1990-01-01", "today's date is 12-10"]) is None


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
    outcomes = bench.evaluate(model, bench.apibank_tasks(samples, apis))
    summary = bench.summary(outcomes)
    assert summary["tool_name_accuracy"] == summary["exact_arguments"] == summary["scored_call_ran"] == 1.0
    assert summary["samples"] == len(samples) and all(o.overhead_ms >= 0 for o in outcomes)
    assert summary["completion_tokens"] == 8 * len(samples) and summary["tokens_per_second"] > 0
    # the tools the model saw are the dialogue's APIs, with API-Bank's schemas
    assert sorted(t.name for t in model.calls[0][1].tools) == ["AddAlarm", "GetUserToken"]
    # the run stopped after the call that ran: one model turn per sample
    assert len(model.calls) == len(samples) and all(o.model_turns == 1 for o in outcomes)


def test_a_refused_call_is_not_the_scored_one() -> None:
    """A call that fails validation is not the one scored when a later call runs; with none that
    ran, the first attempted call is."""
    apis = bench.load_apis()
    sample = next(s for s in bench.load_samples() if s.expected.name == "AddAlarm")
    model = ScriptedChatModel()
    right = sample.expected.arguments  # its token is the one GetUserToken gave earlier in the dialogue
    model.enqueue(tool_calls=[("AddAlarm", {**right, "nonsense": 1})])  # an unknown key: not run
    model.enqueue(tool_calls=[(sample.expected.name, right)])
    model.enqueue(tool_calls=[("AddAlarm", {**right, "bogus": 1})])  # to repair: the next turn is AddAlarm, forced
    model.enqueue(tool_calls=[("AddAlarm", {**right, "again": 1})])  # still invalid: an error the model sees
    model.enqueue(tool_calls=[("NoSuchTool", {})])
    first, second = bench.evaluate(model, bench.apibank_tasks([sample, sample], apis))
    assert first.ran and first.args_exact and first.model_turns == 2
    assert not second.ran and second.called == {"name": "AddAlarm", "arguments": {**right, "bogus": 1}}
    assert second.model_turns == 3 and not second.args_exact and second.name_ok


def test_rows_are_cumulative() -> None:
    configs = dict(rows.row_settings(True))
    assert list(configs) == ["before", "+constrained", "+dates", "+prerequisites", "+hygiene"]
    before, last = configs["before"], configs["+hygiene"]
    assert (before.decoding, before.ground_dates, before.prerequisites, before.argument_hygiene,
            before.repair_rounds) == ("free", False, False, False, 0)
    assert configs["+dates"].decoding == "constrained" and configs["+dates"].ground_dates
    assert not configs["+dates"].prerequisites
    assert (last.decoding, last.ground_dates, last.prerequisites, last.argument_hygiene, last.repair_rounds) == \
        ("constrained", True, True, True, 1)
    assert all(c.max_iterations == 3 for c in configs.values())
    (name, default), = rows.row_settings(False)
    assert name == "default" and default.decoding == ToolCallingSettings().decoding
