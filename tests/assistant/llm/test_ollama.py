"""The Ollama backend against a local server that replays Ollama's /api/chat and /api/tags."""

from __future__ import annotations

import pytest

from assistant.errors import AssistantError, ServiceUnavailableError, UpstreamError
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, ToolCall, ToolSpec, collect
from assistant.llm.ollama import OllamaChatModel

MESSAGES = [ChatMessage("system", "be brief"), ChatMessage("user", "Why is the sky blue?")]


def chunk(text: str) -> dict:
    return {
        "model": "qwen2.5:0.5b",
        "created_at": "2024-08-04T08:52:19.385406455-07:00",
        "message": {"role": "assistant", "content": text},
        "done": False,
    }


FINAL = {
    "model": "qwen2.5:0.5b",
    "created_at": "2024-08-04T19:22:45.499127Z",
    "message": {"role": "assistant", "content": ""},
    "done": True,
    "done_reason": "stop",
    "total_duration": 4883583458,
    "load_duration": 1334875,
    "prompt_eval_count": 26,
    "prompt_eval_duration": 342546000,
    "eval_count": 3,
    "eval_duration": 4535599000,
}

TAGS = {
    "models": [
        {
            "name": "qwen2.5:0.5b",
            "model": "qwen2.5:0.5b",
            "modified_at": "2024-10-01T10:00:00.000000Z",
            "size": 397821319,
            "digest": "a8b0c5157701",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "qwen2",
                "families": ["qwen2"],
                "parameter_size": "494.03M",
                "quantization_level": "Q4_K_M",
            },
        },
        {"name": "llama3.2:latest", "model": "llama3.2:latest", "details": {"parameter_size": "3.2B"}},
    ]
}


def test_stream_yields_deltas_and_usage(engine) -> None:
    engine.ndjson("/api/chat", [chunk("The"), chunk(" sky"), chunk(" scatters"), FINAL])
    model = OllamaChatModel("qwen2.5:0.5b", engine.base_url, context_length=2048)
    events = list(model.stream(MESSAGES, GenerationOptions(temperature=0.3, max_tokens=64)))
    assert [e.text for e in events if isinstance(e, Delta)] == ["The", " sky", " scatters"]
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.model == "qwen2.5:0.5b"
    assert (finished.usage.prompt, finished.usage.completion, finished.usage.total) == (26, 3, 29)
    assert finished.finish_reason == "stop"
    [request] = engine.requests
    assert (request.method, request.path) == ("POST", "/api/chat")
    assert request.body["model"] == "qwen2.5:0.5b"
    assert request.body["stream"] is True
    assert request.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Why is the sky blue?"},
    ]
    assert request.body["options"] == {"temperature": 0.3, "num_predict": 64, "num_ctx": 2048}


def test_model_option_overrides_the_default(engine) -> None:
    engine.ndjson("/api/chat", [chunk("hi"), {**FINAL, "model": "llama3.2:latest"}])
    result = collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(
        MESSAGES, GenerationOptions(model="llama3.2:latest")))
    assert engine.requests[0].body["model"] == "llama3.2:latest"
    assert result.model == "llama3.2:latest"
    assert result.content == "hi"


def test_done_reason_length(engine) -> None:
    engine.ndjson("/api/chat", [chunk("a"), {**FINAL, "done_reason": "length", "eval_count": 1}])
    result = collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert result.finish_reason == "length"


def test_should_stop_cancels_the_stream(engine) -> None:
    engine.ndjson("/api/chat", [chunk("a"), chunk(" b"), chunk(" c"), FINAL])
    result = collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(
        MESSAGES, GenerationOptions(should_stop=lambda: True)))
    assert result.content == "a"
    assert result.finish_reason == "cancelled"


def test_error_line_is_an_upstream_error(engine) -> None:
    engine.ndjson("/api/chat", [chunk("a"), {"error": "model runner has unexpectedly stopped"}])
    with pytest.raises(AssistantError) as info:
        collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert info.value.code == "UPSTREAM_ERROR"
    assert "unexpectedly stopped" in info.value.message


def test_http_500_is_an_upstream_error(engine) -> None:
    engine.json("POST", "/api/chat", {"error": "out of memory"}, status=500)
    with pytest.raises(UpstreamError) as info:
        collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(MESSAGES, GenerationOptions()))
    assert "500" in info.value.message
    assert "out of memory" in info.value.message
    assert info.value.details == {"upstream_status": 500}


def test_connection_refused_is_service_unavailable(closed_port_url: str) -> None:
    model = OllamaChatModel("qwen2.5:0.5b", closed_port_url)
    with pytest.raises(ServiceUnavailableError, match="unreachable"):
        collect(model.stream(MESSAGES, GenerationOptions()))
    health = model.health()
    assert health.healthy is False
    assert health.latency_ms is None
    assert "unreachable" in health.detail


def test_timeout_is_service_unavailable(engine) -> None:
    engine.slow("GET", "/api/tags", 1.0)
    model = OllamaChatModel("qwen2.5:0.5b", engine.base_url, timeout_secs=0.1)
    health = model.health()
    assert health.healthy is False
    assert "timed out" in health.detail


def test_health_with_latency(engine) -> None:
    engine.json("GET", "/api/tags", TAGS)
    health = OllamaChatModel("qwen2.5:0.5b", engine.base_url).health()
    assert health.healthy is True
    assert health.model == "qwen2.5:0.5b"
    assert isinstance(health.latency_ms, int)
    assert health.latency_ms >= 0


def test_health_accepts_a_name_without_tag(engine) -> None:
    engine.json("GET", "/api/tags", TAGS)
    assert OllamaChatModel("llama3.2", engine.base_url).health().healthy is True


def test_health_when_the_model_is_not_pulled(engine) -> None:
    engine.json("GET", "/api/tags", TAGS)
    health = OllamaChatModel("mistral", engine.base_url).health()
    assert health.healthy is False
    assert "not pulled" in health.detail
    assert isinstance(health.latency_ms, int)


def test_models(engine) -> None:
    engine.json("GET", "/api/tags", TAGS)
    models = OllamaChatModel("qwen2.5:0.5b", engine.base_url, context_length=4096).models()
    assert [(m.id, m.parameters, m.default, m.context_length) for m in models] == [
        ("qwen2.5:0.5b", "494.03M", True, 4096),
        ("llama3.2:latest", "3.2B", False, 4096),
    ]


def test_models_http_error_is_upstream(engine) -> None:
    engine.json("GET", "/api/tags", {"error": "boom"}, status=500)
    with pytest.raises(UpstreamError):
        OllamaChatModel("qwen2.5:0.5b", engine.base_url).models()


WEATHER = ToolSpec("get_weather", "Weather for a place.",
                   {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]})


def test_native_tool_calls(engine) -> None:
    """Ollama sends calls whole, arguments as an object, in a message before the final line."""
    engine.ndjson("/api/chat", [
        {"model": "qwen2.5:0.5b", "created_at": "2024-08-04T08:52:19Z", "done": False,
         "message": {"role": "assistant", "content": "",
                     "tool_calls": [{"function": {"name": "get_weather", "arguments": {"location": "Toronto"}}}]}},
        {**FINAL, "eval_count": 12},
    ])
    result = collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(
        MESSAGES, GenerationOptions(tools=(WEATHER,))))
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("get_weather", {"location": "Toronto"})]
    assert engine.requests[0].body["tools"] == [WEATHER.openai()]


def test_tool_messages_in_ollamas_format(engine) -> None:
    engine.ndjson("/api/chat", [chunk("ok"), FINAL])
    call = ToolCall("call_0", "get_weather", {"location": "Toronto"})
    history = [*MESSAGES, ChatMessage("assistant", "", tool_calls=(call,)),
               ChatMessage("tool", '{"result": "11 °C"}', tool_call_id="call_0", name="get_weather")]
    collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(history, GenerationOptions()))
    sent = engine.requests[0].body["messages"]
    assert sent[2]["tool_calls"] == [{"function": {"name": "get_weather", "arguments": {"location": "Toronto"}}}]
    assert sent[3] == {"role": "tool", "content": '{"result": "11 °C"}', "tool_name": "get_weather"}
    assert "tools" not in engine.requests[0].body


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_json_schema_is_sent_as_format(engine) -> None:
    engine.ndjson("/api/chat", [chunk('{"city": '), chunk('"Paris"}'), FINAL])
    model = OllamaChatModel("qwen2.5:0.5b", engine.base_url)
    result = collect(model.stream(MESSAGES, GenerationOptions(json_schema=SCHEMA)))
    assert result.content == '{"city": "Paris"}'
    assert engine.requests[0].body["format"] == SCHEMA
    collect(model.stream(MESSAGES, GenerationOptions()))
    assert "format" not in engine.requests[1].body


TIME = ToolSpec("get_time", "The time in a zone.",
                {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]})


def test_tool_choice_without_a_native_field(engine) -> None:
    """Ollama has no tool_choice: none sends no tools, a name only that tool, required all of them."""
    model = OllamaChatModel("qwen2.5:0.5b", engine.base_url)
    sent = []
    for choice in ("auto", "required", "none", "get_time"):
        engine.ndjson("/api/chat", [chunk("ok"), FINAL])
        collect(model.stream(MESSAGES, GenerationOptions(tools=(WEATHER, TIME), tool_choice=choice)))
        body = engine.requests[-1].body
        assert "tool_choice" not in body
        sent.append([t["function"]["name"] for t in body.get("tools", [])])
    assert sent == [["get_weather", "get_time"], ["get_weather", "get_time"], [], ["get_time"]]


def test_unknown_tool_choice_is_a_validation_error(engine) -> None:
    from assistant.errors import ValidationFailed

    with pytest.raises(ValidationFailed) as info:
        collect(OllamaChatModel("qwen2.5:0.5b", engine.base_url).stream(
            MESSAGES, GenerationOptions(tools=(WEATHER,), tool_choice="get_time")))
    assert info.value.details["fields"][0]["field"] == "tool_choice"
    assert engine.requests == []  # refused before anything is sent
