"""Natural language to a command: quick patterns first, then the model with a JSON schema.

``CommandParser.parse("add meeting with Bob tomorrow at 3pm for an hour")`` answers
``ParsedCommand(parsed=True, command={"type": "calendar_event", "title": "Meeting with Bob",
"start": "...", "end": "...", ...}, confidence=0.95, requires_approval=True)``. Nothing is executed.

Command types and their fields (times are ISO 8601 UTC timestamps; ``timezone`` names the zone the
words were read in, ``[calendar] timezone``, default UTC):

- ``briefing``, ``help``: no fields.
- ``weather``: ``location`` (null: the default location of the ``weather`` command).
- ``calendar``: ``start`` (a date, YYYY-MM-DD), ``days`` (1..366): "what's on my calendar this week".
- ``emails``: ``count`` (1..50, default 10): "check my email", "show my last 5 emails".
- ``calendar_event``: ``title``, ``start``, ``end``, ``all_day``, ``timezone``. Without a time of day
  the event is all-day (``start`` and ``end`` are the local midnights around it); without an end
  or a length it lasts an hour.
- ``reminder``: ``text``, ``at``, ``timezone`` (a missing part is null and the confidence lower).
- ``task``: ``title``, ``due`` (null when not said; 09:00 local when only a day was said), ``timezone``.
- ``send_email``: ``to`` (a list of addresses), ``subject``, ``body`` (null when not said).
- ``unknown``: with ``parsed: false``, confidence 0.

``requires_approval`` is true for the types that change something: calendar_event, reminder,
task and send_email. Confidence: 0.95 for a pattern, 0.6 for a pattern missing a part (a reminder
without a time), 0 when nothing was understood; for the model, its own estimate clipped to 0..0.9
(0.5 when it gives none) times the answer's grounding in the sentence
(:mod:`assistant.commands.grounding`): an answer none of whose words the sentence contains is not
understood, whatever the model says. A sentence without a word of two letters ("0", digits,
punctuation) is not understood without asking the model. The model's turn is bounded by
``timeout_secs`` (``[commands] parse_timeout_secs``): past it, 503. Relative dates follow
:mod:`assistant.commands.when`.

The model is asked (:func:`assistant.commands.structured.ask_json`) for ``{what, when, type,
confidence}``: the subject and the time words as the user said them, then the type. The parser,
not the model, resolves the time words, so a small model need not do date arithmetic; every field
is checked before a command is built from it.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo
from typing import Any

from assistant.clock import iso, utcnow
from assistant.commands.grounding import grounding, has_words
from assistant.commands.parsed import (
    CHANGING as CHANGING,  # re-exported: the parser's vocabulary
)
from assistant.commands.parsed import (
    DEFAULT_EMAILS,
    DEFAULT_EVENT_MINUTES,
    INCOMPLETE_CONFIDENCE,
    MAX_EMAILS,
    MAX_INPUT_CHARS,
    MODEL_DEFAULT_CONFIDENCE,
    MODEL_MAX_CONFIDENCE,
    PATTERN_CONFIDENCE,
    CommandType,
    ParsedCommand,
)
from assistant.commands.structured import ask_json
from assistant.commands.when import NUMBER_WORDS, Moment, parse_moment, parse_period
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.base import ChatMessage
from assistant.llm.queue import InferenceQueue

# --- the quick patterns ------------------------------------------------------------------------------

_POLITE = r"(?:(?:hey|hi|ok|okay|so)[,!]?\s+)?(?:(?:please|pls|can you|could you|would you|will you|kindly)\s+)?"
_PLEASE = re.compile(r"(?:[,\s]+please)+$", re.IGNORECASE)
_MAIL = r"(?:e-?mails?|mails?|inbox|mailbox)"
_CAL = r"(?:calendar|schedule|agenda|diary|appointments|meetings|events|plans)"
_NUMBER = rf"(?:\d{{1,3}}|{'|'.join(sorted(NUMBER_WORDS, key=len, reverse=True))})"

_HELP = re.compile(
    rf"^{_POLITE}(?:help(?: me)?|\?|commands|what can you do|what can i (?:say|ask)|"
    r"(?:show|list)(?: me)?(?: the| all)?(?: available)? commands|what commands (?:are there|do you (?:know|have)))$",
    re.IGNORECASE)
_BRIEFING = re.compile(
    rf"^(?:good morning|morning|briefing|daily briefing|morning briefing|brief me|{_POLITE}(?:give me|show me|"
    r"get me|read me|what'?s|what is)\s+(?:my|a|the|today'?s)\s+(?:daily\s+|morning\s+)?"
    r"(?:briefing|brief|summary|rundown|overview)(?:\s+for today)?)(?:[,!\s]+(?:assistant|there|everyone))?$",
    re.IGNORECASE)
_REMINDER = re.compile(rf"^{_POLITE}(?:remind me|(?:set|create|add|make)\s+(?:a\s+|an\s+)?(?:new\s+)?reminder)"
                       r"(?:\s+(?P<rest>.*))?$", re.IGNORECASE)
_TASKS = (
    re.compile(rf"^{_POLITE}(?:add|create|make|new|put)\s+(?:a\s+|an\s+)?(?:new\s+)?(?:task|to-?do)(?:\s+item)?"
               r"\s*(?:[:\-]|to|called|named)?\s+(?P<rest>.+)$", re.IGNORECASE),
    re.compile(rf"^{_POLITE}(?:add|put)\s+(?P<rest>.+?)\s+(?:to|on)\s+(?:my\s+|the\s+)?(?:task|to-?do|tasks)"
               r"(?:\s+list)?$", re.IGNORECASE),
    re.compile(r"^(?:task|to-?do)\s*:\s*(?P<rest>.+)$", re.IGNORECASE),
)
_EVENT = re.compile(rf"^{_POLITE}(?:add|create|schedule|book|put|set up|setup|make|plan|arrange|organi[sz]e)\s+"
                    r"(?P<rest>.+)$", re.IGNORECASE)
_CALENDAR_MENTION = re.compile(r"\s*\b(?:to|on|in|into)\s+(?:my|the)\s+(?:calendar|diary|agenda|schedule)\b\s*",
                               re.IGNORECASE)
_EVENT_NAMED = re.compile(r"^(?:an?\s+|the\s+|new\s+)*(?:event|appointment)\s+(?:called|named|titled|for)\s+",
                          re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:an?|the|new)\s+", re.IGNORECASE)
_SEND_EMAIL = re.compile(
    rf"^{_POLITE}(?:send|write|compose)\s+(?:an?\s+)?(?:e-?mail|mail|message)\s+to\s+"
    r"(?P<to>[^\s@,]+@[^\s@,]+\.[^\s@,]+(?:\s*(?:,|and)\s*[^\s@,]+@[^\s@,]+\.[^\s@,]+)*)"
    r"(?:\s+(?:about|with (?:the )?subject|subject:?|re:?)\s+(?P<subject>.+?))?"
    r"(?:\s+(?:saying|that says|to say|with (?:the )?(?:text|message|body)|:)\s+(?P<body>.+))?$", re.IGNORECASE)
_WEATHER = re.compile(r"\b(?:weather|forecast|temperature|rain(?:ing)?|snow(?:ing)?|sunny)\b", re.IGNORECASE)
_WEATHER_NOW = re.compile(r"\s+(?:now|right now|at the moment|currently|outside|like|going to be|gonna be)$",
                          re.IGNORECASE)
_PERIOD_WORDS = re.compile(r"^(?:for|in|on|over|during|at)\s+", re.IGNORECASE)
_WEATHER_IN = re.compile(r"^.*\b(?:in|for|at|near|around)\s+(?P<place>[^\d,;:!?()]+?)$", re.IGNORECASE)
_WEATHER_AFTER = re.compile(r"^(?:the\s+)?(?:weather|forecast)\s+(?P<place>[^\d,;:!?()]+)$", re.IGNORECASE)
_WEATHER_BEFORE = re.compile(r"^(?P<place>[A-Z][^\d,;:!?()]*?)(?:'s)?\s+(?:weather|forecast)$")
_NOT_PLACES = {"the", "my", "what", "what's", "whats", "how", "how's", "is", "show", "tell", "get", "check",
               "today's", "current", "local", "a", "me", "us", "here", "there", "the moment", "outside"}
_CALENDAR_QUERIES = (
    re.compile(rf"^{_POLITE}(?:(?:what'?s|whats|what is|what are|show(?: me)?|list|check|open|tell me(?: about)?|"
               rf"read(?: me)?|get|see|view|display|any)\b.*?\b{_CAL}|my\s+{_CAL}|{_CAL})\b(?P<rest>.*)$",
               re.IGNORECASE),
    re.compile(rf"^{_POLITE}(?:what'?s|whats|what is|is there anything|anything)\s+(?:on|planned|scheduled|"
               r"happening|coming up)\b(?P<rest>.*)$", re.IGNORECASE),
    re.compile(rf"^{_POLITE}(?:what do i have|what have i got|do i have anything|am i (?:busy|free))"
               r"(?:\s+(?:on|planned|scheduled))?\b(?P<rest>.*)$", re.IGNORECASE),
)
_EMAILS = re.compile(
    rf"^{_POLITE}(?:(?:check|read|show|list|get|open|see|view|fetch|any|do i have|have i got|what'?s in|"
    rf"what is in|what are)\b.*?\b{_MAIL}|(?:my\s+|new\s+)?{_MAIL})\b(?P<rest>.*)$", re.IGNORECASE)
_EMAIL_FILLER = re.compile(r"^(?:\s*(?:for me|today|now|please|right now|again|any new ones|messages))*\s*$",
                           re.IGNORECASE)
_EMAIL_COUNT = (
    re.compile(rf"\b(?:last|latest|newest|recent|top|first)\s+(?P<n>{_NUMBER})\b", re.IGNORECASE),
    re.compile(rf"\b(?P<n>\d{{1,3}})\s+(?:new(?:est)?\s+|latest\s+|recent\s+|last\s+|unread\s+)?{_MAIL}",
               re.IGNORECASE),
)


def clean(text: str) -> str:
    """One line, single spaces, straight apostrophes, no closing punctuation or trailing "please"."""
    flat = " ".join(text.replace("’", "'").split()).rstrip(".!?").strip()
    return _PLEASE.sub("", flat).strip()


def _stamp(moment: datetime) -> str:
    return iso(moment)


def _zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or str(zone)


def _title(text: str) -> str:
    text = text.strip(" ,;:-")
    return text[:1].upper() + text[1:]


def split_when(text: str, now: datetime) -> tuple[str, Moment | None]:
    """``text`` without its time phrase, and the moment: the longest phrase at the end ("call mom
    at 5pm"), else at the start ("tomorrow at 9 to call mom"); ``(text, None)`` without one."""
    words = text.split(" ")
    for i in range(len(words)):
        moment = parse_moment(" ".join(words[i:]), now)
        if moment is not None:
            return " ".join(words[:i]), moment
    for j in range(len(words) - 1, 0, -1):
        moment = parse_moment(" ".join(words[:j]), now)
        if moment is not None:
            return " ".join(words[j:]), moment
    return text, None


_LEADING = re.compile(r"^(?:to|that|about|of|for|:)\s+", re.IGNORECASE)


def _help(text: str, now: datetime) -> ParsedCommand | None:
    return ParsedCommand.of({"type": "help"}, PATTERN_CONFIDENCE, "pattern") if _HELP.match(text) else None


def _briefing(text: str, now: datetime) -> ParsedCommand | None:
    return ParsedCommand.of({"type": "briefing"}, PATTERN_CONFIDENCE, "pattern") if _BRIEFING.match(text) else None


def _reminder(text: str, now: datetime) -> ParsedCommand | None:
    match = _REMINDER.match(text)
    if not match:
        return None
    rest, moment = split_when(_LEADING.sub("", (match.group("rest") or "").strip()), now)
    what = _LEADING.sub("", rest.strip()).strip(" ,;:") or None
    command = {"type": "reminder", "text": what, "at": _stamp(moment.start) if moment else None,
               "timezone": _zone_name(now.tzinfo)}
    complete = what is not None and moment is not None
    return ParsedCommand.of(command, PATTERN_CONFIDENCE if complete else INCOMPLETE_CONFIDENCE, "pattern")


def _task(text: str, now: datetime) -> ParsedCommand | None:
    match = next((m for m in (p.match(text) for p in _TASKS) if m), None)
    if not match:
        return None
    rest, moment = split_when(match.group("rest"), now)
    title = _title(_ARTICLE.sub("", rest.strip()))
    if not title:
        return None
    return ParsedCommand.of({"type": "task", "title": title, "due": _stamp(moment.start) if moment else None,
                             "timezone": _zone_name(now.tzinfo)}, PATTERN_CONFIDENCE, "pattern")


def event_times(moment: Moment) -> tuple[datetime, datetime, bool]:
    """(start, end, all_day) of an event said as ``moment``: a day without a time is all-day."""
    if not moment.has_time:
        day = moment.start.date()
        start = datetime.combine(day, datetime.min.time(), tzinfo=moment.start.tzinfo)
        end = datetime.combine(moment.end.date() if moment.end else day + timedelta(days=1),
                               datetime.min.time(), tzinfo=moment.start.tzinfo)
        return start, max(end, start + timedelta(days=1)), True
    end = moment.end or (moment.start + timedelta(minutes=DEFAULT_EVENT_MINUTES))
    return moment.start, end, False


def _event(title: str, moment: Moment, zone: tzinfo) -> dict[str, Any]:
    start, end, all_day = event_times(moment)
    return {"type": "calendar_event", "title": title, "start": _stamp(start), "end": _stamp(end),
            "all_day": all_day, "timezone": _zone_name(zone)}


def _calendar_event(text: str, now: datetime) -> ParsedCommand | None:
    match = _EVENT.match(text)
    if not match:
        return None
    rest = _CALENDAR_MENTION.sub(" ", match.group("rest")).strip()
    rest, moment = split_when(rest, now)
    title = _title(_ARTICLE.sub("", _EVENT_NAMED.sub("", rest.strip())))
    if moment is None or not title:
        return None
    return ParsedCommand.of(_event(title, moment, now.tzinfo), PATTERN_CONFIDENCE, "pattern")


def _send_email(text: str, now: datetime) -> ParsedCommand | None:
    match = _SEND_EMAIL.match(text)
    if not match:
        return None
    to = [a.strip() for a in re.split(r"\s*(?:,|\band\b)\s*", match.group("to")) if a.strip()]
    return ParsedCommand.of({"type": "send_email", "to": to, "subject": match.group("subject"),
                             "body": match.group("body")}, PATTERN_CONFIDENCE, "pattern")


def _without_period(text: str, now: datetime) -> str:
    """``text`` without a closing time phrase ("... in Paris for the weekend" -> "... in Paris")."""
    words = text.split(" ")
    for i in range(1, len(words)):
        suffix = _PERIOD_WORDS.sub("", " ".join(words[i:]))
        if suffix and parse_period(suffix, now) is not None:
            return " ".join(words[:i])
    return text


def _weather_place(text: str, now: datetime) -> str | None:
    text = text.strip()
    while (stripped := _without_period(_WEATHER_NOW.sub("", text), now)) != text:
        text = stripped
    for pattern in (_WEATHER_IN, _WEATHER_AFTER, _WEATHER_BEFORE):
        match = pattern.search(text)
        if match:
            place = re.sub(r"^the\s+", "", match.group("place").strip(), flags=re.IGNORECASE).strip()
            if place and place.lower() not in _NOT_PLACES and parse_period(place, now) is None and len(place) <= 100:
                return place
    return None


def _weather(text: str, now: datetime) -> ParsedCommand | None:
    if not _WEATHER.search(text):
        return None
    return ParsedCommand.of({"type": "weather", "location": _weather_place(text, now)}, PATTERN_CONFIDENCE,
                            "pattern")


def _calendar(text: str, now: datetime) -> ParsedCommand | None:
    for pattern in _CALENDAR_QUERIES:
        match = pattern.match(text)
        if match:
            period = parse_period(match.group("rest").strip(" ,"), now)
            if period is not None:
                start, days = period
                return ParsedCommand.of({"type": "calendar", "start": start.isoformat(), "days": days},
                                        PATTERN_CONFIDENCE, "pattern")
    return None


def _emails(text: str, now: datetime) -> ParsedCommand | None:
    match = _EMAILS.match(text)
    if not match:
        return None
    rest = match.group("rest")
    count = DEFAULT_EMAILS
    for pattern in _EMAIL_COUNT:
        found = pattern.search(text)
        if found:
            raw = found.group("n").lower()
            count = min(max(int(raw) if raw.isdigit() else NUMBER_WORDS.get(raw, DEFAULT_EMAILS), 1), MAX_EMAILS)
            rest = rest.replace(found.group(0), " ") if found.group(0) in rest else rest
            break
    if not _EMAIL_FILLER.match(rest):
        return None  # "any emails from Bob about the invoice" is a search, not the inbox
    return ParsedCommand.of({"type": "emails", "count": count}, PATTERN_CONFIDENCE, "pattern")


PATTERNS: tuple[Callable[[str, datetime], ParsedCommand | None], ...] = (
    _help, _briefing, _reminder, _task, _send_email, _calendar_event, _weather, _calendar, _emails,
)


def match_pattern(text: str, now: datetime) -> ParsedCommand | None:
    """The first quick pattern that understands ``text`` (already :func:`clean`)."""
    for pattern in PATTERNS:
        found = pattern(text, now)
        if found is not None:
            return found
    return None


# --- the model -----------------------------------------------------------------------------------

TOOL_NAME = "record_command"
TOOL_DESCRIPTION = "Record the command the user's sentence asks for."
# Four required fields in a fixed order: a grammar of required properties is a plain sequence,
# decoded in seconds; optional properties multiply the grammar's alternatives and make llama.cpp's
# constrained sampling minutes slower. "what" and "when" come before "type" so the model has named
# the subject and the time before it picks the kind of command.
MODEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "what": {"type": "string", "maxLength": 60,
                 "description": "The subject: the event title, the task, what to be reminded of, the place for "
                                "weather, the address for send_email, the number of e-mails; empty if none."},
        "when": {"type": "string", "maxLength": 40,
                 "description": "The time words exactly as the user said them; empty if none."},
        "type": {"type": "string", "enum": [t.value for t in CommandType]},
        "confidence": {"type": "number", "description": "How sure you are, 0 to 1."},
    },
    "required": ["what", "when", "type", "confidence"],
    "additionalProperties": False,
}
SYSTEM_PROMPT = """You turn the user's sentence into one command for a personal assistant. Answer only by \
calling {tool}.

Fields: "what": the subject (the event title, the task, what to be reminded of, the place for weather, the \
address for send_email; "" if none). "when": the time words exactly as the user said them ("" if none). \
"type": one of calendar_event (put something in the calendar: an appointment, a meeting, a visit), reminder \
(remind the user of something), task (a to-do), weather, calendar (what is planned), emails (read e-mail), \
send_email, briefing, help, unknown (anything else). "confidence": 0 to 1.

Examples:
"lunch with Sam on Friday at noon" -> {{"what": "Lunch with Sam", "when": "Friday at noon", "type": \
"calendar_event", "confidence": 0.9}}
"don't let me forget the keys tonight" -> {{"what": "the keys", "when": "tonight", "type": "reminder", \
"confidence": 0.8}}
"will I need a coat in Rome" -> {{"what": "Rome", "when": "", "type": "weather", "confidence": 0.8}}
"what is the capital of France" -> {{"what": "", "when": "", "type": "unknown", "confidence": 0.9}}

Now is {now} ({zone})."""
_ADDRESS = re.compile(r"[^\s@,;<>]+@[^\s@,;<>]+\.[^\s@,;<>]+")
_DIGITS = re.compile(r"\d+")


def _text(data: dict[str, Any], key: str, limit: int = 500) -> str | None:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return " ".join(value.split())[:limit]


def _moment_of(words: str | None, now: datetime) -> Moment | None:
    """A time the model gave: words the user said ("tomorrow at 3pm") or ISO 8601."""
    if not words:
        return None
    found = parse_moment(words, now)
    if found is not None:
        return found
    try:
        moment = datetime.fromisoformat(words.strip())
    except ValueError:
        return None
    if len(words.strip()) > 10:
        moment = moment.replace(tzinfo=now.tzinfo) if moment.tzinfo is None else moment.astimezone(now.tzinfo)
        return Moment(moment, True)
    return Moment(datetime.combine(moment.date(), datetime.min.time(), tzinfo=now.tzinfo), False)


def command_from_model(data: dict[str, Any] | None, now: datetime) -> dict[str, Any] | None:
    """The command the model's ``{what, when, type, confidence}`` describes, checked field by field;
    None when it describes nothing usable (an unknown type, an event without a title or a time, a
    reminder or task without a subject, an e-mail without an address)."""
    if not isinstance(data, dict):
        return None
    try:
        kind = CommandType(str(data.get("type", "")).strip().lower())
    except ValueError:
        return None
    what, when = _text(data, "what"), _text(data, "when")
    zone = _zone_name(now.tzinfo)
    if kind is CommandType.UNKNOWN:
        return None
    if kind in (CommandType.BRIEFING, CommandType.HELP):
        return {"type": kind.value}
    if kind is CommandType.WEATHER:
        return {"type": "weather", "location": what[:100] if what else None}
    if kind is CommandType.CALENDAR:
        start, days = parse_period(when or "", now) or (now.date(), 1)
        return {"type": "calendar", "start": start.isoformat(), "days": days}
    if kind is CommandType.EMAILS:
        number = _DIGITS.search(f"{what or ''} {when or ''}")
        count = min(max(int(number.group(0)), 1), MAX_EMAILS) if number else DEFAULT_EMAILS
        return {"type": "emails", "count": count}
    if kind is CommandType.SEND_EMAIL:
        to = _ADDRESS.findall(what or "")
        return {"type": "send_email", "to": to, "subject": None, "body": None} if to else None
    if what is None:
        return None
    moment = _moment_of(when, now)
    if kind is CommandType.CALENDAR_EVENT:
        return None if moment is None else _event(_title(what), moment, now.tzinfo)
    if kind is CommandType.REMINDER:
        return {"type": "reminder", "text": what, "at": _stamp(moment.start) if moment else None, "timezone": zone}
    return {"type": "task", "title": _title(what), "due": _stamp(moment.start) if moment else None,
            "timezone": zone}


def model_confidence(data: dict[str, Any]) -> float:
    value = data.get("confidence")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return MODEL_DEFAULT_CONFIDENCE
    return min(max(float(value), 0.0), MODEL_MAX_CONFIDENCE)


def read_model_answer(data: dict[str, Any] | None, said: str, now: datetime) -> ParsedCommand:
    """The parse of ``said`` that the model's ``data`` describes: checked field by field, and its
    confidence scaled by how much of it ``said`` supports (not understood when nothing does)."""
    command = command_from_model(data, now)
    if command is None or data is None:
        return ParsedCommand.not_understood("model")
    share = grounding(command["type"], _text(data, "what"), _text(data, "when"), said, command.get("to"))
    if share <= 0:
        return ParsedCommand.not_understood("model")
    return ParsedCommand.of(command, model_confidence(data) * share, "model")


# --- the parser ----------------------------------------------------------------------------------


@dataclass
class CommandParser:
    """Patterns first; the model (through the inference queue) when none matches. ``queue=None``
    parses with the patterns only. ``zone`` is the user's time zone; ``clock`` gives now (UTC)."""

    queue: InferenceQueue | None
    zone: tzinfo
    clock: Callable[[], datetime] = field(default=utcnow)
    max_tokens: int = 96  # the four fields take about 40 tokens
    timeout_secs: float | None = 20.0  # the model's turn, queue wait included; None: unbounded

    def now(self) -> datetime:
        return self.clock().astimezone(self.zone)

    async def parse(self, text: str) -> ParsedCommand:
        if not isinstance(text, str) or not text.strip():
            raise ValidationFailed("input: must not be empty", [{"field": "input", "error": "must not be empty"}])
        if len(text) > MAX_INPUT_CHARS:
            raise ValidationFailed(f"input: at most {MAX_INPUT_CHARS} characters",
                                   [{"field": "input", "error": f"at most {MAX_INPUT_CHARS} characters "
                                                                f"(got {len(text)})"}])
        now = self.now()
        said = clean(text) or text.strip()  # "?" alone stays "?"
        found = match_pattern(said, now)
        if found is not None:
            return found
        if self.queue is None or not has_words(said):
            return ParsedCommand.not_understood()
        try:
            async with asyncio.timeout(self.timeout_secs):
                return await self.ask_model(said, now)
        except TimeoutError:
            raise ServiceUnavailableError(
                f"the model did not parse the sentence within {self.timeout_secs:g} s "
                "([commands] parse_timeout_secs)") from None

    async def ask_model(self, text: str, now: datetime) -> ParsedCommand:
        system = SYSTEM_PROMPT.format(tool=TOOL_NAME, now=now.strftime("%A %Y-%m-%d %H:%M"),
                                      zone=_zone_name(self.zone))
        messages = [ChatMessage("system", system), ChatMessage("user", text)]
        data = await ask_json(self.queue, messages, TOOL_NAME, TOOL_DESCRIPTION, MODEL_SCHEMA,
                              max_tokens=self.max_tokens)
        return read_model_answer(data, text, now)

