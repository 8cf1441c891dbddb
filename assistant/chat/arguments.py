"""Argument hygiene and grounded dates for one tool call (issue 20): pure functions, no model.

CONTRACT (the lead's; the helper fills it in):

- :func:`time_context` — the line about "now" that goes into the system prompt.
- :func:`review_arguments` — what a call's arguments become before the tool runs:
  * date/time-typed arguments (schema ``format`` date-time/date/time, or a description naming a
    format such as ``%Y-%m-%d %H:%M:%S``, or a name like ``time``/``date``/``deadline``) whose value is
    a relative expression ("tomorrow at 3pm") are resolved by :mod:`assistant.commands.when` against
    ``now``; a value that disagrees with the time phrase the user wrote is replaced by the resolution
    of the user's phrase; the value is written in the format the schema/description asks for;
  * free-text string arguments keep the user's own words: padding the model added (a time repeated
    into a description, a trailing period) is dropped when the user's text holds the core phrase;
  * enum and format checks against the JSON schema (jsonschema) list what is still wrong in
    ``problems`` (empty = valid); the loop runs one repair round with them.
  Every change is a :class:`Change` with a reason, kept with the tool run for the explain view.

How (the helper's notes): the date rules live in :mod:`assistant.chat.arguments_dates`, the
free-text rule in :mod:`assistant.chat.arguments_words`. A date/time value is changed when it is a
phrase rather than a date ("tomorrow at 3pm", resolved), when it is an absolute date in another
ISO-like shape than the format named (rewritten), or when it disagrees with the one time phrase of
the newest user message that has one — only in the fields that phrase states ("3 pm" fixes the time
and keeps the model's day; "march 19th" keeps the model's year), never when the user typed the
value itself, and only when the call has a single date/time argument, or two that are an
interval's start and end and the phrase has an end ("from 2pm to 4pm"); otherwise which argument
a phrase is about is not clear. "Today is 2021-09-27" in the user's messages makes that day the
reference for relative phrases (ReviewOptions.conversation_date, when given, wins). Unambiguous type slips are coerced ("5" for an
integer, an enum value in another case). The schema check uses jsonschema (the reference
implementation: Draft 2020-12 with its FormatChecker) rather than hand-written checks; formats that
only a description names ("Format: %Y-%m-%d") are checked here with strptime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from assistant.chat.arguments_dates import (
    DateParam,
    date_param,
    disagreement,
    fits,
    parse_absolute,
    phrases_for,
    reformat,
    resolve,
    stated_today,
)
from assistant.chat.arguments_words import is_free_text, keep_user_words
from assistant.commands.when import FoundMoment
from assistant.llm.base import ToolSpec


@dataclass(frozen=True)
class Change:
    field: str
    before: Any
    after: Any
    reason: str  # "resolved 'tomorrow at 3pm'", "kept the user's words", ...

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after, "reason": self.reason}


@dataclass(frozen=True)
class Review:
    arguments: dict[str, Any]  # what the tool is called with
    changes: tuple[Change, ...] = ()
    problems: tuple[str, ...] = ()  # schema violations left ("time: '3pm' is not a date-time"); () = valid

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"changes": [c.as_dict() for c in self.changes], "problems": list(self.problems)}


@dataclass(frozen=True)
class ReviewOptions:
    ground_dates: bool = True
    keep_user_words: bool = True
    check_schema: bool = True
    conversation_date: datetime | None = field(default=None)  # "today" of the conversation, when given




def warm_up() -> None:
    """Import the schema checker ahead of the first call (seconds, once; see _problems): the service
    does it on a background thread at start, the benchmark before it measures the loop."""
    import jsonschema  # noqa: F401


def time_context(now: datetime, conversation_date: datetime | None = None) -> str:
    """One line for the system prompt: the current date, weekday, time and zone (and the
    conversation's own date, when one is given and differs)."""
    offset = now.strftime("%z") or "+0000"
    zone = now.tzinfo.key if isinstance(now.tzinfo, ZoneInfo) else (now.tzname() or "UTC")
    utc = f"UTC{offset[:3]}:{offset[3:]}"
    where = "UTC" if offset == "+0000" and zone in ("UTC", "Etc/UTC", "GMT") else f"{zone}, {utc}"
    line = f"Current date and time: {now:%A %Y-%m-%d %H:%M} ({where})."
    if conversation_date is not None and conversation_date.date() != now.date():
        line += f" The conversation is dated {conversation_date:%A %Y-%m-%d}: \"today\" means that day."
    return line


def review_arguments(spec: ToolSpec, arguments: dict[str, Any], *, user_text: list[str], now: datetime,
                     options: ReviewOptions = ReviewOptions()) -> Review:  # noqa: B008 (frozen)
    """The arguments a call runs with, the changes made and the problems left (see module docstring).
    ``user_text``: the user's messages of the conversation, oldest first (the newest matters most)."""
    args, changes = dict(arguments), []
    properties = _properties(spec)
    if now.tzinfo is None:  # the contract asks for an aware now; a naive one is taken as UTC
        now = now.replace(tzinfo=UTC)

    def change(name: str, after: Any, reason: str) -> None:
        changes.append(Change(name, args[name], after, reason))
        args[name] = after

    if options.check_schema:
        for name, value in list(args.items()):
            coerced = _coerce(properties.get(name), value)
            if coerced is not None:
                change(name, *coerced)
    dates = {name: p for name, p in ((n, date_param(n, s)) for n, s in properties.items()) if p is not None}
    if options.ground_dates:
        reference = _reference(now, options.conversation_date, user_text)
        present = {name: p for name, p in dates.items() if isinstance(args.get(name), str) and args[name].strip()}
        phrases = phrases_for(present, user_text, reference)
        for name, param in present.items():
            for after, reason in _ground(args[name], param, user_text, reference, phrases.get(name)):
                change(name, after, reason)
    if options.keep_user_words:
        timed = any(isinstance(args.get(name), str) and args[name].strip() for name in dates)
        for name, value in list(args.items()):
            if name in dates or not is_free_text(name, properties.get(name, {}), value):
                continue
            others = [v for other, v in args.items() if other != name]
            kept = keep_user_words(value, user_text, others, now, times_elsewhere=timed)
            if kept is not None:
                change(name, kept, "kept the user's words")
    schema = spec.parameters if isinstance(spec.parameters, dict) else {}
    problems = _problems(schema, dates, args) if options.check_schema else []
    return Review(args, tuple(changes), tuple(problems))


def _properties(spec: ToolSpec) -> dict[str, dict[str, Any]]:
    properties = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
    if not isinstance(properties, dict):
        return {}
    return {name: schema for name, schema in properties.items() if isinstance(schema, dict)}


def _reference(now: datetime, conversation_date: datetime | None, user_text: list[str]) -> datetime:
    """The "now" relative phrases are resolved against: the conversation's when given, else the day
    the user says it is ("Today is 2021-09-27"), else now."""
    if conversation_date is None:
        return stated_today(user_text, now) or now
    return conversation_date if conversation_date.tzinfo else conversation_date.replace(tzinfo=now.tzinfo)


def _ground(value: str, param: DateParam, user_text: list[str], now: datetime,
            phrase: FoundMoment | None) -> list[tuple[str, str]]:
    """The successive (value, reason) a date/time value goes through."""
    steps: list[tuple[str, str]] = []
    written = reformat(value, param)
    if written is not None:
        steps.append((written, f"written as {param.fmt}"))
    elif not fits(value, param) and (param.declared or parse_absolute(value, param) is None):
        # (a date-named argument with no format named keeps an absolute value in its own shape)
        resolved = resolve(value, param, now)
        if resolved is not None and resolved[0] != value:
            steps.append((resolved[0], f"resolved {value.strip()!r}"))
    current = steps[-1][0] if steps else value
    typed = any(value.strip().lower() in message.lower() for message in user_text)
    if phrase is not None and (not typed or steps):  # a date the user typed is never changed
        corrected = disagreement(current, param, phrase, now)
        if corrected is not None and corrected != current:
            steps.append((corrected, f"the user said {phrase.text!r}"))
    return steps


_INTEGER = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


def _coerce(schema: dict[str, Any] | None, value: Any) -> tuple[Any, str] | None:
    """An unambiguous repair of a value's type or an enum's case: (new value, reason), or None."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    if isinstance(value, str):
        text = value.strip()
        if kind == "integer" and _INTEGER.match(text):
            return int(text), "a whole number given as text"
        if kind == "number" and _NUMBER.match(text):
            number = float(text)
            return (int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number,
                    "a number given as text")
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true", "true/false given as text"
        enum = schema.get("enum")
        if isinstance(enum, list) and value not in enum:
            same = [e for e in enum if isinstance(e, str) and e.lower() == text.lower()]
            if len(same) == 1:
                return same[0], "the allowed value differing only in case or spaces"
    elif kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value), "a number given for a text field"
    return None


def _problems(schema: dict[str, Any], dates: dict[str, DateParam], args: dict[str, Any]) -> list[str]:
    """What is still wrong with ``args`` against the schema, one short sentence each."""
    listed = schema.get("required")
    required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    present = {k: v for k, v in args.items() if v is not None or k in required}  # null = left out
    problems: list[str] = []
    for name, param in dates.items():
        value = present.get(name)
        if param.declared and isinstance(value, str) and not fits(value, param):
            problems.append(f"{name}: {value!r} is not a valid {param.kind} (expected {param.fmt or 'ISO 8601'})")
    # imported here: importing jsonschema can take seconds (its format module builds the optional
    # rfc3987-syntax grammars), a cost the first checked call pays rather than every start-up
    from jsonschema import Draft202012Validator, FormatChecker
    from jsonschema.exceptions import SchemaError, UnknownType

    schema = _items_enums(schema)
    try:
        Draft202012Validator.check_schema(schema)
        validator = Draft202012Validator(schema, format_checker=FormatChecker())
        errors = sorted(validator.iter_errors(present), key=lambda e: list(e.absolute_path))
    except SchemaError as error:  # the tool's own schema is broken: say so rather than fail the call
        return [f"the tool's schema is invalid: {error.message}"]
    except UnknownType as error:
        return [f"the tool's schema is invalid: unknown type {error.type!r}"]
    for error in errors:
        path = ".".join(str(p) for p in error.absolute_path)
        if error.validator == "required":
            missing = re.match(r"^'(.+)' is a required property$", error.message)
            problems.append(f"{missing.group(1) if missing else '?'}: missing (required)")
        elif error.validator == "format" and path in dates:
            continue  # said above, with the format expected
        elif error.validator == "additionalProperties":
            problems.append(f"{error.message} (not a parameter of this tool)")
        else:
            problems.append(f"{path or '(arguments)'}: {error.message}")
    return problems


def _items_enums(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with an enum of plain values written on an array property (a common slip in tool
    schemas: the allowed values of the items) moved onto its items, as it is meant."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    moved = {}
    for name, prop in properties.items():
        if not isinstance(prop, dict) or prop.get("type") != "array":
            continue
        enum = prop.get("enum")
        if isinstance(enum, list) and enum and not any(isinstance(e, list) for e in enum):
            items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
            moved[name] = {k: v for k, v in prop.items() if k != "enum"} | {"items": {**items, "enum": enum}}
    return {**schema, "properties": {**properties, **moved}} if moved else schema
