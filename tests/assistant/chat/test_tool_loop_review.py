"""The tool loop's checks before a call runs (issue 20), with a scripted model: prerequisite calls,
grounded dates, the repair round, the counters, and every switch off (the behaviour before)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import ConfigDict, create_model

from assistant.chat.call_review import ToolCallCounters
from assistant.chat.tool_loop import ToolLoop
from assistant.config import ToolCallingSettings
from assistant.llm.base import ChatMessage, GenerationOptions, ToolSpec
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel
from assistant.tools.base import Tool, ToolContext, ToolError, ToolRegistry

NOW = datetime(2026, 11, 11, 10, 0, tzinfo=ZoneInfo("Europe/Berlin"))  # a Wednesday
TOKEN = "p9o8i7u6y5t4r3e2w1q"
RAN: list[tuple[str, dict[str, Any]]] = []


def make_tool(name: str, properties: dict[str, dict[str, Any]], result: Any, produces: tuple[str, ...] = ()) -> Tool:
    fields: dict[str, Any] = {p: (str, ...) for p in properties}
    model = create_model(f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields)
    spec = ToolSpec(name, f"The {name} API.", {"type": "object", "properties": properties,
                                               "required": list(properties)}, produces=produces)

    def run(ctx: ToolContext, **arguments: Any) -> Any:
        RAN.append((name, arguments))
        return result

    return Tool(spec, "test", run, model)


TOKEN_TOOL = make_tool("GetUserToken", {"username": {"type": "string"}, "password": {"type": "string"}},
                       {"token": TOKEN}, produces=("token",))
DELETE = make_tool("DeleteAccount", {"token": {"type": "string"}}, {"status": "success"})
AGENDA = make_tool("AddAgenda", {"content": {"type": "string"},
                                 "time": {"type": "string", "description": "Format: %Y-%m-%d %H:%M:%S"}},
                   {"status": "success"})
MUSIC = make_tool("PlayMusic", {"genre": {"type": "string", "enum": ["jazz", "rock", "pop"]}}, {"playing": True})


def _radio_down(ctx: ToolContext, **arguments: Any) -> Any:
    raise ToolError("the radio service is down")


RADIO = Tool(ToolSpec("PlayRadio", "Play a radio station.", {"type": "object", "properties": {
    "station": {"type": "string"}}, "required": ["station"]}), "test", _radio_down,
    create_model("PlayRadio_args", __config__=ConfigDict(extra="forbid"), station=(str, ...)))
REGISTRY = ToolRegistry([TOKEN_TOOL, DELETE, AGENDA, MUSIC, RADIO])


def run(model: ScriptedChatModel, user: str, settings: ToolCallingSettings | None = None,
        counters: ToolCallCounters | None = None):  # noqa: ANN201
    RAN.clear()
    loop = ToolLoop(InferenceQueue(model), REGISTRY, settings or ToolCallingSettings(), now=lambda: NOW,
                    counters=counters)
    messages = [ChatMessage("system", "You are helpful."), ChatMessage("user", user)]
    return asyncio.run(loop.run(messages, GenerationOptions(temperature=0.0), ToolContext("u1")))


def test_a_made_up_token_is_not_used_the_producer_is_called_first() -> None:
    model, counters = ScriptedChatModel(), ToolCallCounters()
    model.enqueue(tool_calls=[("DeleteAccount", {"token": "abc123"})])  # made up
    model.enqueue(tool_calls=[("GetUserToken", {"username": "user3", "password": "user3pass"})])
    model.enqueue(tool_calls=[("DeleteAccount", {"token": TOKEN})])
    model.enqueue("Your account is deleted.")
    result = run(model, "Delete my account; I am user3, password user3pass.", counters=counters)
    assert result.content == "Your account is deleted."
    assert [(r.call.name, r.status) for r in result.records] == [
        ("DeleteAccount", "prerequisite"), ("GetUserToken", "ok"), ("DeleteAccount", "ok")]
    assert RAN == [("GetUserToken", {"username": "user3", "password": "user3pass"}), ("DeleteAccount", {"token": TOKEN})]
    refused = result.records[0]
    assert "GetUserToken" in refused.error and refused.review["prerequisite"] == {"parameter": "token",
                                                                                   "producer": "GetUserToken"}
    # the turn after the refusal is a forced call of the producer; the one after is free again
    assert [options.tool_choice for _, options in model.calls] == ["auto", "GetUserToken", "auto", "auto"]
    told = [m for m in model.calls[1][0] if m.role == "tool"]
    assert told and "Call GetUserToken first" in told[-1].content
    assert counters.snapshot()["prerequisite"] == 1
    # the model sees where the token comes from in the tool list
    shown = {s.name: s for s in model.calls[0][1].tools}
    assert "GetUserToken" in shown["DeleteAccount"].parameters["properties"]["token"].get("description", "")


def test_a_relative_time_is_resolved_by_the_parser_not_the_model() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("AddAgenda", {"content": "dentist", "time": "tomorrow at 3pm"})])
    model.enqueue("Added.")
    result = run(model, "Put the dentist in my agenda for tomorrow at 3pm.")
    (record,) = result.records
    assert record.status == "ok" and record.call.arguments["time"] == "2026-11-12 15:00:00"
    assert RAN == [("AddAgenda", {"content": "dentist", "time": "2026-11-12 15:00:00"})]
    (change,) = [c for c in record.review["changes"] if c["field"] == "time"]
    assert change["before"] == "tomorrow at 3pm" and change["after"] == "2026-11-12 15:00:00"


def test_the_prompt_carries_now_after_the_system_prompt() -> None:
    model = ScriptedChatModel(["Hello."])
    run(model, "hi")
    sent = model.calls[0][0]
    assert sent[0].content == "You are helpful."
    assert sent[1].role == "system" and "2026-11-11" in sent[1].content and "Wednesday" in sent[1].content
    model = ScriptedChatModel(["Hello."])
    run(model, "hi", ToolCallingSettings(ground_dates=False))
    assert [m.role for m in model.calls[0][0]] == ["system", "user"]


def test_an_invalid_enum_gets_one_repair_round_then_an_error_the_model_sees() -> None:
    model, counters = ScriptedChatModel(), ToolCallCounters()
    model.enqueue(tool_calls=[("PlayMusic", {"genre": "classical"})])
    model.enqueue(tool_calls=[("PlayMusic", {"genre": "jazz"})])
    model.enqueue("Playing jazz.")
    result = run(model, "Play some jazz", counters=counters)
    assert [(r.call.name, r.status) for r in result.records] == [("PlayMusic", "repair"), ("PlayMusic", "ok")]
    assert model.calls[1][1].tool_choice == "PlayMusic"
    assert "genre" in result.records[0].error
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("PlayMusic", {"genre": "classical"})])
    model.enqueue(tool_calls=[("PlayMusic", {"genre": "baroque"})])
    model.enqueue("I cannot play that.")
    result = run(model, "Play some classical music", counters=counters)
    assert [(r.call.name, r.status) for r in result.records] == [("PlayMusic", "repair"), ("PlayMusic", "error")]
    assert result.content == "I cannot play that." and RAN == []
    assert counters.snapshot()["repair"] == 2 and counters.snapshot()["invalid_arguments"] == 1


def test_an_unknown_tool_is_an_error_the_model_sees_and_is_counted() -> None:
    model, counters = ScriptedChatModel(), ToolCallCounters()
    model.enqueue(tool_calls=[("SendFax", {"to": "x"})])
    model.enqueue("I cannot fax.")
    result = run(model, "Fax this", counters=counters)
    assert result.records[0].status == "error" and "unknown or disabled tool" in result.records[0].error
    assert counters.snapshot()["unknown_tool"] == 1


def test_decoding_switch_reaches_the_engine() -> None:
    model = ScriptedChatModel(["Hi."])
    run(model, "hi", ToolCallingSettings(call_threshold=0.35))
    assert model.calls[0][1].call_threshold == 0.35
    model = ScriptedChatModel(["Hi."])
    run(model, "hi", ToolCallingSettings(decoding="free"))
    assert model.calls[0][1].call_threshold is None


def test_every_switch_off_is_the_loop_as_before() -> None:
    off = ToolCallingSettings(decoding="free", ground_dates=False, prerequisites=False, argument_hygiene=False,
                              repair_rounds=0)
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("DeleteAccount", {"token": "abc123"})])
    model.enqueue(tool_calls=[("AddAgenda", {"content": "dentist", "time": "tomorrow at 3pm"})])
    model.enqueue("Done.")
    result = run(model, "Delete my account and add the dentist tomorrow at 3pm", off)
    assert [(r.call.name, r.status, r.review) for r in result.records] == [
        ("DeleteAccount", "ok", None), ("AddAgenda", "ok", None)]
    assert RAN[1] == ("AddAgenda", {"content": "dentist", "time": "tomorrow at 3pm"})
    assert "GetUserToken" not in str(model.calls[0][1].tools[1].parameters)


def test_the_producer_is_forced_once_per_run() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("DeleteAccount", {"token": "abc123"})])
    model.enqueue(tool_calls=[("GetUserToken", {"username": "user3", "password": "user3pass"})])
    model.enqueue(tool_calls=[("DeleteAccount", {"token": "still-made-up"})])
    model.enqueue("Sorry.")
    result = run(model, "Delete my account; I am user3, password user3pass.")
    assert [(r.call.name, r.status) for r in result.records] == [
        ("DeleteAccount", "prerequisite"), ("GetUserToken", "ok"), ("DeleteAccount", "error")]
    assert "Use the value from its result" in result.records[2].error
    assert [options.tool_choice for _, options in model.calls] == ["auto", "GetUserToken", "auto", "auto"]


def test_a_call_that_failed_asked_again_unchanged_is_a_repeat() -> None:
    model = ScriptedChatModel()
    for _ in range(4):  # a small model asks again for exactly what just failed
        model.enqueue(tool_calls=[("PlayRadio", {"station": "Jazz FM"})])
    model.enqueue("Sorry, the radio is down.")
    result = run(model, "Play Jazz FM")
    assert result.content == "Sorry, the radio is down."
    assert [(r.call.name, r.status) for r in result.records] == [("PlayRadio", "error")]
    assert model.calls[2][1].tools == ()  # after the repeat the model answers from what it has
