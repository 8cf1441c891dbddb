"""Ollama's HTTP API: ``/api/chat`` (NDJSON stream) and ``/api/tags``.

A request with ``json_schema`` sends it as ``format`` (Ollama's structured outputs).

Ollama has no ``tool_choice``: ``none`` sends no tools (the model can only answer), a tool's name
sends only that tool, ``required`` sends the tools as ``auto`` does — Ollama may still answer
instead of calling, and the caller sees an answer.

``GenerationOptions.adapter`` (a GGUF LoRA per request) is ignored: Ollama binds adapters to a model
in its Modelfile (``ADAPTER``), not per request.
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
from assistant.llm.tool_format import ANSWER, parse_arguments, resolve_tool_choice

DEFAULT_URL = "http://127.0.0.1:11434"


def wire_messages(messages: list[ChatMessage]) -> list[dict]:
    """ChatMessages as Ollama's /api/chat wants them (tool-call arguments as objects)."""
    out = []
    for m in messages:
        item: dict = {"role": m.role, "content": m.content}
        if m.tool_calls:
            item["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
        if m.role == "tool" and m.name:
            item["tool_name"] = m.name
        out.append(item)
    return out


class OllamaChatModel:
    id = "ollama"

    def __init__(self, model: str, base_url: str = DEFAULT_URL, *, timeout_secs: float = 120.0,
                 context_length: int = 4096):
        self.model = model
        self.context_length = context_length
        self.client = EngineClient("ollama", base_url, timeout_secs=timeout_secs)

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        model = options.model or self.model
        payload = {
            "model": model,
            "messages": wire_messages(messages),
            "stream": True,
            "options": {"temperature": options.temperature, "num_predict": options.max_tokens,
                        "num_ctx": self.context_length},
        }
        mode, offered = resolve_tool_choice(options)
        if mode != ANSWER:
            payload["tools"] = [t.openai() for t in offered]
        if options.json_schema:
            payload["format"] = options.json_schema  # structured outputs: the reply is JSON of this schema
        completion = 0
        calls: list[ToolCall] = []
        with self.client.stream_lines("/api/chat", payload) as lines:
            for line in lines:
                if not line.strip():
                    continue
                data = json.loads(line)
                if "error" in data:
                    raise UpstreamError(f"ollama: {data['error']}")
                message = data.get("message") or {}
                text = message.get("content")
                if text:
                    completion += 1
                    yield Delta(text)
                for call in message.get("tool_calls") or []:
                    function = call.get("function") or {}
                    calls.append(ToolCall(call.get("id") or f"call_{len(calls)}", function.get("name", ""),
                                          parse_arguments(function.get("arguments"))))
                if data.get("done"):
                    if calls:
                        yield ToolCalls(tuple(calls))
                    usage = TokenUsage(data.get("prompt_eval_count", 0), data.get("eval_count", completion))
                    yield Finished(data.get("model", model), usage, data.get("done_reason", "stop"))
                    return
                if options.should_stop is not None and options.should_stop():
                    yield Finished(model, TokenUsage(0, completion), "cancelled")
                    return
        yield Finished(model, TokenUsage(0, completion), "stop")

    def _tags(self) -> tuple[list[dict], int]:
        data, latency = self.client.get_json("/api/tags")
        return data.get("models", []), latency

    def health(self) -> Health:
        try:
            tags, latency = self._tags()
        except AssistantError as exc:
            return Health(False, self.model, None, exc.message)
        names = {t.get("name", "") for t in tags} | {t.get("name", "").split(":")[0] for t in tags}
        if self.model not in names:
            return Health(False, self.model, latency, f"model {self.model!r} is not pulled in ollama")
        return Health(True, self.model, latency)

    def models(self) -> list[ModelInfo]:
        tags, _ = self._tags()
        return [
            ModelInfo(
                id=t["name"],
                name=t.get("model", t["name"]),
                parameters=t.get("details", {}).get("parameter_size", "unknown"),
                context_length=self.context_length,
                default=t["name"] == self.model or t["name"].split(":")[0] == self.model,
            )
            for t in tags
        ]


def create(settings: InferenceSettings, data_dir: Path) -> OllamaChatModel:
    return OllamaChatModel(
        settings.model,
        settings.base_url or DEFAULT_URL,
        timeout_secs=settings.request_timeout_secs,
        context_length=settings.context_length,
    )
