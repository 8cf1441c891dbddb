"""BFCL live_simple in the tool-calling benchmark: the AST scorer on handmade cases (one pass and
one fail per rule), the reader and schema converter on real lines of the shared data, and a run of
the loop with the scripted model (no generation)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assistant.llm.base import ToolCall, ToolSpec
from assistant.llm.scripted import ScriptedChatModel
from assistant.tools.base import ToolError
from benchmarks import _bfcl
from benchmarks import tool_calling as bench

SPEC = ToolSpec("book.ride", "Book a ride.", {
    "type": "object",
    "required": ["loc", "time"],
    "properties": {
        "loc": {"type": "string"},
        "time": {"type": "integer"},
        "fare": {"type": "number"},
        "shared": {"type": "boolean"},
        "stops": {"type": "array", "items": {"type": "string"}},
        "options": {"type": "object"},
        "riders": {"type": "array", "items": {"type": "object"}},
        "note": {"type": "string"},
        "anything": {},
    },
})
ANSWER: dict[str, dict[str, list[Any]]] = {"book.ride": {
    "loc": ["2020 Addison Street, Berkeley, CA", "Berkeley"],
    "time": [600],
    "fare": [12.0, ""],
    "shared": [False, ""],
    "stops": [["Oak St.", "Pine St"], ""],
    "options": [{"seats": [2], "music": ["", "jazz"]}, ""],
    "riders": [[{"name": ["Li Lei"], "age": [18]}], ""],
    "note": ["", None],
    "anything": ["", 3],
}}
GOOD = {"loc": "2020 Addison Street, Berkeley, CA", "time": 600}


def check(**changes: Any) -> tuple[bool, bool, str]:
    arguments = {**GOOD, **changes}
    return _bfcl.check(ToolCall("c", "book.ride", {k: v for k, v in arguments.items() if v is not ...}), SPEC, ANSWER)


def test_the_name_must_be_the_function() -> None:
    assert check() == (True, True, "")
    assert _bfcl.check(ToolCall("c", "book_ride", GOOD), SPEC, ANSWER)[:2] == (False, False)
    assert _bfcl.check(None, SPEC, ANSWER) == (False, False, "no call")


def test_every_required_parameter_is_present() -> None:
    name_ok, ok, why = check(time=...)
    assert name_ok and not ok and "required" in why and "time" in why


def test_every_given_parameter_is_known() -> None:
    assert not check(driver="Bob")[1]
    assert "unknown parameter" in check(driver="Bob")[2]


def test_an_omitted_parameter_must_accept_omission() -> None:
    answer = {"book.ride": {**ANSWER["book.ride"], "fare": [12.0]}}  # fare: no "" -> must be given
    call = ToolCall("c", "book.ride", GOOD)
    assert not _bfcl.check(call, SPEC, answer)[1]
    assert _bfcl.check(ToolCall("c", "book.ride", {**GOOD, "fare": 12}), SPEC, answer)[1]


def test_strings_are_compared_after_bfcl_normalisation() -> None:
    assert check(loc="2020 addison street berkeley ca")[1]
    assert check(loc="2020-Addison_Street/Berkeley.CA")[1]
    assert check(loc="berkeley")[1]  # the second accepted value
    assert not check(loc="2020 Addison Street, Berkeley, California")[1]
    assert _bfcl.standardize("It's  A-B_C/D.E,F*G^H") == 'it"sabcdefgh'


def test_types_follow_the_schema_an_integer_passes_for_a_number() -> None:
    assert check(fare=12)[1]  # int accepted for a number
    assert check(fare=12.0)[1]
    assert not check(fare=12.5)[1]
    assert not check(time=600.0)[1]  # a float is not an integer
    assert not check(time="600")[1]
    assert check(shared=False)[1]
    assert not check(shared=0)[1]  # 0 is not a boolean, though 0 == False in Python
    assert check(anything=3)[1] and not check(anything="x")[1]  # no type: only the value counts


def test_none_is_accepted_where_the_answer_lists_it() -> None:
    assert check(note=None)[1]
    assert not check(note="hello")[1]


def test_lists_are_compared_element_by_element() -> None:
    assert check(stops=["oak st", "PINE ST"])[1]
    assert not check(stops=["Pine St", "Oak St"])[1]  # order matters
    assert not check(stops=["Oak St"])[1]
    assert not check(stops="Oak St, Pine St")[1]


def test_dicts_are_compared_key_by_key() -> None:
    assert check(options={"seats": 2})[1]  # music may be left out
    assert check(options={"seats": 2, "music": "Jazz"})[1]
    assert not check(options={"seats": 3})[1]
    assert not check(options={"music": "jazz"})[1]  # seats may not be left out
    assert not check(options={"seats": 2, "colour": "red"})[1]  # a key the answer does not have
    assert check(riders=[{"name": "li lei", "age": 18}])[1]  # a list of dicts
    assert not check(riders=[{"name": "Li Lei", "age": 19}])[1]


def _line(path, case_id: str) -> dict[str, Any]:  # noqa: ANN001
    return next(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if case_id in line)


def test_real_lines_are_read_and_converted() -> None:
    cases = {c.id: c for c in _bfcl.load_cases()}
    assert len(cases) == 258
    # a dict with nested properties and enums
    case = cases["live_simple_40-17-0"]
    raw = _line(_bfcl.CASES, case.id)["function"][0]["parameters"]
    (spec,) = case.specs
    body = spec.parameters["properties"]["body"]
    assert spec.parameters["type"] == "object" and body["type"] == "object" and raw["properties"]["body"]["type"] == "dict"
    assert body["properties"]["airConJobMode"]["enum"] == ["AIR_CLEAN", "COOL", "AIR_DRY"]
    assert body["properties"]["airConJobMode"]["default"] == "COOL" and spec.parameters["required"] == raw["required"]
    assert case.messages[0].role == "user" and "answer" not in case.id
    assert case.answer == _line(_bfcl.ANSWERS, case.id)["ground_truth"][0]
    tool = bench.bfcl_tool(spec)
    tool.validate({"body": {"airConJobMode": "COOL"}})
    with pytest.raises(ToolError):
        tool.validate({"body": {"airConJobMode": "HOT"}})  # not in the enum
    with pytest.raises(ToolError):
        tool.validate({"body": {"airConJobMode": "COOL", "fanSpeed": 3}})  # a key the schema lacks
    # an array of floats
    (spec,) = cases["live_simple_85-46-0"].specs
    assert spec.parameters["properties"]["coordinates"] == {
        "type": "array", "items": {"type": "number"},
        "description": spec.parameters["properties"]["coordinates"]["description"]}
    bench.bfcl_tool(spec).validate({"coordinates": [37.8715, -122.273]})
    # "any": no type at all
    (spec,) = cases["live_simple_117-73-0"].specs
    assert "type" not in spec.parameters["properties"]["input_value"]
    tool = bench.bfcl_tool(spec)
    for value in ("abc", True, 3.5):
        tool.validate({"input_value": value})
    with pytest.raises(ToolError):
        tool.validate({})  # input_value is required


def test_every_answer_passes_its_own_check_and_validates() -> None:
    """The answer's first accepted values, as a call: the scorer accepts it and the stub tool runs it.
    Two cases list no accepted value for a required parameter: no call passes them (as in BFCL)."""
    unpassable = []
    for case in _bfcl.load_cases():
        call = case.expected
        if any(options == [] for options in case.answer[call.name].values()):
            unpassable.append(case.id)
            assert not _bfcl.check(call, case.specs[0], case.answer)[1]
            continue
        assert _bfcl.check(call, case.specs[0], case.answer) == (True, True, ""), case.id
        bench.bfcl_tool(case.specs[0]).validate(call.arguments)
    assert unpassable == ["live_simple_106-63-0", "live_simple_112-68-0"]


def test_evaluate_scores_the_first_call_that_ran() -> None:
    cases = {c.id: c for c in _bfcl.load_cases()}
    tasks = bench.bfcl_tasks([cases["live_simple_2-2-0"], cases["live_simple_0-0-0"]])
    assert tasks[0].messages[0].content == bench.SYSTEM and [m.role for m in tasks[0].messages] == ["system", "user"]
    model = ScriptedChatModel()
    # uber.ride: first an enum value the schema refuses (not run), then a right call (run, scored)
    model.enqueue(tool_calls=[("uber.ride", {"loc": "2020 Addison Street, Berkeley, CA, USA", "type": "Comfy",
                                             "time": 600})])
    model.enqueue(tool_calls=[("uber.ride", {"loc": "2020 addison street berkeley ca usa", "type": "comfort",
                                             "time": 600})])
    # get_user_info: runs at once, with a wrong value
    model.enqueue(tool_calls=[("get_user_info", {"user_id": 7890, "special": "red"})])
    ride, user = bench.evaluate(model, tasks, row="+hygiene")
    assert ride.ran and ride.name_ok and ride.args_exact and ride.model_turns == 2
    assert ride.called == {"name": "uber.ride", "arguments": {"loc": "2020 addison street berkeley ca usa",
                                                             "type": "comfort", "time": 600}}
    assert user.ran and user.name_ok and not user.args_exact and "special" in user.reason
    assert len(model.calls) == 3  # no model turn after a call ran
    assert model.calls[0][1].tools[0].parameters["properties"]["type"]["enum"] == ["plus", "comfort", "black"]
    text = bench.table([ride, user])
    row = next(line for line in text.splitlines() if "+hygiene" in line)
    assert row.split()[2:6] == ["bfcl", "2", "100.0%", "50.0%"]
    assert "tokens/s" in text.splitlines()[-1]


def test_main_runs_both_datasets_and_every_row(monkeypatch, capsys) -> None:  # noqa: ANN001
    """The command line end to end with the scripted engine (it answers in text: no call lands)."""
    monkeypatch.setenv("ASSISTANT_INFERENCE__BACKEND", "scripted")
    assert bench.main(["--limit", "1", "--rows", "--json", "--now", "2024-05-06T10:00:00"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["summaries"]) == 10  # five rows, two datasets
    assert {o["dataset"] for o in report["outcomes"]} == {"apibank", "bfcl"}
    assert all(o["called"] is None and not o["name_ok"] for o in report["outcomes"])
