"""The OpenAI-compatible endpoint of a live server with the real default model (Qwen2.5-Coder-0.5B on
llama.cpp) and the real MiniLM embeddings, driven by the official ``openai`` client: an answer whole
and streamed, a forced tool call returned as ``tool_calls`` with JSON arguments, JSON-schema and
JSON-object replies that parse, and a memory learned in one request reaching the next one.

(Not to be confused with tests/integration/test_openai_server.py: that one tests our *client* of an
OpenAI-compatible backend.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import openai
import pytest

from tests.integration.support import serve

pytestmark = pytest.mark.integration

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"],
                   "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The current time in a time zone.",
    "parameters": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET", "PST"]}},
                   "required": ["zone"], "additionalProperties": False}}}


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory, default_model_path: Path) -> Iterator[openai.OpenAI]:
    live, key = serve(tmp_path_factory.mktemp("openai"),
                      inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0,
                                 "max_tokens": 48},
                      security={"rate_limit_enabled": False})
    with live:
        yield openai.OpenAI(base_url=f"{live.base_url}/v1", api_key=key, max_retries=0, timeout=300)


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_models_name_the_default_model(sdk: openai.OpenAI) -> None:
    ids = [m.id for m in sdk.models.list().data]
    assert ids and all(sdk.models.retrieve(i).id == i for i in ids)


def test_answer_whole_and_streamed(sdk: openai.OpenAI) -> None:
    model = sdk.models.list().data[0].id
    completion = sdk.chat.completions.create(model=model, messages=ask("Name one colour of the rainbow."),
                                             max_tokens=24, temperature=0, extra_body={"memory": {"learn": False}})
    assert completion.choices[0].message.content.strip()
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.usage.prompt_tokens > 0 and completion.usage.completion_tokens > 0
    stream = sdk.chat.completions.create(model=model, messages=ask("Count from one to three in words."),
                                         max_tokens=24, temperature=0, stream=True,
                                         stream_options={"include_usage": True},
                                         extra_body={"memory": {"learn": False}})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].usage.completion_tokens > 0


def test_a_forced_tool_call_is_returned(sdk: openai.OpenAI) -> None:
    completion = sdk.chat.completions.create(
        model=sdk.models.list().data[0].id, messages=ask("What's the weather like in Berlin?"),
        tools=[WEATHER, TIME], tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=48)
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather"
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])
    # The same, streamed: the SDK accumulates the call from the chunks.
    with sdk.chat.completions.stream(model=completion.model, messages=ask("Time in UTC please"), tools=[WEATHER, TIME],
                                     tool_choice="required", max_tokens=48) as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name in ("get_weather", "get_time")
    jsonschema.validate(json.loads(call.function.arguments),
                        (WEATHER if call.function.name == "get_weather" else TIME)["function"]["parameters"])


def test_json_schema_and_json_object_replies_parse(sdk: openai.OpenAI) -> None:
    schema = {"type": "object", "properties": {"capital": {"type": "string", "maxLength": 20},
                                               "is_european": {"type": "boolean"}},
              "required": ["capital", "is_european"], "additionalProperties": False}
    completion = sdk.chat.completions.create(
        model=sdk.models.list().data[0].id, messages=ask("What is the capital of France?"), max_tokens=48,
        response_format={"type": "json_schema", "json_schema": {"name": "capital", "schema": schema, "strict": True}},
        extra_body={"memory": {"learn": False}})
    reply = json.loads(completion.choices[0].message.content)
    jsonschema.validate(reply, schema)
    completion = sdk.chat.completions.create(
        model=sdk.models.list().data[0].id, max_tokens=48, response_format={"type": "json_object"},
        messages=ask('Reply with a JSON object {"answer": ...}: what is 2 + 2?'),
        extra_body={"memory": {"learn": False}})
    if completion.choices[0].finish_reason == "stop":  # a cut-off object (length) cannot be whole
        assert isinstance(json.loads(completion.choices[0].message.content), dict)


def test_a_memory_learned_reaches_the_next_request(sdk: openai.OpenAI) -> None:
    model = sdk.models.list().data[0].id
    sdk.chat.completions.create(model=model, messages=ask("Remember this: my favourite colour is teal."),
                                max_tokens=16)
    completion = sdk.chat.completions.create(model=model, messages=ask("What is my favourite colour?"),
                                             max_tokens=16, extra_body={"memory": {"learn": False}})
    used = completion.model_extra["assistant_memories"]
    assert any("teal" in m["content"] for m in used), used
    off = sdk.chat.completions.create(model=model, messages=ask("What is my favourite colour?"), max_tokens=8,
                                      extra_body={"memory": {"retrieve": False, "learn": False}})
    assert off.model_extra["assistant_memories"] == []
