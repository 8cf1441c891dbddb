"""What the command parser answers: the command types, :class:`ParsedCommand` and the confidences
(see :mod:`assistant.commands.parser`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

MAX_INPUT_CHARS = 2000
PATTERN_CONFIDENCE = 0.95
INCOMPLETE_CONFIDENCE = 0.6
MODEL_MAX_CONFIDENCE = 0.9
MODEL_DEFAULT_CONFIDENCE = 0.5
DEFAULT_EVENT_MINUTES = 60
MAX_EMAILS = 50
DEFAULT_EMAILS = 10


class CommandType(StrEnum):
    BRIEFING = "briefing"
    WEATHER = "weather"
    CALENDAR = "calendar"
    EMAILS = "emails"
    HELP = "help"
    CALENDAR_EVENT = "calendar_event"
    REMINDER = "reminder"
    TASK = "task"
    SEND_EMAIL = "send_email"
    UNKNOWN = "unknown"


CHANGING = frozenset({CommandType.CALENDAR_EVENT, CommandType.REMINDER, CommandType.TASK, CommandType.SEND_EMAIL})


@dataclass(frozen=True)
class ParsedCommand:
    parsed: bool
    command: dict[str, Any]
    confidence: float
    requires_approval: bool
    source: str | None = None  # "pattern", "model", or None (nothing understood)

    @classmethod
    def of(cls, command: dict[str, Any], confidence: float, source: str) -> ParsedCommand:
        return cls(True, command, round(confidence, 4), command["type"] in CHANGING, source)

    @classmethod
    def not_understood(cls, source: str | None = None) -> ParsedCommand:
        return cls(False, {"type": CommandType.UNKNOWN.value}, 0.0, False, source)
