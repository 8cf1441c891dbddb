"""An OpenAI chat-completions request, read into the package's values (:class:`Completion`).

``messages``: ``system`` and ``developer`` become system messages; ``user``; ``assistant`` (text,
or ``tool_calls`` whose ``arguments`` are a JSON object as a string); ``tool`` (its ``tool_call_id``
names a call of an earlier assistant message). ``content`` is a string or an array of
``{"type": "text", "text": ...}`` parts (joined by newlines); other part types (images, audio,
files) are refused, naming the part: the models here read text only.

``tools``: ``{"type": "function", "function": {"name", "description"?, "parameters"?}}``; the name
matches ``^[a-zA-Z0-9_-]{1,64}$``, ``parameters`` is a JSON-schema object (checked against its
meta-schema with ``jsonschema``, the validator the tool loop already uses), names are unique.
``tool_choice``: ``"auto"``, ``"none"``, ``"required"`` or ``{"type": "function", "function":
{"name"}}`` naming an offered tool. ``response_format``: ``text``, ``json_object`` (any JSON object)
or ``json_schema`` (``json_schema.schema``; ``strict`` is accepted: the embedded engine always
decodes under the schema's grammar). Not together with ``tools``.

Every refusal is a :class:`ValidationFailed` whose field is the OpenAI parameter path
(``tools[0].function.name``), which the API answers as 400 ``invalid_request_error`` with that
``param``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from assistant.errors import ValidationFailed
from assistant.llm.base import ChatMessage, ToolCall, ToolSpec

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
CHOICE_WORDS = ("auto", "none", "required")
MAX_STOP = 4  # as OpenAI: up to four stop sequences
ANY_OBJECT: dict[str, Any] = {"type": "object"}  # response_format json_object


@dataclass(frozen=True)
class MemorySwitch:
    """The request's ``memory`` extension: retrieve the user's memories for the last user message,
    and learn from the exchange. Both on by default."""

    retrieve: bool = True
    learn: bool = True


@dataclass(frozen=True)
class Completion:
    messages: tuple[ChatMessage, ...]
    model: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: str = "auto"
    json_schema: dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    stop: tuple[str, ...] = ()
    memory: MemorySwitch = MemorySwitch()

    @property
    def last_user(self) -> int | None:
        """The index of the last user message, or None."""
        return next((i for i in range(len(self.messages) - 1, -1, -1) if self.messages[i].role == "user"), None)


def invalid(param: str, message: str) -> ValidationFailed:
    return ValidationFailed(f"{param}: {message}", [{"field": param, "error": message}])


def _kind(value: Any) -> str:
    return "null" if value is None else {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__)


def _object(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(param, f"must be an object, got {_kind(value)}")
    return value


def _string(value: Any, param: str, *, blank: bool = True) -> str:
    if not isinstance(value, str):
        raise invalid(param, f"must be a string, got {_kind(value)}")
    if not blank and not value.strip():
        raise invalid(param, "must not be empty")
    return value


def content_text(content: Any, param: str, *, nullable: bool = False) -> str:
    """A message's ``content``: a string, or text parts joined by newlines."""
    if content is None and nullable:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise invalid(param, f"must be a string or an array of content parts, got {_kind(content)}")
    texts = []
    for j, part in enumerate(content):
        where = f"{param}[{j}]"
        part = _object(part, where)
        kind = part.get("type")
        if kind not in ("text", "refusal"):
            raise invalid(f"{where}.type", f"content part type {kind!r} is not supported: this server's models "
                                           "read text only; send {\"type\": \"text\", \"text\": ...} parts")
        key = "text" if kind == "text" else "refusal"
        texts.append(_string(part.get(key), f"{where}.{key}"))
    return "\n".join(texts)


def _tool_calls(value: Any, param: str) -> tuple[ToolCall, ...]:
    if not isinstance(value, list):
        raise invalid(param, f"must be an array, got {_kind(value)}")
    calls = []
    for j, raw in enumerate(value):
        where = f"{param}[{j}]"
        raw = _object(raw, where)
        if raw.get("type", "function") != "function":
            raise invalid(f"{where}.type", f"must be 'function', got {raw.get('type')!r}")
        function = _object(raw.get("function"), f"{where}.function")
        name = _string(function.get("name"), f"{where}.function.name", blank=False)
        arguments = _string(function.get("arguments", "{}"), f"{where}.function.arguments")
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise invalid(f"{where}.function.arguments", f"must be a JSON object as a string: {exc.msg}") from None
        if not isinstance(parsed, dict):
            raise invalid(f"{where}.function.arguments", f"must be a JSON object, got {_kind(parsed)}")
        call_id = raw.get("id") or f"call_{j}"
        calls.append(ToolCall(_string(call_id, f"{where}.id"), name, parsed))
    return tuple(calls)


def read_messages(value: Any) -> tuple[ChatMessage, ...]:
    if not isinstance(value, list):
        raise invalid("messages", f"must be an array of messages, got {_kind(value)}")
    if not value:
        raise invalid("messages", "must hold at least one message")
    messages: list[ChatMessage] = []
    call_names: dict[str, str] = {}  # tool call id -> tool name, from the assistant messages so far
    for i, raw in enumerate(value):
        where = f"messages[{i}]"
        raw = _object(raw, where)
        role = raw.get("role")
        if role in ("system", "developer"):
            messages.append(ChatMessage("system", content_text(raw.get("content"), f"{where}.content")))
        elif role == "user":
            messages.append(ChatMessage("user", content_text(raw.get("content"), f"{where}.content")))
        elif role == "assistant":
            calls = _tool_calls(raw["tool_calls"], f"{where}.tool_calls") if raw.get("tool_calls") else ()
            text = content_text(raw.get("content"), f"{where}.content", nullable=True)
            if not calls and raw.get("content") is None:
                raise invalid(f"{where}.content", "an assistant message needs content or tool_calls")
            call_names.update({c.id: c.name for c in calls})
            messages.append(ChatMessage("assistant", text, tool_calls=calls))
        elif role == "tool":
            call_id = _string(raw.get("tool_call_id"), f"{where}.tool_call_id", blank=False)
            if call_id not in call_names:
                raise invalid(f"{where}.tool_call_id", f"{call_id!r} answers no tool call of an earlier "
                                                       "assistant message")
            messages.append(ChatMessage("tool", content_text(raw.get("content"), f"{where}.content"),
                                        tool_call_id=call_id, name=call_names[call_id]))
        else:
            raise invalid(f"{where}.role", f"must be one of system, developer, user, assistant, tool; got {role!r}")
    return tuple(messages)


def _schema(value: Any, param: str) -> dict[str, Any]:
    schema = _object(value, param)
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        raise invalid(param, f"is not a valid JSON schema: {exc.message} (at {path or 'the top'})") from None
    if schema.get("type", "object") != "object":
        raise invalid(param, f"must describe an object (type 'object'), got type {schema.get('type')!r}")
    return schema


def read_tools(value: Any) -> tuple[ToolSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise invalid("tools", f"must be an array of tools, got {_kind(value)}")
    specs: list[ToolSpec] = []
    for i, raw in enumerate(value):
        where = f"tools[{i}]"
        raw = _object(raw, where)
        if raw.get("type") != "function":
            raise invalid(f"{where}.type", f"must be 'function', got {raw.get('type')!r}")
        function = _object(raw.get("function"), f"{where}.function")
        name = _string(function.get("name"), f"{where}.function.name")
        if not TOOL_NAME.match(name):
            raise invalid(f"{where}.function.name", f"{name[:80]!r} does not match ^[a-zA-Z0-9_-]{{1,64}}$")
        if any(s.name == name for s in specs):
            raise invalid(f"{where}.function.name", f"{name!r} is offered twice")
        description = function.get("description") or ""
        _string(description, f"{where}.function.description")
        parameters = function.get("parameters")
        parameters = {"type": "object", "properties": {}} if parameters is None else _schema(
            parameters, f"{where}.function.parameters")
        specs.append(ToolSpec(name, description, parameters))
    return tuple(specs)


def read_tool_choice(value: Any, tools: tuple[ToolSpec, ...]) -> str:
    """The engine's ``tool_choice``: "auto", "none", "required" or an offered tool's name."""
    if value is None:
        return "auto"
    if isinstance(value, str):
        if value not in CHOICE_WORDS:
            raise invalid("tool_choice", f"must be auto, none, required or a function object; got {value!r}")
        if value == "required" and not tools:
            raise invalid("tool_choice", "'required' needs tools")
        return value
    choice = _object(value, "tool_choice")
    if choice.get("type") != "function":
        raise invalid("tool_choice.type", f"must be 'function', got {choice.get('type')!r}")
    name = _string(_object(choice.get("function"), "tool_choice.function").get("name"), "tool_choice.function.name")
    if name not in {t.name for t in tools}:
        offered = ", ".join(t.name for t in tools) or "none"
        raise invalid("tool_choice.function.name", f"{name!r} is not an offered tool (offered: {offered})")
    if name in CHOICE_WORDS:  # the engines read these words as modes, not as a tool's name
        raise invalid("tool_choice.function.name", f"a tool named {name!r} cannot be forced here; rename it")
    return name


def read_response_format(value: Any) -> dict[str, Any] | None:
    """The JSON schema the reply must satisfy, or None for free text."""
    if value is None:
        return None
    fmt = _object(value, "response_format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return dict(ANY_OBJECT)
    if kind == "json_schema":
        spec = _object(fmt.get("json_schema"), "response_format.json_schema")
        _string(spec.get("name", "reply"), "response_format.json_schema.name")
        if "schema" not in spec:
            raise invalid("response_format.json_schema.schema", "is required")
        schema = _object(spec["schema"], "response_format.json_schema.schema")
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            raise invalid("response_format.json_schema.schema", f"is not a valid JSON schema: {exc.message}") from None
        return schema
    raise invalid("response_format.type", f"must be text, json_object or json_schema; got {kind!r}")


def read_stop(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise invalid("stop", "must be a non-empty string or an array of non-empty strings")
    if len(stops) > MAX_STOP:
        raise invalid("stop", f"at most {MAX_STOP} sequences, got {len(stops)}")
    return tuple(stops)


def read_memory(value: Any) -> MemorySwitch:
    if value is None:
        return MemorySwitch()
    switch = _object(value, "memory")
    unknown = sorted(set(switch) - {"retrieve", "learn"})
    if unknown:
        raise invalid(f"memory.{unknown[0]}", "unknown field; memory takes retrieve and learn (booleans)")
    for key in ("retrieve", "learn"):
        if not isinstance(switch.get(key, True), bool):
            raise invalid(f"memory.{key}", f"must be a boolean, got {_kind(switch[key])}")
    return MemorySwitch(switch.get("retrieve", True), switch.get("learn", True))


def read_completion(body: dict[str, Any], context_length: int) -> Completion:
    """The request ``body`` (its scalar fields already typed by the API schema) as a Completion."""
    n = body.get("n")
    if n is not None and n != 1:
        raise invalid("n", f"only n=1 is supported (one choice per request), got {n}")
    if body.get("logprobs"):
        raise invalid("logprobs", "log probabilities are not supported by this server")
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    param = "max_completion_tokens" if body.get("max_completion_tokens") else "max_tokens"
    if max_tokens is not None and max_tokens > context_length:
        raise invalid(param, f"must be at most the context length {context_length}, got {max_tokens}")
    tools = read_tools(body.get("tools"))
    json_schema = read_response_format(body.get("response_format"))
    if tools and json_schema is not None:
        raise invalid("response_format", "a JSON response_format cannot be combined with tools here; "
                                         "send one or the other")
    options = body.get("stream_options")
    if options is not None and not body.get("stream"):
        raise invalid("stream_options", "is only allowed with stream: true")
    include_usage = _object(options, "stream_options").get("include_usage", False) if options is not None else False
    if not isinstance(include_usage, bool):
        raise invalid("stream_options.include_usage", f"must be a boolean, got {_kind(include_usage)}")
    return Completion(
        messages=read_messages(body.get("messages")),
        model=body.get("model"),
        tools=tools,
        tool_choice=read_tool_choice(body.get("tool_choice"), tools),
        json_schema=json_schema,
        temperature=body.get("temperature"),
        max_tokens=max_tokens,
        stream=bool(body.get("stream")),
        include_usage=include_usage,
        user=body.get("user"),
        stop=read_stop(body.get("stop")),
        memory=read_memory(body.get("memory")),
    )
