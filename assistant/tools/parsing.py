"""Tool calls written in the message content, as small models do: ``{"name", "arguments"}`` JSON.

Qwen2.5-Coder answers a tool request with a JSON object (sometimes in a code fence or
``<tool_call>`` tags, sometimes a list of them). Text that is not such JSON is a final answer.
"""

from __future__ import annotations

import json
import re
from typing import Any

from assistant.llm.base import ToolCall

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)
_TAGS = re.compile(r"</?tool_call>")


def _candidates(text: str) -> Any:
    cleaned = _TAGS.sub("", _FENCE.sub("", text.strip())).strip()
    if not cleaned or cleaned[0] not in "[{":
        return None
    try:
        return json.loads(cleaned)
    except json.JSONDecodeError:
        pass
    objects, depth, start = [], 0, None
    for i, ch in enumerate(cleaned):  # one JSON object per line or back to back
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and start is not None:
                try:
                    objects.append(json.loads(cleaned[start:i + 1]))
                except json.JSONDecodeError:
                    return None
    return objects or None


def looks_like_tool_call(text: str) -> bool:
    stripped = _TAGS.sub("", _FENCE.sub("", text.strip())).lstrip()
    return stripped.startswith(("{", "[")) and '"name"' in stripped


def parse_tool_calls(text: str, prefix: str = "call") -> tuple[ToolCall, ...]:
    """The tool calls in ``text``; () when it is a plain answer."""
    data = _candidates(text)
    items = data if isinstance(data, list) else [data] if isinstance(data, dict) else []
    calls = []
    for n, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                arguments = {"_unparsed": arguments}
        calls.append(ToolCall(f"{prefix}_{n}", item["name"], arguments if isinstance(arguments, dict) else {}))
    return tuple(calls)
