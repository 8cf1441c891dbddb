"""The planner: the plan tool's schema, parsing what the model sends, and the fallback."""

from __future__ import annotations

import asyncio
import json

import pytest

from assistant.agents.planner import (
    PLAN_TOOL,
    Plan,
    PlanUnusable,
    SubTaskSpec,
    fallback_plan,
    make_plan,
    parse_plan,
    plan_schema,
)
from assistant.errors import ServiceUnavailableError
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel


def plan_with(model: ScriptedChatModel, description: str = "Organise the party", **kwargs) -> Plan:
    async def go() -> Plan:
        queue = InferenceQueue(model)
        try:
            return await make_plan(queue, description, **{"max_sub_agents": 3, **kwargs})
        finally:
            queue.close()
    return asyncio.run(go())


# --- schema ----------------------------------------------------------------------------------------


def test_the_schema_bounds_the_sub_tasks_and_lists_tools_and_profiles() -> None:
    schema = plan_schema(4, ["get_weather", "search_web"], ["Researcher"])
    assert schema["required"] == ["summary", "sub_tasks"]
    sub_tasks = schema["properties"]["sub_tasks"]
    assert (sub_tasks["minItems"], sub_tasks["maxItems"]) == (1, 4)
    item = sub_tasks["items"]
    assert item["required"] == ["description"]
    assert item["properties"]["tools"]["items"]["enum"] == ["get_weather", "search_web"]
    assert item["properties"]["profile"]["enum"] == ["Researcher"]


def test_without_tools_or_profiles_the_schema_has_only_descriptions() -> None:
    item = plan_schema(2)["properties"]["sub_tasks"]["items"]
    assert set(item["properties"]) == {"description"}


# --- parsing -----------------------------------------------------------------------------------------


def test_a_full_plan_is_parsed() -> None:
    plan = parse_plan({"summary": " Two parts. ", "sub_tasks": [
        {"description": "find flights", "tools": ["search_web", "made_up"], "profile": "researcher"},
        {"description": "find hotels"},
    ]}, 5, ["search_web"], ["Researcher"])
    assert plan == Plan("Two parts.", (SubTaskSpec("find flights", "Researcher", ("search_web",)),
                                       SubTaskSpec("find hotels")))


@pytest.mark.parametrize("arguments", [
    ["a", "b"],
    {"sub_tasks": ["a", {"description": "b"}]},
    {"sub_tasks": [{"description": "a"}, {"description": " "}, {"description": "A"}, {"description": "b"}, 7]},
])
def test_lenient_shapes_blank_and_duplicate_items(arguments) -> None:
    plan = parse_plan(arguments, 5)
    assert [s.description for s in plan.sub_tasks] == ["a", "b"]
    assert plan.summary.startswith("2 sub-task(s): a; b")


def test_the_plan_is_cut_to_the_limit() -> None:
    plan = parse_plan({"summary": "s", "sub_tasks": [f"part {n}" for n in range(8)]}, 3)
    assert [s.description for s in plan.sub_tasks] == ["part 0", "part 1", "part 2"]


def test_unknown_tools_only_means_every_tool_and_unknown_profiles_none() -> None:
    plan = parse_plan({"sub_tasks": [{"description": "x", "tools": ["nope"], "profile": "ghost"}]}, 2,
                      ["search_web"], ["Researcher"])
    assert plan.sub_tasks[0] == SubTaskSpec("x", None, None)


@pytest.mark.parametrize("arguments, reason", [
    ("text", "not an object"),
    ({"summary": "no list"}, "no sub_tasks list"),
    ({"sub_tasks": []}, "no usable sub-task"),
    ({"sub_tasks": [{"description": ""}]}, "no usable sub-task"),
    ({"_unparsed": "{oops"}, "not valid JSON"),
])
def test_unusable_plans(arguments, reason) -> None:
    with pytest.raises(PlanUnusable, match=reason):
        parse_plan(arguments, 3)


def test_the_fallback_is_the_whole_description() -> None:
    plan = fallback_plan("Do everything", "no plan")
    assert plan.sub_tasks == (SubTaskSpec("Do everything"),)
    assert plan.fallback and plan.reason == "no plan" and "unusable: no plan" in plan.summary


# --- the model call --------------------------------------------------------------------------------------


def test_the_model_is_offered_the_plan_tool_and_its_call_is_the_plan() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[(PLAN_TOOL, {"summary": "three steps", "sub_tasks": [
        {"description": "book a room"}, {"description": "order food"}]})])
    plan = plan_with(model, tools=[("search_web", "Search the web.")], profile_names=["Chef"])
    assert plan == Plan("three steps", (SubTaskSpec("book a room"), SubTaskSpec("order food")))
    messages, options = model.calls[0]
    assert [t.name for t in options.tools] == [PLAN_TOOL]
    assert options.tools[0].parameters == plan_schema(3, ["search_web"], ["Chef"])
    assert "at most 3 sub-tasks" in messages[0].content
    assert "search_web: Search the web." in messages[0].content and "Chef" in messages[0].content
    assert messages[-1].content == "Organise the party" and messages[-1].role == "user"
    assert any(m.tool_calls and m.tool_calls[0].name == PLAN_TOOL for m in messages[1:-1])  # worked examples


@pytest.mark.parametrize("text", [
    json.dumps({"name": PLAN_TOOL, "arguments": {"summary": "s", "sub_tasks": ["book a room", "order food"]}}),
    "<tool_call>\n" + json.dumps({"name": PLAN_TOOL, "arguments": {"sub_tasks": ["book a room", "order food"]}})
    + "\n</tool_call>",
    "```json\n" + json.dumps({"summary": "s", "sub_tasks": ["book a room", "order food"]}) + "\n```",
    'Here is the plan: ["book a room", "order food"]',
])
def test_a_plan_written_as_text_is_parsed(text: str) -> None:
    model = ScriptedChatModel([text])
    plan = plan_with(model)
    assert not plan.fallback
    assert [s.description for s in plan.sub_tasks] == ["book a room", "order food"]


@pytest.mark.parametrize("script, reason", [
    ({"text": "I'd be glad to help you organise the party!"}, "without a plan"),
    ({"text": '{"summary": "cut off", "sub_tasks": [{"descr'}, "not valid JSON"),
    ({"tool_calls": [(PLAN_TOOL, {"summary": "empty", "sub_tasks": []})]}, "no usable sub-task"),
    ({"error": ServiceUnavailableError("engine down")}, "the model call failed"),
])
def test_unusable_output_falls_back_to_one_sub_task(script, reason) -> None:
    model = ScriptedChatModel()
    model.enqueue(**script)
    plan = plan_with(model)
    assert plan.fallback and reason in plan.reason
    assert plan.sub_tasks == (SubTaskSpec("Organise the party"),)
