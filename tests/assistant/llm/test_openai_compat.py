"""The OpenAI-compatible backend against a local server replaying /v1/chat/completions (SSE) and
/v1/models."""

from __future__ import annotations

import pytest

from assistant.errors import AssistantError, ServiceUnavailableError, UpstreamError
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, ToolCall, ToolSpec, collect
from assistant.llm.openai_compat import OpenAIChatModel

MESSAGES = [ChatMessage("system", "be brief"), ChatMessage("user", "Say hello")]
PATH = "/v1/chat/completions"


def chunk(delta: dict, finish_reason: str | None = None, model: str = "qwen-small") -> dict:
    return {
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1694268190,
        "model": model,
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


USAGE = {
    "id": "chatcmpl-123",
    "object": "chat.completion.chunk",
    "created": 1694268190,
    "model": "qwen-small",
    "choices": [],
    "usage": {
        "prompt_tokens": 17,
        "completion_tokens": 2,
        "total_tokens": 19,
        "prompt_tokens_details": {"cached_tokens": 12},
    },
}

STREAM = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"content": "Hello"}),
    chunk({"content": " there!"}),
    chunk({}, finish_reason="stop"),
    USAGE,
    "[DONE]",
]

MODELS = {
    "object": "list",
    "data": [
        {"id": "qwen-small", "object": "model", "created": 1686935002, "owned_by": "me"},
        {"id": "other", "object": "model", "created": 1686935002, "owned_by": "me"},
    ],
}


def test_stream_yields_deltas_and_usage(engine) -> None:
    engine.sse(PATH, STREAM)
    model = OpenAIChatModel("qwen-small", engine.base_url, api_key="sk-local")
    events = list(model.stream(MESSAGES, GenerationOptions(temperature=0.2, max_tokens=50)))
    assert [e.text for e in events if isinstance(e, Delta)] == ["Hello", " there!"]
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.model == "qwen-small"
    assert (finished.usage.prompt, finished.usage.completion, finished.usage.cached_prompt) == (17, 2, 12)
    assert finished.usage.total == 19
    assert finished.finish_reason == "stop"
    [request] = engine.requests
    assert request.path == PATH
    assert request.headers["Authorization"] == "Bearer sk-local"
    body = request.body
    assert (body["model"], body["temperature"], body["max_tokens"], body["stream"]) == ("qwen-small", 0.2, 50, True)
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Say hello"}]


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(engine, suffix: str) -> None:
    engine.sse(PATH, STREAM)
    result = collect(OpenAIChatModel("qwen-small", engine.base_url + suffix).stream(MESSAGES, GenerationOptions()))
    assert result.content == "Hello there!"
    assert engine.requests[0].path == PATH
    assert "Authorization" not in engine.requests[0].headers  # no key configured, none sent


def test_without_a_usage_chunk_completion_is_counted(engine) -> None:
    engine.sse(PATH, [c for c in STREAM if c is not USAGE])
    result = collect(OpenAIChatModel("qwen-small", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert (result.usage.prompt, result.usage.completion) == (0, 2)


def test_finish_reason_length(engine) -> None:
    engine.sse(PATH, [chunk({"content": "Hel"}), chunk({}, finish_reason="length"), "[DONE]"])
    result = collect(OpenAIChatModel("qwen-small", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert result.finish_reason == "length"


def test_should_stop_cancels(engine) -> None:
    engine.sse(PATH, STREAM)
    result = collect(OpenAIChatModel("qwen-small", engine.base_url).stream(
        MESSAGES, GenerationOptions(should_stop=lambda: True)))
    assert result.finish_reason == "cancelled"
    assert result.content == ""  # the first chunk carries no text and the stream stops after it


def test_error_chunk_is_an_upstream_error(engine) -> None:
    engine.sse(PATH, [chunk({"content": "Hel"}), {"error": {"message": "context overflow"}}])
    with pytest.raises(AssistantError) as info:
        collect(OpenAIChatModel("qwen-small", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert info.value.code == "UPSTREAM_ERROR"
    assert "context overflow" in info.value.message


def test_http_500_is_an_upstream_error(engine) -> None:
    engine.json("POST", PATH, {"error": {"message": "internal failure"}}, status=500)
    with pytest.raises(UpstreamError) as info:
        collect(OpenAIChatModel("qwen-small", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert "500" in info.value.message
    assert "internal failure" in info.value.message


def test_connection_refused_is_service_unavailable(closed_port_url: str) -> None:
    model = OpenAIChatModel("qwen-small", closed_port_url)
    with pytest.raises(ServiceUnavailableError):
        collect(model.stream(MESSAGES, GenerationOptions()))
    health = model.health()
    assert (health.healthy, health.latency_ms) == (False, None)
    with pytest.raises(ServiceUnavailableError):
        model.models()


def test_health_and_models(engine) -> None:
    engine.json("GET", "/v1/models", MODELS)
    model = OpenAIChatModel("qwen-small", engine.base_url, context_length=3000)
    health = model.health()
    assert health.healthy is True
    assert isinstance(health.latency_ms, int)
    assert health.latency_ms >= 0
    assert [(m.id, m.default, m.context_length) for m in model.models()] == [
        ("qwen-small", True, 3000),
        ("other", False, 3000),
    ]


def test_health_when_the_model_is_not_served(engine) -> None:
    engine.json("GET", "/v1/models", MODELS)
    health = OpenAIChatModel("missing", engine.base_url).health()
    assert health.healthy is False
    assert "missing" in health.detail
    assert isinstance(health.latency_ms, int)


def test_health_when_the_server_answers_500(engine) -> None:
    engine.json("GET", "/v1/models", {"error": "down"}, status=500)
    health = OpenAIChatModel("qwen-small", engine.base_url).health()
    assert health.healthy is False
    assert "500" in health.detail


WEATHER = ToolSpec("get_weather", "Weather for a place.",
                   {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]})


def test_native_tool_calls_are_assembled_from_fragments(engine) -> None:
    """OpenAI streams a call as fragments: id and name first, then pieces of the arguments string."""
    engine.sse(PATH, [
        chunk({"role": "assistant", "content": None,
               "tool_calls": [{"index": 0, "id": "call_abc", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"locat'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ion": "Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_def", "type": "function",
                               "function": {"name": "get_weather", "arguments": '{"location": oops'}}]}),
        chunk({}, finish_reason="tool_calls"),
        "[DONE]",
    ])
    result = collect(OpenAIChatModel("qwen-small", engine.base_url).stream(
        MESSAGES, GenerationOptions(tools=(WEATHER,))))
    assert result.finish_reason == "tool_calls"
    assert result.tool_calls[0] == ToolCall("call_abc", "get_weather", {"location": "Paris"})
    assert result.tool_calls[1].arguments == {"_unparsed": '{"location": oops'}
    body = engine.requests[0].body
    assert body["tools"] == [WEATHER.openai()]


def test_tool_messages_in_the_wire_format(engine) -> None:
    engine.sse(PATH, STREAM)
    call = ToolCall("call_abc", "get_weather", {"location": "Paris"})
    history = [*MESSAGES, ChatMessage("assistant", "", tool_calls=(call,)),
               ChatMessage("tool", '{"result": "sunny"}', tool_call_id="call_abc", name="get_weather")]
    collect(OpenAIChatModel("qwen-small", engine.base_url).stream(history, GenerationOptions(tools=(WEATHER,))))
    sent = engine.requests[0].body["messages"]
    assert sent[2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'}}]}
    assert sent[3] == {"role": "tool", "content": '{"result": "sunny"}', "tool_call_id": "call_abc"}


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_json_schema_is_sent_as_response_format(engine) -> None:
    engine.sse(PATH, [chunk({"role": "assistant", "content": '{"city": "Paris"}'}, finish_reason="stop"), "[DONE]"])
    model = OpenAIChatModel("qwen-small", engine.base_url)
    result = collect(model.stream(MESSAGES, GenerationOptions(json_schema=SCHEMA)))
    assert result.content == '{"city": "Paris"}'
    assert engine.requests[0].body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "reply", "schema": SCHEMA}}
    engine.sse(PATH, STREAM)
    collect(model.stream(MESSAGES, GenerationOptions()))
    assert "response_format" not in engine.requests[1].body


TIME = ToolSpec("get_time", "The time in a zone.",
                {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]})


def test_tool_choice_is_sent_natively(engine) -> None:
    model = OpenAIChatModel("qwen-small", engine.base_url)
    sent = []
    for choice in ("auto", "required", "none", "get_time"):
        engine.sse(PATH, STREAM)
        collect(model.stream(MESSAGES, GenerationOptions(tools=(WEATHER, TIME), tool_choice=choice)))
        body = engine.requests[-1].body
        assert [t["function"]["name"] for t in body["tools"]] == ["get_weather", "get_time"]
        sent.append(body["tool_choice"])
    assert sent == ["auto", "required", "none", {"type": "function", "function": {"name": "get_time"}}]
    engine.sse(PATH, STREAM)
    collect(model.stream(MESSAGES, GenerationOptions(tool_choice="required")))  # no tools: nothing to choose
    assert "tool_choice" not in engine.requests[-1].body and "tools" not in engine.requests[-1].body


def test_unknown_tool_choice_is_a_validation_error(engine) -> None:
    from assistant.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as info:
        collect(OpenAIChatModel("qwen-small", engine.base_url).stream(
            MESSAGES, GenerationOptions(tools=(WEATHER,), tool_choice="get_time")))
    assert info.value.details["fields"][0]["field"] == "tool_choice"
    assert engine.requests == []
