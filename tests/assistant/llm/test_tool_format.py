"""Tool calls written as JSON in the content (Qwen2.5-Coder's way)."""

from __future__ import annotations

from assistant.llm.tool_format import looks_like_tool_call, parse_tool_calls


def test_plain_json_object() -> None:
    (call,) = parse_tool_calls('{"name": "get_weather", "arguments": {"location": "Paris"}}')
    assert call.name == "get_weather" and call.arguments == {"location": "Paris"}


def test_fenced_tagged_listed_and_string_arguments() -> None:
    assert parse_tool_calls('```json\n{"name": "a", "arguments": {}}\n```')[0].name == "a"
    assert parse_tool_calls('<tool_call>\n{"name": "b", "arguments": {"x": 1}}\n</tool_call>')[0].arguments == {"x": 1}
    calls = parse_tool_calls('[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]')
    assert [c.name for c in calls] == ["a", "b"] and calls[0].id != calls[1].id
    assert parse_tool_calls('{"name": "c", "arguments": "{\\"q\\": \\"tea\\"}"}')[0].arguments == {"q": "tea"}
    two = parse_tool_calls('{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {"k": 2}}')
    assert [c.name for c in two] == ["a", "b"]


def test_answers_are_not_calls() -> None:
    for text in ("Paris is the capital of France.", '{"temperature": 21}', "", "{not json"):
        assert parse_tool_calls(text) == ()
    assert looks_like_tool_call('{"name": "x"') and not looks_like_tool_call("The name is Bob")


def test_tool_choice_resolves_to_a_mode_and_the_callable_tools() -> None:
    import pytest

    from assistant.errors import ValidationFailed
    from assistant.llm.base import GenerationOptions, ToolSpec
    from assistant.llm.tool_format import resolve_tool_choice

    a, b = ToolSpec("a", "A", {"type": "object"}), ToolSpec("b", "B", {"type": "object"})
    assert resolve_tool_choice(GenerationOptions(tools=(a, b))) == ("auto", (a, b))
    assert resolve_tool_choice(GenerationOptions(tools=(a, b), tool_choice="required")) == ("call", (a, b))
    assert resolve_tool_choice(GenerationOptions(tools=(a, b), tool_choice="b")) == ("call", (b,))
    assert resolve_tool_choice(GenerationOptions(tools=(a, b), tool_choice="none")) == ("answer", (a, b))
    assert resolve_tool_choice(GenerationOptions(tool_choice="required")) == ("answer", ())  # nothing to call
    with pytest.raises(ValidationFailed) as info:
        resolve_tool_choice(GenerationOptions(tools=(a, b), tool_choice="c"))
    assert info.value.details["fields"][0]["field"] == "tool_choice"


def test_call_schema_of_one_named_tool_admits_only_it() -> None:
    from assistant.llm.base import ToolSpec
    from assistant.llm.tool_format import call_schema

    spec = ToolSpec("get_time", "The time.", {"type": "object", "description": "args",
                                              "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"],
                                                                      "description": "a zone"}},
                                              "required": ["zone"]})
    schema = call_schema((spec,))
    assert "anyOf" not in schema
    assert schema["properties"]["name"] == {"const": "get_time"}
    assert schema["properties"]["arguments"] == {"type": "object", "required": ["zone"],
                                                 "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}}
    assert schema["required"] == ["name", "arguments"] and schema["additionalProperties"] is False
