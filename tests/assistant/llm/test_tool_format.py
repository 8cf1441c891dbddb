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
