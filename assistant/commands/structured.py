"""Ask the model for one JSON object that fits a JSON schema.

The schema is offered to the model as its only tool. The embedded engine (llama.cpp) decodes a
tool call under a grammar built from the tool's schema, so the call's arguments are schema-valid
JSON: they are the answer. Engines that answer in text instead (Ollama or an OpenAI-compatible
server without tool support, or a model that writes the JSON as prose) are read from the text: a
``{"name", "arguments"}`` call, or the bare object, in or out of a code fence. Nothing that is not
a JSON object is returned; the caller still checks every field (a grammar only guarantees shape).
"""

from __future__ import annotations

import json
import re
from typing import Any

from assistant.llm.base import ChatMessage, GenerationOptions, ToolSpec
from assistant.llm.queue import InferenceQueue
from assistant.llm.tool_format import parse_tool_calls

_FENCE = re.compile(r"```(?:json)?", re.IGNORECASE)


def json_object_in(text: str, name: str | None = None) -> dict[str, Any] | None:
    """The JSON object a reply carries: the arguments of a call to ``name`` (when given), else the
    first ``{...}`` of the text that parses; None when there is none."""
    for call in parse_tool_calls(text):
        if (name is None or call.name == name) and "_unparsed" not in call.arguments:
            return dict(call.arguments)
    cleaned = _FENCE.sub("", text)
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(cleaned) if ch == "{"):
        try:
            value, _ = decoder.raw_decode(cleaned, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            arguments = value.get("arguments")
            if isinstance(value.get("name"), str) and isinstance(arguments, dict):
                return arguments
            return value
    return None


async def ask_json(queue: InferenceQueue, messages: list[ChatMessage], name: str, description: str,
                   schema: dict[str, Any], *, max_tokens: int = 256, temperature: float = 0.0,
                   model: str | None = None) -> dict[str, Any] | None:
    """The object the model answers ``messages`` with, shaped by ``schema`` (see the module
    docstring); None when the reply holds no JSON object. Engine failures propagate
    (ServiceUnavailableError, UpstreamError)."""
    options = GenerationOptions(model=model, temperature=temperature, max_tokens=max_tokens,
                                tools=(ToolSpec(name, description, schema),))
    reply = await queue.complete(messages, options)
    call = next((c for c in reply.tool_calls if c.name == name and "_unparsed" not in c.arguments), None)
    return dict(call.arguments) if call is not None else json_object_in(reply.content, name)
