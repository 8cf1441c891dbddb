"""Date- and time-typed tool arguments (issue 20, part of :mod:`assistant.chat.arguments`): which
parameters take a date or time, in which format, and what a value becomes once grounded by
:mod:`assistant.commands.when` rather than by the model.

A parameter is date/time-typed when its schema says ``"format": "date-time" | "date" | "time"``,
when its description names a format (a strftime pattern "%Y-%m-%d %H:%M:%S" or an example
"YYYY-MM-DD HH:MM") or says "ISO 8601" (then any ISO shape will do, and a day alone is a date), or when it is a string whose name is or ends with one of :data:`DATE_NAMES`
(``time``, ``start_time``, ``dueDate``). Values are written in the format named, else in ISO 8601
(a date-time with now's offset, a date, or ``HH:MM``; ``HH:MM:SS+01:00`` for the schema's RFC 3339
``time``), else, when the model's own value is ISO-like, in that value's own shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, time
from typing import Any, Literal

from assistant.commands.when import FoundMoment, Moment, find_moments, parse_moment

Kind = Literal["date-time", "date", "time"]

# Name words of the two ends of an interval given as two arguments (start_time / end_time).
START_WORDS = frozenset({"start", "begin", "beginning"})
END_WORDS = frozenset({"end", "finish"})
# The last word of a string parameter's name that makes it date/time-typed, and what it holds.
DATE_NAMES: dict[str, Kind] = {"time": "date-time", "datetime": "date-time", "date": "date", "deadline": "date-time",
                               "start": "date-time", "end": "date-time", "due": "date-time", "when": "date-time"}
_STRFTIME = re.compile(r"%[a-zA-Z](?:[-/:.,\sT]{0,3}%[a-zA-Z])*")
_EXAMPLE = re.compile(r"(?<![a-z])(?:(?:yyyy[-/.]mm[-/.]dd|dd[-/.]mm[-/.]yyyy|mm[-/.]dd[-/.]yyyy)(?:[ T]hh:mm(?::ss)?)?"
                      r"|hh:mm(?::ss)?)(?=z?(?![a-z]))", re.IGNORECASE)  # a zone designator Z is not part of it
_ISO = re.compile(r"\bISO[- ]?8601\b", re.IGNORECASE)
_DATE_ONLY = re.compile(r"^(?!.*\b(?:time|moment|hour|T?\d{1,2}:\d{2})).*\bdate\b", re.IGNORECASE | re.DOTALL)
# A description that allows a date alone: "ISO 8601 date (2024-05-01) or date-time", "(2024-05-01 or ...)"
_DAY_ALONE = re.compile(r"\bdate\b(?!\s*(?:-|and|&)?\s*time)|\d{4}-\d{2}-\d{2}(?![T ]?\d{1,2}:\d{2})", re.IGNORECASE)
# A zone designator after a value ("...T16:00:00Z", "+01:00"): extra information a value may carry.
_ZONE = re.compile(r"(?:Z|[+-]\d{2}:?\d{2})$")
_EXAMPLE_CODES = (("YYYY", "%Y"), ("HH", "%H"), ("SS", "%S"), ("DD", "%d"))
# ISO-like shapes a value may have when no format is named (written back in its own shape).
_SHAPES = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d",
           "%H:%M:%S", "%H:%M")
_CODE_FIELDS = {"Y": "year", "y": "year", "m": "month", "b": "month", "B": "month", "d": "day", "j": "day",
                "H": "time", "I": "time", "M": "time"}
# The user's newest messages searched for their words and time phrases (older ones are about other things).
RECENT_MESSAGES = 10
KIND_FIELDS: dict[str, frozenset[str]] = {"date-time": frozenset({"year", "month", "day", "time"}),
                                          "date": frozenset({"year", "month", "day"}), "time": frozenset({"time"})}


@dataclass(frozen=True)
class DateParam:
    """How a date/time parameter is written: its kind and a strftime format (None: ISO 8601)."""

    kind: Kind
    fmt: str | None = None
    rfc3339: bool = False  # the schema's "format": "time" (RFC 3339 full-time: seconds and offset)
    declared: bool = True  # the schema or the description names the format (else: only the name says "date")
    day_alone: bool = False  # a day said without a time may be written as an ISO date ("due": "tomorrow")

    @property
    def fields(self) -> frozenset[str]:
        if self.fmt is None:
            return KIND_FIELDS[self.kind]
        return frozenset(_CODE_FIELDS[c] for c in re.findall(r"%([a-zA-Z])", self.fmt) if c in _CODE_FIELDS)

    def write(self, moment: datetime, shape: str | None = None) -> str:
        """``moment`` in this parameter's format (``shape``: the model value's own, when none is named)."""
        if self.fmt:
            return moment.strftime(self.fmt)
        if shape:
            return moment.strftime(shape)
        if self.kind == "date":
            return moment.date().isoformat()
        if self.kind == "time":
            if not self.rfc3339:
                return moment.strftime("%H:%M")
            offset = moment.strftime("%z") or "+0000"
            return f"{moment:%H:%M:%S}{offset[:3]}:{offset[3:]}"
        return moment.isoformat(timespec="seconds")


def _name_words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[\s_\-]+", spaced.lower()) if w]


def _example_format(example: str) -> str:
    """"YYYY-MM-DD HH:mm:ss" as a strftime format (any case; MM after an hour is the minute)."""
    out = example.upper()
    for code, directive in _EXAMPLE_CODES:
        out = out.replace(code, directive)
    # MM is the minute after an hour ("HH:MM"), else the month
    return re.sub(r"MM", lambda m: "%M" if out[:m.start()].endswith("%H:") else "%m", out)


def _kind_of(fmt: str) -> Kind:
    has_time = bool(re.search(r"%[HIM]", fmt))
    has_date = bool(re.search(r"%[YymdbBj]", fmt))
    return "date-time" if has_time and has_date else "time" if has_time else "date"


def date_param(name: str, schema: dict[str, Any]) -> DateParam | None:
    """The date/time typing of a parameter, or None when it is not date/time-typed."""
    if not isinstance(schema, dict) or schema.get("enum"):
        return None
    kind_type = schema.get("type", "string")
    if kind_type != "string" and not (isinstance(kind_type, list) and "string" in kind_type):
        return None
    description = str(schema.get("description") or "")
    patterns = _STRFTIME.findall(description) + [_example_format(e) for e in _EXAMPLE.findall(description)]
    schema_format = schema.get("format")
    if len(patterns) > 1:  # "%Y-%m-%d to %Y-%m-%d": a range in one string, not one date
        return None
    if patterns:
        return DateParam(_kind_of(patterns[0]), patterns[0])
    if schema_format in ("date-time", "date", "time"):
        return DateParam(schema_format, rfc3339=schema_format == "time")
    if schema_format is not None:
        return None
    if _ISO.search(description):  # "ISO 8601 date-time (2024-05-01T14:30)": any ISO 8601 shape is fine
        kind: Kind = "date" if _DATE_ONLY.search(description) else "date-time"
        return DateParam(kind, declared=False, day_alone=bool(_DAY_ALONE.search(description)))
    words = _name_words(name)
    if not words or words[-1] not in DATE_NAMES:
        return None
    return DateParam(DATE_NAMES[words[-1]], declared=False, day_alone=words[-1] not in ("time", "datetime"))


def parse_absolute(value: str, param: DateParam) -> tuple[datetime, str | None] | None:
    """A value written as an absolute date/time: (the moment, the shape it was written in; None for
    ISO with an offset), or None."""
    text = value.strip()
    for shape in ([param.fmt] if param.fmt else []) + list(_SHAPES):
        try:
            return datetime.strptime(text, shape), shape
        except ValueError:
            continue
    try:
        return datetime.fromisoformat(text), None
    except ValueError:
        return None


def fits(value: str, param: DateParam) -> bool:
    """Whether ``value`` is written as this parameter asks (a named format, or ISO 8601)."""
    if param.fmt:
        text = value.strip()
        for candidate in (text, _ZONE.sub("", text)):
            try:
                datetime.strptime(candidate, param.fmt)
            except ValueError:
                continue
            return True
        return False
    parsers = {"date-time": datetime.fromisoformat, "date": date.fromisoformat, "time": time.fromisoformat}
    try:
        parsers[param.kind](value.strip())
    except ValueError:
        return False
    return True


def _with(moment: datetime, source: datetime, fields: frozenset[str]) -> datetime | None:
    """``moment`` with the ``fields`` of ``source`` (None when the result is no real date: Feb 30)."""
    parts = {}
    if "year" in fields:
        parts["year"] = source.year
    if "month" in fields:
        parts["month"] = source.month
    if "day" in fields:
        parts["day"] = source.day
    if "time" in fields:
        parts |= {"hour": source.hour, "minute": source.minute, "second": 0}
    try:
        return moment.replace(**parts)
    except ValueError:
        return None


def _shape_fields(shape: str | None) -> frozenset[str]:
    return KIND_FIELDS["date-time"] if shape is None else DateParam("date-time", shape).fields


def resolve(value: str, param: DateParam, now: datetime) -> tuple[str, Moment] | None:
    """A value that is not absolute but a phrase :mod:`when` understands ("tomorrow at 3pm"),
    written in the parameter's format; None otherwise."""
    moment = parse_moment(value, now)
    if moment is None:
        return None
    if not moment.has_time and param.kind == "date-time" and param.day_alone:
        return moment.start.date().isoformat(), moment  # "tomorrow" is a day (ISO 8601 allows a date alone)
    return param.write(moment.start), moment


def reformat(value: str, param: DateParam) -> str | None:
    """An absolute value in another ISO-like shape than the one the parameter names, rewritten."""
    if not param.fmt or fits(value, param):
        return None
    found = parse_absolute(value, param)
    if found is None:
        return None
    moment, shape = found
    holds = _shape_fields(shape)
    dropped = holds - param.fields
    if param.fields - holds:
        return None  # "15:30" is no date-time: resolved as a phrase instead
    if dropped - {"time"} or ("time" in dropped and moment.time() != time(0)):
        return None  # "2023-03-25 14:00:00" is not rewritten as "%Y-%m-%d": the 14:00 would be lost
    written = param.write(moment)
    return written if written != value else None


_TODAY_IS = re.compile(r"\btoday(?:'s date)?\s+is\s+", re.IGNORECASE)


def _is_date(found: FoundMoment) -> bool:
    """A calendar date written out ("2021-09-27", "March 3rd"), not a relative day ("monday")."""
    return {"month", "day"} <= found.fields and any(ch.isdigit() for ch in found.text)


def _today_statements(message: str, found: list[FoundMoment]) -> list[tuple[int, int]]:
    """The character spans of "today is <date>" statements in a message."""
    spans = []
    for said in _TODAY_IS.finditer(message.replace("’", "'")):
        date_said = next((f for f in found if f.start == said.end()), None)
        if date_said is not None and _is_date(date_said):
            spans.append((said.start(), date_said.end))
    return spans


def stated_today(user_text: list[str], now: datetime) -> datetime | None:
    """The day the user says it is ("Today is 2021-09-27"; the newest such statement), at now's time
    of day and zone: the reference relative phrases are resolved against in that conversation."""
    for message in reversed(user_text[-RECENT_MESSAGES:]):
        for said in _TODAY_IS.finditer(message.replace("’", "'")):
            found = find_moments(message[said.end():], now)
            if found and found[0].start == 0 and _is_date(found[0]):
                return datetime.combine(found[0].moment.start.date(), now.timetz())
    return None


def user_phrase(param: DateParam, user_text: list[str], now: datetime) -> FoundMoment | None:
    """The user's phrase a value of this parameter must agree with: the one phrase stating a field
    the parameter holds in the newest user message that has any (None when that message has
    several: which one the value is about is not clear)."""
    for message in reversed(user_text[-RECENT_MESSAGES:]):
        found = find_moments(message, now)
        told = _today_statements(message, found)  # "Today is 2021-10-13" says what today is, not when
        relevant = [f for f in found if f.fields & param.fields and not any(a <= f.start < b for a, b in told)]
        if relevant:
            return relevant[0] if len(relevant) == 1 else None
    return None


def phrases_for(params: dict[str, DateParam], user_text: list[str], now: datetime) -> dict[str, FoundMoment]:
    """The user's phrase each date/time argument must agree with. With one date/time argument, the
    phrase of :func:`user_phrase`; with two that are the start and the end of an interval, a phrase
    with an end ("from 2pm to 4pm", "at 3 for an hour") gives both; otherwise none (which argument a
    phrase is about is not clear)."""
    if len(params) == 1:
        (name, param), = params.items()
        phrase = user_phrase(param, user_text, now)
        return {name: phrase} if phrase is not None else {}
    if len(params) != 2:
        return {}
    starts = [n for n in params if set(_name_words(n)) & START_WORDS]
    ends = [n for n in params if set(_name_words(n)) & END_WORDS]
    if len(starts) != 1 or len(ends) != 1 or starts == ends:
        return {}
    phrase = user_phrase(params[starts[0]], user_text, now)
    if phrase is None or phrase.moment.end is None:
        return {}
    end = replace(phrase, moment=Moment(phrase.moment.end, True))
    return {starts[0]: phrase, ends[0]: end}


def disagreement(value: str, param: DateParam, phrase: FoundMoment, now: datetime) -> str | None:
    """The value corrected to what ``phrase`` states, when an absolute ``value`` differs from it in a
    field the phrase states (the other fields stay the model's); None when they agree."""
    found = parse_absolute(value, param)
    if found is None:
        return None
    written, shape = found
    local = written.astimezone(now.tzinfo).replace(tzinfo=None) if written.tzinfo else written
    said = phrase.moment.start.replace(tzinfo=None)
    fields = phrase.fields & param.fields & _shape_fields(shape)
    corrected = _with(local, said, fields)
    if corrected is None or corrected == local:
        return None
    if written.tzinfo is not None:
        corrected = corrected.replace(tzinfo=now.tzinfo)
    return param.write(corrected, None if param.fmt else shape)
