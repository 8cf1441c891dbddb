"""Any OpenAI-compatible server: ``/v1/chat/completions`` (SSE stream) and ``/v1/models``.

llama.cpp's server, ``python -m llama_cpp.server``, vLLM and LM Studio speak this. A request with
``json_schema`` sends it as ``response_format`` (``{"type": "json_schema", ...}``), and
``tool_choice`` goes as OpenAI's own (``"auto"``, ``"required"``, ``"none"`` or
``{"type": "function", "function": {"name": ...}}``).

``GenerationOptions.adapter`` (a GGUF LoRA per request) is ignored: the OpenAI API has no such field
(llama.cpp's server loads adapters at start, ``--lora``, and scales them through its own ``/lora-adapters``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from assistant.config import InferenceSettings
from assistant.errors import AssistantError, UpstreamError
from assistant.llm.base import (
    ChatMessage,
    Delta,
    Finished,
    GenerationOptions,
    Health,
    ModelInfo,
    StreamEvent,
    TokenUsage,
    ToolCall,
    ToolCalls,
)
from assistant.llm.http import EngineClient
from assistant.llm.tool_format import parse_arguments, resolve_tool_choice

DEFAULT_URL = "http://127.0.0.1:8000/v1"


def wire_messages(messages: list[ChatMessage]) -> list[dict]:
    """ChatMessages in the OpenAI wire format (tool-call arguments as JSON strings)."""
    out = []
    for m in messages:
        item: dict = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["content"] = m.content or None
            item["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
                for c in m.tool_calls
            ]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        out.append(item)
    return out


def _assemble_calls(parts: dict[int, dict]) -> tuple[ToolCall, ...]:
    """Streamed tool-call fragments (by index) as whole calls."""
    return tuple(ToolCall(parts[i]["id"] or f"call_{i}", parts[i]["name"], parse_arguments(parts[i]["arguments"]))
                 for i in sorted(parts))


class OpenAIChatModel:
    id = "openai"

    def __init__(self, model: str, base_url: str = DEFAULT_URL, *, api_key: str | None = None,
                 timeout_secs: float = 120.0, context_length: int = 4096):
        base = base_url.rstrip("/")
        if not base.endswith("/v1"):
            base += "/v1"
        self.model = model
        self.context_length = context_length
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = EngineClient("openai-compatible server", base, timeout_secs=timeout_secs, headers=headers)

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        model = options.model or self.model
        payload = {
            "model": model,
            "messages": wire_messages(messages),
            "temperature": options.temperature,
            "max_tokens": options.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        resolve_tool_choice(options)  # an unknown tool name is a ValidationFailed
        if options.tools:
            payload["tools"] = [t.openai() for t in options.tools]
            payload["tool_choice"] = (options.tool_choice if options.tool_choice in ("auto", "required", "none")
                                      else {"type": "function", "function": {"name": options.tool_choice}})
        if options.json_schema:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "reply", "schema": options.json_schema}}
        call_parts: dict[int, dict] = {}
        completion = 0
        usage: TokenUsage | None = None
        finish = "stop"
        answered_by = model
        with self.client.stream_lines("chat/completions", payload) as lines:
            for line in lines:
                if not line.startswith("data:"):
                    continue
                body = line[5:].strip()
                if body == "[DONE]":
                    break
                data = json.loads(body)
                if "error" in data:
                    raise UpstreamError(f"openai-compatible server: {data['error']}")
                answered_by = data.get("model") or answered_by
                if data.get("usage"):
                    u = data["usage"]
                    cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0
                    usage = TokenUsage(u.get("prompt_tokens", 0), u.get("completion_tokens", 0), cached)
                for choice in data.get("choices") or []:
                    delta = choice.get("delta") or {}
                    text = delta.get("content")
                    if text:
                        completion += 1
                        yield Delta(text)
                    for fragment in delta.get("tool_calls") or []:
                        part = call_parts.setdefault(fragment.get("index", len(call_parts)),
                                                     {"id": None, "name": "", "arguments": ""})
                        function = fragment.get("function") or {}
                        part["id"] = fragment.get("id") or part["id"]
                        part["name"] += function.get("name") or ""
                        part["arguments"] += function.get("arguments") or ""
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
                if options.should_stop is not None and options.should_stop():
                    finish = "cancelled"
                    break
        if call_parts:
            yield ToolCalls(_assemble_calls(call_parts))
        yield Finished(answered_by, usage or TokenUsage(0, completion), finish)

    def health(self) -> Health:
        try:
            data, latency = self.client.get_json("models")
        except AssistantError as exc:
            return Health(False, self.model, None, exc.message)
        ids = {m.get("id") for m in data.get("data", [])}
        if ids and self.model not in ids:
            return Health(False, self.model, latency, f"model {self.model!r} is not served; served: {sorted(ids)}")
        return Health(True, self.model, latency)

    def models(self) -> list[ModelInfo]:
        data, _ = self.client.get_json("models")
        return [
            ModelInfo(id=m["id"], name=m["id"], context_length=self.context_length, default=m["id"] == self.model)
            for m in data.get("data", [])
        ]


def create(settings: InferenceSettings, data_dir: Path) -> OpenAIChatModel:
    return OpenAIChatModel(
        settings.model,
        settings.base_url or DEFAULT_URL,
        api_key=settings.api_key,
        timeout_secs=settings.request_timeout_secs,
        context_length=settings.context_length,
    )
