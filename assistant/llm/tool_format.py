"""Tool calls written in the message content, as small models do: ``{"name", "arguments"}`` JSON.

Qwen2.5-Coder answers a tool request with a JSON object (sometimes in a code fence or
``<tool_call>`` tags, sometimes a list of them). Text that is not such JSON is a final answer.

:func:`classify_start` decides from the first characters of a streamed reply whether it is a call
(buffer it) or an answer (stream it to the user at once), so the final answer is never held back
for more than the few characters that could still begin a call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from assistant.errors import ValidationFailed
from assistant.llm.base import ChatMessage, GenerationOptions, ToolCall, ToolSpec

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


CALL, ANSWER, UNDECIDED = "call", "answer", "undecided"
AUTO = "auto"  # the model decides between an answer and a call


def resolve_tool_choice(options: GenerationOptions) -> tuple[str, tuple[ToolSpec, ...]]:
    """What ``options.tool_choice`` asks of this reply: ``auto`` (the model decides), ``call`` (a call
    of one of the returned tools) or ``answer`` (no call), with the tools a call may name. With no
    tools offered there is nothing to call: an answer, whatever the choice. A name that is not an
    offered tool is a ValidationFailed on ``tool_choice``."""
    choice = options.tool_choice
    if not options.tools:
        return ANSWER, ()
    if choice == "auto":
        return AUTO, options.tools
    if choice == "none":
        return ANSWER, options.tools
    if choice == "required":
        return CALL, options.tools
    named = tuple(t for t in options.tools if t.name == choice)
    if not named:
        offered = ", ".join(t.name for t in options.tools)
        raise ValidationFailed(f"tool_choice {choice!r} is not an offered tool", [
            {"field": "tool_choice", "error": f"expected auto, required, none or an offered tool: {offered}"}])
    return CALL, named
_MAX_UNDECIDED = 80  # characters; a reply still ambiguous after this many is an answer


def _step(s: str, literal: str) -> tuple[str, str]:
    """Consume ``literal`` at the start of ``s``: ("ok", rest), ("partial", "") or ("no", s)."""
    if s.startswith(literal):
        return "ok", s[len(literal):]
    if literal.startswith(s):
        return "partial", ""
    return "no", s


def classify_start(text: str) -> str:
    """``call`` if ``text`` begins a ``{"name": ...}`` tool call (optionally fenced, tagged or in a
    list), ``answer`` if it cannot, ``undecided`` while the first characters could go either way."""
    s = text.lstrip()
    if not s:
        return UNDECIDED
    if len(s) > _MAX_UNDECIDED and classify_start(s[:_MAX_UNDECIDED]) == UNDECIDED:
        return ANSWER
    for literal, optional in (("```", True), ("json", True), ("<tool_call>", True), ("[", True), ("{", False)):
        state, rest = _step(s, literal)
        if state == "partial":
            return UNDECIDED
        if state == "no":
            if literal == "json" and s and not s[0].isspace() and s[0] not in "{[<":
                return ANSWER  # a fence of another language: ```python
            if not optional:
                return ANSWER
            continue
        s = rest.lstrip()
        if not s:
            return UNDECIDED
    state, _ = _step(s, '"name"')
    if state == "partial":
        return UNDECIDED
    return CALL if state == "ok" else ANSWER


def looks_like_tool_call(text: str) -> bool:
    stripped = _TAGS.sub("", _FENCE.sub("", text.strip())).lstrip()
    return stripped.startswith(("{", "[")) and '"name"' in stripped


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Call arguments as sent (an object, or a JSON string of one); what does not parse is kept
    under ``_unparsed`` so the loop can tell the model what was wrong."""
    if isinstance(raw, dict):
        return raw
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {"_unparsed": raw}
        return value if isinstance(value, dict) else {"_unparsed": raw}
    return {"_unparsed": str(raw)}


def parse_tool_calls(text: str, prefix: str = "call") -> tuple[ToolCall, ...]:
    """The tool calls in ``text``; () when it is a plain answer."""
    data = _candidates(text)
    items = data if isinstance(data, list) else [data] if isinstance(data, dict) else []
    calls = []
    for n, item in enumerate(items):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        arguments = parse_arguments(item.get("arguments", item.get("parameters", {})))
        calls.append(ToolCall(f"{prefix}_{n}", item["name"], arguments))
    return tuple(calls)


# --- prompting a model whose chat template knows nothing of tools ----------------------------------

TOOL_PROMPT = """# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{tools}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{{"name": <function-name>, "arguments": <args-json-object>}}
</tool_call>"""


def tool_prompt(specs: tuple[ToolSpec, ...]) -> str:
    """The Hermes/Qwen tool instructions, for templates that do not render ``tools`` themselves."""
    return TOOL_PROMPT.format(tools="\n".join(json.dumps(s.openai(), ensure_ascii=False) for s in specs))


def call_text(calls: tuple[ToolCall, ...]) -> str:
    return "\n".join(
        f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments}, ensure_ascii=False)}\n</tool_call>"
        for c in calls
    )


def template_messages(messages: list[ChatMessage], specs: tuple[ToolSpec, ...],
                      template_has_tools: bool) -> list[dict[str, Any]]:
    """Messages for a Jinja chat template. A template that renders tools gets OpenAI-shaped tool
    calls (arguments as objects, which Qwen's template serialises) and tool-role messages; any other
    template gets the tool prompt in the system message, calls as ``<tool_call>`` text and results
    as ``<tool_response>`` user turns."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if template_has_tools:
            item: dict[str, Any] = {"role": m.role, "content": m.content}
            if m.tool_calls:
                item["tool_calls"] = [{"id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": c.arguments}} for c in m.tool_calls]
            if m.role == "tool":
                item.update(tool_call_id=m.tool_call_id, name=m.name)
            out.append(item)
        elif m.role == "tool":
            out.append({"role": "user", "content": f"<tool_response>\n{m.content}\n</tool_response>"})
        elif m.tool_calls:
            out.append({"role": "assistant", "content": "\n".join(p for p in (m.content, call_text(m.tool_calls)) if p)})
        else:
            out.append({"role": m.role, "content": m.content})
    if specs and not template_has_tools:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{tool_prompt(specs)}"}
        else:
            out.insert(0, {"role": "system", "content": tool_prompt(specs)})
    return out


_GRAMMAR_MAX_REPEAT = 64  # llama.cpp expands x{m,n} into n rules: a maxLength of 20,000 crashes it


def _grammar_friendly(schema: Any) -> Any:
    """``schema`` without what a grammar need not enforce (descriptions, defaults) or cannot afford
    (long length bounds); the tool's own validation still applies every constraint."""
    if isinstance(schema, list):
        return [_grammar_friendly(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("description", "default", "title", "examples"):
            continue
        if key in ("maxLength", "minLength", "maxItems", "minItems") and value > _GRAMMAR_MAX_REPEAT:
            continue
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: _grammar_friendly(sub) for name, sub in value.items()}  # names, not keywords
        else:
            out[key] = value if key in ("const", "enum") else _grammar_friendly(value)
    return out


def call_schema(specs: tuple[ToolSpec, ...]) -> dict[str, Any]:
    """A JSON schema that only admits a well-formed call of one of ``specs`` (for grammar-constrained
    decoding): ``{"name": <one of the names>, "arguments": <that tool's argument schema>}``."""
    options = [
        {"type": "object",
         "properties": {"name": {"const": s.name}, "arguments": _grammar_friendly(s.parameters)},
         "required": ["name", "arguments"], "additionalProperties": False}
        for s in specs
    ]
    return options[0] if len(options) == 1 else {"anyOf": options}
