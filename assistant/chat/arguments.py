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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

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


def time_context(now: datetime) -> str:
    """One line for the system prompt: the current date, weekday, time and zone."""
    return f"Current date and time: {now:%A %Y-%m-%d %H:%M} ({now.tzname() or 'UTC'})."


def review_arguments(spec: ToolSpec, arguments: dict[str, Any], *, user_text: list[str], now: datetime,
                     options: ReviewOptions = ReviewOptions()) -> Review:  # noqa: B008 (frozen)
    """The arguments a call runs with, the changes made and the problems left (see module docstring).
    ``user_text``: the user's messages of the conversation, oldest first (the newest matters most)."""
    return Review(dict(arguments))
