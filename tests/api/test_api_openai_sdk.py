"""The official ``openai`` Python client against /v1/chat/completions and /v1/models (scripted model):
streaming and not, with and without tools, the memory extension, and its errors as the SDK's exceptions."""

from __future__ import annotations

import json

import openai
import pytest

from assistant.errors import ServiceUnavailableError
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import Services

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture
def sdk(client, api_key: str) -> openai.OpenAI:
    """The SDK speaking to the app through the TestClient (an httpx.Client), without retries."""
    return openai.OpenAI(base_url="http://testserver/v1", api_key=api_key, http_client=client, max_retries=0)


def ask(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_models(sdk: openai.OpenAI) -> None:
    models = sdk.models.list()
    assert [m.id for m in models.data] == ["scripted"]
    assert sdk.models.retrieve("scripted").id == "scripted"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.models.retrieve("gpt-4o")
    assert caught.value.code == "model_not_found"


def test_completion(sdk: openai.OpenAI, model: ScriptedChatModel) -> None:
    model.enqueue("Paris is the capital of France.")
    completion = sdk.chat.completions.create(model="scripted", messages=ask("Capital of France?"), max_tokens=50,
                                             temperature=0.2, user="u1")
    choice = completion.choices[0]
    assert choice.message.content == "Paris is the capital of France."
    assert choice.finish_reason == "stop"
    assert completion.usage.completion_tokens == 6
    assert completion.model == "scripted"


def test_streaming(sdk: openai.OpenAI, model: ScriptedChatModel) -> None:
    model.enqueue("One two three")
    stream = sdk.chat.completions.create(model="scripted", messages=ask("Count"), stream=True,
                                         stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "One two three"
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 3


def test_tools(sdk: openai.OpenAI, model: ScriptedChatModel) -> None:
    model.enqueue(tool_calls=[("get_weather", {"city": "Paris"})])
    completion = sdk.chat.completions.create(
        model="scripted", messages=ask("Weather in Paris?"), tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    # the client runs the tool and sends its result back
    model.enqueue("It is sunny in Paris.")
    follow_up = sdk.chat.completions.create(model="scripted", tools=[WEATHER], messages=[
        *ask("Weather in Paris?"), choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}])
    assert follow_up.choices[0].message.content == "It is sunny in Paris."


def test_streamed_tool_calls_accumulate(sdk: openai.OpenAI, model: ScriptedChatModel) -> None:
    model.enqueue(tool_calls=[("get_weather", {"city": "Rome"})])
    with sdk.chat.completions.stream(model="scripted", messages=ask("Weather in Rome?"), tools=[WEATHER],
                                     tool_choice="required") as stream:
        final = stream.get_final_completion()
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Rome"}
    assert final.choices[0].finish_reason == "tool_calls"


def test_json_schema_response_parses(sdk: openai.OpenAI, model: ScriptedChatModel) -> None:
    model.enqueue('{"city": "Paris", "country": "France"}')
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
              "required": ["city", "country"], "additionalProperties": False}
    completion = sdk.chat.completions.create(
        model="scripted", messages=ask("Where is the Louvre?"),
        response_format={"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}})
    assert json.loads(completion.choices[0].message.content) == {"city": "Paris", "country": "France"}


def test_memory_extension_and_response_extension(sdk: openai.OpenAI, services: Services) -> None:
    sdk.chat.completions.create(model="scripted", messages=ask("My dog is called Biscuit"))
    completion = sdk.chat.completions.create(model="scripted", messages=ask("What is my dog called, Biscuit?"),
                                             extra_body={"memory": {"learn": False}})
    used = completion.model_extra["assistant_memories"]
    assert [m["content"] for m in used] == ["My dog is called Biscuit"]
    owner = str(services.keys.owner_user_id())
    assert [m.content for m in services.memory.list(owner)] == ["My dog is called Biscuit"]
    off = sdk.chat.completions.create(model="scripted", messages=ask("What is my dog called, Biscuit?"),
                                      extra_body={"memory": {"retrieve": False, "learn": False}})
    assert off.model_extra["assistant_memories"] == []


def test_errors_are_the_sdks_exceptions(sdk: openai.OpenAI, client, read_only_auth, model: ScriptedChatModel) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="scripted", messages=ask("hi"), n=2)
    assert caught.value.param == "n"
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="scripted", messages=ask("hi"),
                                    tools=[{"type": "function", "function": {"name": "no spaces allowed"}}])
    assert caught.value.param == "tools[0].function.name"
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="gpt-4o", messages=ask("hi"))
    assert caught.value.code == "model_not_found"
    with pytest.raises(openai.AuthenticationError):
        sdk.with_options(api_key="wrong").models.list()
    reader = openai.OpenAI(base_url="http://testserver/v1", api_key=read_only_auth["Authorization"][7:],
                           http_client=client, max_retries=0)
    assert reader.models.list().data  # a read-only key lists models
    with pytest.raises(openai.PermissionDeniedError):
        reader.chat.completions.create(model="scripted", messages=ask("hi"))
    model.enqueue(error=ServiceUnavailableError("the model is not installed"))
    with pytest.raises(openai.InternalServerError) as caught:
        sdk.chat.completions.create(model="scripted", messages=ask("hi"))
    assert caught.value.status_code == 503
