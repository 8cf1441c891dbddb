"""Reading an OpenAI chat-completions request: messages, tools, tool_choice, response_format, stop, memory."""

from __future__ import annotations

from typing import Any

import pytest

from assistant.chat.completions import StopScanner
from assistant.chat.completions_input import ANY_OBJECT, MemorySwitch, read_completion
from assistant.errors import ValidationFailed
from assistant.llm.base import ChatMessage, ToolCall, ToolSpec

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def read(**body: Any):  # noqa: ANN201
    body.setdefault("messages", [{"role": "user", "content": "hi"}])
    return read_completion(body, context_length=4096)


def refused(**body: Any) -> tuple[str, str]:
    with pytest.raises(ValidationFailed) as caught:
        read(**body)
    field = caught.value.details["fields"][0]
    return field["field"], field["error"]


def test_messages_of_every_role() -> None:
    completion = read(messages=[
        {"role": "developer", "content": "Be brief."},
        {"role": "system", "content": [{"type": "text", "text": "Answer in English."}]},
        {"role": "user", "content": [{"type": "text", "text": "Weather"}, {"type": "text", "text": "in Paris?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "Thanks"},
    ])
    assert completion.messages == (
        ChatMessage("system", "Be brief."),
        ChatMessage("system", "Answer in English."),
        ChatMessage("user", "Weather\nin Paris?"),
        ChatMessage("assistant", "", tool_calls=(ToolCall("call_1", "get_weather", {"city": "Paris"}),)),
        ChatMessage("tool", "sunny, 21 C", tool_call_id="call_1", name="get_weather"),
        ChatMessage("assistant", "Sunny."),
        ChatMessage("user", "Thanks"),
    )
    assert completion.last_user == 6
    assert completion.memory == MemorySwitch(True, True)


@pytest.mark.parametrize(("messages", "param", "words"), [
    ([], "messages", "at least one"),
    ([{"role": "function", "content": "x"}], "messages[0].role", "function"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]}],
     "messages[0].content[0].type", "image_url"),
    ([{"role": "user", "content": [{"type": "input_audio"}]}], "messages[0].content[0].type", "text only"),
    ([{"role": "user", "content": 5}], "messages[0].content", "string or an array"),
    ([{"role": "user"}], "messages[0].content", "string or an array"),
    ([{"role": "assistant"}], "messages[0].content", "content or tool_calls"),
    ([{"role": "tool", "tool_call_id": "nope", "content": "x"}], "messages[0].tool_call_id", "answers no tool call"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{oops"}}]}],
     "messages[0].tool_calls[0].function.arguments", "JSON object"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}]}],
     "messages[0].tool_calls[0].function.arguments", "JSON object"),
    (["hello"], "messages[0]", "object"),
])
def test_bad_messages_name_the_field(messages: list, param: str, words: str) -> None:
    field, error = refused(messages=messages)
    assert field == param
    assert words in error


def test_tools_become_tool_specs() -> None:
    completion = read(tools=[WEATHER, {"type": "function", "function": {"name": "now"}}],
                      tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert completion.tools == (
        ToolSpec("get_weather", "Weather of a city", WEATHER["function"]["parameters"]),
        ToolSpec("now", "", {"type": "object", "properties": {}}),
    )
    assert completion.tool_choice == "get_weather"
    for choice in ("auto", "none", "required"):
        assert read(tools=[WEATHER], tool_choice=choice).tool_choice == choice
    assert read(tools=[WEATHER]).tool_choice == "auto"


@pytest.mark.parametrize(("tools", "param"), [
    ({"type": "function"}, "tools"),
    ([{"type": "retrieval"}], "tools[0].type"),
    ([{"type": "function"}], "tools[0].function"),
    ([{"type": "function", "function": {"name": "bad name"}}], "tools[0].function.name"),
    ([{"type": "function", "function": {"name": "x" * 65}}], "tools[0].function.name"),
    ([{"type": "function", "function": {}}], "tools[0].function.name"),
    ([WEATHER, WEATHER], "tools[1].function.name"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 3}}}],
     "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}],
     "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "f", "parameters": "{}"}}], "tools[0].function.parameters"),
    ([{"type": "function", "function": {"name": "f", "description": 7}}], "tools[0].function.description"),
])
def test_malformed_tools_name_the_field(tools: Any, param: str) -> None:
    assert refused(tools=tools)[0] == param


@pytest.mark.parametrize(("choice", "param"), [
    ("sometimes", "tool_choice"),
    ({"type": "function", "function": {"name": "other"}}, "tool_choice.function.name"),
    ({"type": "tool"}, "tool_choice.type"),
    ({"type": "function"}, "tool_choice.function"),
])
def test_bad_tool_choice_names_the_field(choice: Any, param: str) -> None:
    assert refused(tools=[WEATHER], tool_choice=choice)[0] == param


def test_required_needs_tools() -> None:
    assert refused(tool_choice="required")[0] == "tool_choice"


def test_response_formats() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    assert read(response_format={"type": "text"}).json_schema is None
    assert read(response_format={"type": "json_object"}).json_schema == ANY_OBJECT
    assert read(response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": schema,
                                                                        "strict": True}}).json_schema == schema


@pytest.mark.parametrize(("fmt", "param"), [
    ({"type": "xml"}, "response_format.type"),
    ("json", "response_format"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "a"}}, "response_format.json_schema.schema"),
    ({"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "nope"}}},
     "response_format.json_schema.schema"),
])
def test_bad_response_format_names_the_field(fmt: Any, param: str) -> None:
    assert refused(response_format=fmt)[0] == param


def test_json_format_and_tools_are_not_combined() -> None:
    assert refused(tools=[WEATHER], response_format={"type": "json_object"})[0] == "response_format"


def test_scalars() -> None:
    completion = read(model="m", temperature=0.2, max_tokens=9, stream=True, stream_options={"include_usage": True},
                      user="u-1", stop=["END"], seed=3, memory={"retrieve": False})
    assert (completion.model, completion.temperature, completion.max_tokens, completion.stream) == ("m", 0.2, 9, True)
    assert (completion.include_usage, completion.user, completion.stop) == (True, "u-1", ("END",))
    assert completion.memory == MemorySwitch(retrieve=False, learn=True)
    assert read(max_tokens=5, max_completion_tokens=7).max_tokens == 7
    assert read(stop="x").stop == ("x",)


@pytest.mark.parametrize(("body", "param"), [
    ({"n": 2}, "n"),
    ({"max_tokens": 5000}, "max_tokens"),
    ({"max_completion_tokens": 5000}, "max_completion_tokens"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"stop": [""]}, "stop"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),
    ({"stream": True, "stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ({"memory": {"learn": "no"}}, "memory.learn"),
    ({"memory": {"forget": True}}, "memory.forget"),
    ({"memory": True}, "memory"),
    ({"logprobs": True}, "logprobs"),
])
def test_bad_scalars_name_the_field(body: dict, param: str) -> None:
    assert refused(**body)[0] == param


def test_stop_scanner_cuts_at_the_first_stop_across_pieces() -> None:
    scanner = StopScanner(("END", "\n\n"))
    out = [scanner.feed(p) for p in ("Hello", " wor", "ld E", "N", "D and more")]
    assert "".join(out) == "Hello world "
    assert scanner.stopped and scanner.flush() == ""
    scanner = StopScanner(("END",))
    assert scanner.feed("no E") + scanner.feed("nd here") + scanner.flush() == "no End here"
    assert StopScanner(()).feed("all of it") == "all of it"
