"""The real default model (Qwen2.5-Coder-0.5B, llama.cpp) under each tool_choice and under
constrained "auto" decoding: a required call is always a call of an offered tool with arguments of
its schema, a named tool is the one called, "none" answers, and the call threshold decides."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.llm.base import ChatMessage, GenerationOptions, ToolSpec, collect
from assistant.llm.catalog import DEFAULT_MODEL
from assistant.llm.llama_cpp import LlamaCppChatModel

pytestmark = pytest.mark.integration

WEATHER = ToolSpec("get_weather", "The current weather in a city.",
                   {"type": "object", "properties": {"location": {"type": "string"}},
                    "required": ["location"], "additionalProperties": False})
TIME = ToolSpec("get_time", "The current time in a time zone.",
                {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]}},
                 "required": ["zone"], "additionalProperties": False})
TOOLS = (WEATHER, TIME)
CHAT = [ChatMessage("user", "Hi! Who are you?")]
ASK = [ChatMessage("user", "What's the weather like in Berlin?")]


@pytest.fixture(scope="module")
def engine(default_model_path: Path) -> LlamaCppChatModel:
    return LlamaCppChatModel(DEFAULT_MODEL, default_model_path.parent, model_path=default_model_path,
                             threads=2, context_length=2048)


def run(engine: LlamaCppChatModel, messages: list[ChatMessage], choice: str = "auto"):
    return collect(engine.stream(messages, GenerationOptions(temperature=0.0, max_tokens=48, tools=TOOLS,
                                                             tool_choice=choice)))


def schema_valid(call) -> bool:
    if call.name == "get_weather":
        return set(call.arguments) == {"location"} and isinstance(call.arguments["location"], str)
    return call.name == "get_time" and call.arguments in ({"zone": "UTC"}, {"zone": "CET"}, {"zone": "PST"})


def test_required_calls_an_offered_tool_even_for_small_talk(engine: LlamaCppChatModel) -> None:
    for messages in (CHAT, ASK):
        result = run(engine, messages, "required")
        assert len(result.tool_calls) == 1 and result.finish_reason == "tool_calls", result
        assert schema_valid(result.tool_calls[0]), result.tool_calls
        assert result.content == ""


def test_a_named_tool_is_the_one_called(engine: LlamaCppChatModel) -> None:
    result = run(engine, ASK, "get_time")
    assert [c.name for c in result.tool_calls] == ["get_time"] and schema_valid(result.tool_calls[0])


def test_none_answers_in_text(engine: LlamaCppChatModel) -> None:
    result = run(engine, ASK, "none")
    assert result.tool_calls == () and result.content.strip()
    assert not result.content.lstrip().startswith(("{", "[", "<tool_call>", "```"))


def test_the_call_threshold_decides_auto(engine: LlamaCppChatModel) -> None:
    try:
        engine.call_threshold = 0.0  # always a call, even for small talk
        result = run(engine, CHAT)
        assert len(result.tool_calls) == 1 and schema_valid(result.tool_calls[0])
        assert engine.last_call_probability is not None and 0.0 <= engine.last_call_probability <= 1.0
        engine.call_threshold = 1.0  # never a call, even when asked for the weather
        result = run(engine, ASK)
        assert result.tool_calls == () and result.content.strip()
        engine.call_threshold = 0.5  # the model's own choice: the weather question is a call
        result = run(engine, ASK)
        assert engine.last_call_probability > 0.5, engine.last_call_probability
        assert [c.name for c in result.tool_calls] == ["get_weather"]
        assert "berlin" in result.tool_calls[0].arguments["location"].lower()
    finally:
        engine.call_threshold = None
