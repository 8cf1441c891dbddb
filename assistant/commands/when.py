"""Dates and times as people say them ("tomorrow at 3pm", "next Monday", "in 2 hours", "tonight"),
resolved relative to ``now`` in the user's time zone (the zone of ``now``).

    now = datetime(2026, 11, 11, 10, 0, tzinfo=ZoneInfo("Europe/Berlin"))      # a Wednesday
    parse_moment("tomorrow at 3pm for an hour", now)
    # Moment(start=2026-11-12 15:00+01:00, has_time=True, end=2026-11-12 16:00+01:00)
    parse_period("next week", now)                                               # (2026-11-16, 7)

A phrase is a sequence of parts, in any order and each at most once (commas and "and" between
them are ignored); anything else in it means it is not a time phrase and the answer is None:

- a day (optionally after "on" or "by"): ``today``, ``tonight``, ``tomorrow``, ``the day after
  tomorrow``, ``friday``, ``on friday``, ``next friday``, ``next week``, ``this weekend``,
  ``12 march``, ``march 12th 2027``, ``the 20th``, ``2026-12-24``;
- a time: ``at 3pm``, ``3:30 pm``, ``at 15:00``, ``at 9``, ``noon``, ``midnight``; a part of the day:
  ``in the morning``, ``afternoon``, ``this evening``, ``at night``;
- an offset: ``in 2 hours``, ``in half an hour``, ``in an hour and a half``, ``in 3 days``,
  ``2 weeks from now``;
- an end: ``until 5pm``, ``to 4:30``, ``- 16:30``; a length: ``for an hour``, ``for 90 minutes``.

Rules:

- A weekday alone (``friday``, ``on friday``, ``this friday``) is the next such day, today
  included while the time said is still ahead; ``next friday`` is the Friday of next week (the
  week that starts next Monday), and ``next week`` is next Monday.
- A time without a day is today when still ahead, else tomorrow (``today at 9`` stays today).
  ``midnight`` is the end of the day: 00:00 of the next one.
- A bare hour from 1 to 7 without am/pm and not written as ``07:00`` is afternoon (a meeting "at 3"
  is at 15:00); with ``afternoon``, ``evening``, ``night`` or ``tonight`` any hour before 12 is p.m.
  An end without am/pm is the first of its a.m. and p.m. readings after the start ("from 9 to 5"
  ends at 17:00, "at 11pm until 1" at 01:00).
- A day without a time is at the part of the day when given (morning 09:00, afternoon 15:00,
  evening 19:00, night and tonight 20:00), else at ``default_time`` (09:00), and ``has_time`` is
  False for the latter.
- ``in N minutes/hours`` is elapsed time (right across a daylight-saving change); ``in N
  days/weeks/months`` keeps the time of day (now's, unless a time is given).
- A date without a year is the next such date: this year, or next year when it has passed.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from dateutil.relativedelta import relativedelta

DEFAULT_TIME = time(9, 0)
PART_TIMES = {"morning": time(9), "afternoon": time(15), "evening": time(19), "night": time(20)}
MAX_PERIOD_DAYS = 366

NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "forty-five": 45, "forty five": 45, "ninety": 90, "a couple of": 2, "a few": 3,
}
_WEEKDAYS = {
    "monday": 0, "mon": 0, "tuesday": 1, "tues": 1, "tue": 1, "wednesday": 2, "wed": 2, "thursday": 3,
    "thurs": 3, "thur": 3, "thu": 3, "friday": 4, "fri": 4, "saturday": 5, "sat": 5, "sunday": 6, "sun": 6,
}
_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4, "apr": 4, "may": 5,
    "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sept": 9, "sep": 9,
    "october": 10, "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
}
_UNITS = {"minute": "minutes", "minutes": "minutes", "min": "minutes", "mins": "minutes", "m": "minutes",
          "hour": "hours", "hours": "hours", "hr": "hours", "hrs": "hours", "h": "hours",
          "day": "days", "days": "days", "week": "weeks", "weeks": "weeks", "wk": "weeks", "wks": "weeks",
          "month": "months", "months": "months"}


def _alternatives(words: Any) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


_END = r"(?=$|[\s,\-–])"
_NUM = rf"(?P<num>\d+(?:\.\d+)?|{_alternatives(NUMBER_WORDS)})"
_UNIT = rf"(?P<unit>{_alternatives(_UNITS)})"
_AMOUNT = rf"(?:(?P<half>half\s+an?)\s+|{_NUM}\s*){_UNIT}(?P<and_half>\s+and\s+a\s+half)?"
_CLOCK = r"(?P<h>\d{1,2})(?:[:.](?P<min>\d{2}))?\s*(?P<mer>[ap]\.?m\.?)?(?P<oclock>\s*o'?clock)?"
_WEEKDAY = rf"(?P<wd>{_alternatives(_WEEKDAYS)})"
_MONTH = rf"(?P<mon>{_alternatives(_MONTHS)})"
_ORDINAL = r"(?P<d>\d{1,2})(?:st|nd|rd|th)?"

_PARTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(pattern + _END)) for name, pattern in (
    ("offset", rf"in\s+{_AMOUNT}"),
    ("offset", rf"{_AMOUNT}\s+from\s+now"),
    ("duration", rf"for\s+{_AMOUNT}"),
    ("day_after", r"(?:the\s+)?day\s+after\s+tomorrow"),
    ("tomorrow", r"(?:by\s+)?(?:tomorrow|tmrw)"),
    ("today", r"(?:by\s+)?today"),
    ("tonight", r"tonight"),
    ("this_part", r"this\s+(?P<part>morning|afternoon|evening)"),
    ("part", r"(?:in\s+the\s+|at\s+)?(?P<part>morning|afternoon|evening|night)"),
    ("next_week", r"next\s+week"),
    ("weekend", r"(?:on\s+|at\s+)?(?:the\s+)?(?:(?P<which>this|next)\s+)?weekend"),
    ("weekday", rf"(?:(?:on|by)\s+)?(?:(?P<which>this|next|coming)\s+)?{_WEEKDAY}"),
    ("iso_date", r"(?:(?:on|by)\s+)?(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})"),
    ("date", rf"(?:(?:on|by)\s+)?(?:the\s+)?{_ORDINAL}\s+(?:of\s+)?{_MONTH}(?:,?\s+(?P<y>\d{{4}}))?"),
    ("date", rf"(?:(?:on|by)\s+)?{_MONTH}\s+(?:the\s+)?{_ORDINAL}(?:,?\s+(?P<y>\d{{4}}))?"),
    ("day_of_month", r"(?:(?:on|by)\s+)?the\s+(?P<d>\d{1,2})(?:st|nd|rd|th)"),
    ("named_time", r"(?:at\s+|by\s+|around\s+)?(?P<name>noon|midday|midnight)"),
    ("time", rf"(?:(?P<at>at|by|around|from|@)\s*)?{_CLOCK}"),
    ("until", rf"(?:until|till|til|to|-|–)\s*(?:{_CLOCK}|(?P<name>noon|midday|midnight))"),
))
_SEPARATOR = re.compile(r"^(?:,\s*|and\s+)")


def normalize(text: str) -> str:
    """Lower case, straight apostrophes, single spaces, no closing punctuation."""
    flat = " ".join(text.replace("’", "'").lower().split())
    return flat.rstrip(".!?").strip()


@dataclass(frozen=True)
class Moment:
    """A resolved time phrase: ``start`` (aware, in the zone of ``now``), whether a time of day was
    said, and an ``end`` when the phrase gave one (``until 5pm``, ``for an hour``)."""

    start: datetime
    has_time: bool
    end: datetime | None = None


@dataclass
class _Said:
    day: date | None = None
    today_said: bool = False
    clock: re.Match[str] | None = None  # a time part: resolved once the part of the day is known
    named: str | None = None  # noon, midday, midnight
    weekday: bool = False  # the day is a plain weekday ("friday"): next week's when today's has passed
    part: str | None = None
    offset: tuple[float, str] | None = None
    duration: timedelta | None = None
    until: re.Match[str] | None = None


def _parts(text: str) -> list[tuple[str, re.Match[str]]] | None:
    rest, found = normalize(text), []
    while rest:
        rest = _SEPARATOR.sub("", rest)
        for name, pattern in _PARTS:
            match = pattern.match(rest)
            if match and (name != "time" or _is_clock(match)):
                found.append((name, match))
                rest = rest[match.end():].lstrip()
                break
        else:
            return None
    return found


def _is_clock(match: re.Match[str]) -> bool:
    """A number is a time only with "at"/"by"/..., minutes, am/pm or o'clock ("3" alone is not)."""
    return any(match.group(g) for g in ("at", "min", "mer", "oclock"))


def _amount(match: re.Match[str]) -> tuple[float, str] | None:
    unit = _UNITS[match.group("unit")]
    if match.group("half"):
        return 0.5, unit
    raw = match.group("num")
    value = float(raw) if raw[0].isdigit() else float(NUMBER_WORDS[raw])
    if match.group("and_half"):
        value += 0.5
    return (value, unit) if value > 0 else None


def _delta(value: float, unit: str) -> timedelta:
    return timedelta(**{unit: value}) if unit != "months" else timedelta(days=30 * value)


def _hour(match: re.Match[str], part: str | None) -> tuple[int, int] | None:
    """(hour, minute) of a clock match, with the am/pm rules of the module docstring."""
    raw, minute = match.group("h"), int(match.group("min") or 0)
    hour, meridiem = int(raw), (match.group("mer") or "")[:1]
    if minute > 59:
        return None
    if meridiem:
        if not 1 <= hour <= 12:
            return None
        return hour % 12 + (12 if meridiem == "p" else 0), minute
    if hour > 23:
        return None
    twenty_four = hour == 0 or hour >= 13 or (len(raw) == 2 and raw.startswith("0"))
    late_part = part in ("afternoon", "evening", "night") and hour < 12
    if not twenty_four and (late_part or (part is None and 1 <= hour <= 7)):
        hour += 12
    return hour, minute


def _next_date(month: int, day: int, year: int | None, today: date) -> date | None:
    try:
        found = date(year or today.year, month, day)
        if year is None and found < today:
            found = date(today.year + 1, month, day)
    except ValueError:
        return None
    return found


def _day_of(name: str, match: re.Match[str], today: date) -> date | None:
    """The day a day-part names (None when it names an impossible date)."""
    if name == "day_after":
        return today + timedelta(days=2)
    if name == "tomorrow":
        return today + timedelta(days=1)
    if name in ("today", "tonight", "this_part"):
        return today
    next_monday = today + timedelta(days=7 - today.weekday())
    if name == "next_week":
        return next_monday
    if name == "weekend":
        if match.group("which") == "next":
            return next_monday + timedelta(days=5)
        return today if today.weekday() >= 5 else today + timedelta(days=5 - today.weekday())
    if name == "weekday":
        wanted = _WEEKDAYS[match.group("wd")]
        if match.group("which") == "next":
            return next_monday + timedelta(days=wanted)
        return today + timedelta(days=(wanted - today.weekday()) % 7)
    if name == "iso_date":
        try:
            return date(int(match.group("y")), int(match.group("m")), int(match.group("d")))
        except ValueError:
            return None
    if name == "date":
        year = match.group("y")
        return _next_date(_MONTHS[match.group("mon")], int(match.group("d")), int(year) if year else None, today)
    if name == "day_of_month":
        wanted = int(match.group("d"))
        for months_ahead in range(3):
            first = (today.replace(day=1) + relativedelta(months=months_ahead))
            if wanted <= calendar.monthrange(first.year, first.month)[1]:
                found = first.replace(day=wanted)
                if found >= today:
                    return found
        return None
    raise ValueError(name)  # pragma: no cover


_DAY_PARTS = {"day_after", "tomorrow", "today", "tonight", "this_part", "next_week", "weekend", "weekday",
              "iso_date", "date", "day_of_month"}



class _NotATime(Exception):
    """Raised while resolving a phrase that turns out not to be a time (13pm, 25:00, Feb 30)."""


def _collect(parts: list[tuple[str, re.Match[str]]], today: date) -> _Said:
    said, seen = _Said(), set()
    for name, match in parts:
        kind = "day" if name in _DAY_PARTS else "clock" if name in ("time", "named_time") else name
        if kind in seen:
            raise _NotATime(f"{kind} said twice")  # "tomorrow on friday" is no time
        seen.add(kind)
        if kind == "day":
            said.day = _day_of(name, match, today)
            if said.day is None:
                raise _NotATime("no such date")
            said.weekday = name == "weekday" and match.group("which") != "next"
            implied = "night" if name == "tonight" else match.group("part") if name == "this_part" else None
            if implied:
                if "part" in seen:
                    raise _NotATime("part of the day said twice")
                said.part = implied
                seen.add("part")
        elif name == "part":
            said.part = match.group("part")
        elif name in ("offset", "duration"):
            amount = _amount(match)
            if amount is None:
                raise _NotATime("a zero amount")
            if name == "offset":
                said.offset = amount
            else:
                said.duration = _delta(*amount)
        elif name == "named_time":
            said.named = match.group("name")
        elif name == "time":
            said.clock = match
        else:
            said.until = match
    return said


def _said_time(said: _Said) -> time | None:
    if said.named:
        return time(0) if said.named == "midnight" else time(12)
    if said.clock is None:
        return None
    found = _hour(said.clock, said.part)
    if found is None:
        raise _NotATime("no such time of day")
    return time(*found)


def _until_times(match: re.Match[str]) -> list[time]:
    """The times an end may mean: "until 1" is 01:00 or 13:00, whichever comes first after the start."""
    name = match.group("name")
    if name:
        return [time(0) if name == "midnight" else time(12)]
    raw, minute = match.group("h"), int(match.group("min") or 0)
    hour, meridiem = int(raw), (match.group("mer") or "")[:1]
    twenty_four = hour == 0 or hour >= 13 or (len(raw) == 2 and raw.startswith("0"))
    if minute > 59 or hour > 23 or (meridiem and not 1 <= hour <= 12):
        raise _NotATime("no such end time")
    if meridiem:
        return [time(hour % 12 + (12 if meridiem == "p" else 0), minute)]
    if twenty_four:
        return [time(hour, minute)]
    return [time(hour % 12, minute), time(hour % 12 + 12, minute)]


def _local(day: date, at: time, now: datetime) -> datetime:
    return datetime.combine(day, at, tzinfo=now.tzinfo)


def _elapsed(moment: datetime, delta: timedelta) -> datetime:
    """``moment + delta`` in real time (an hour is an hour across a daylight-saving change)."""
    return (moment.astimezone(UTC) + delta).astimezone(moment.tzinfo)


def _start(said: _Said, clock: time | None, now: datetime, default_time: time) -> tuple[datetime, bool]:
    today = now.date()
    if said.offset is not None:
        value, unit = said.offset
        if unit in ("minutes", "hours") or value != int(value):
            if said.day is not None or clock is not None or said.part is not None:
                raise _NotATime("an elapsed offset with a day or time")  # "tomorrow in 2 hours"
            return _elapsed(now, _delta(value, unit)), True
        if said.day is not None:
            raise _NotATime("an offset in days with a day")
        said.day = today + relativedelta(**{unit: int(value)})
        if clock is None and said.part is None:
            clock = now.time().replace(second=0, microsecond=0, tzinfo=None)
    if said.day is None and clock is None and said.part is None:
        raise _NotATime("only a length or an end")
    has_time = clock is not None or said.part is not None
    at = clock or PART_TIMES.get(said.part or "") or default_time
    day = said.day or today
    if said.named == "midnight":
        day += timedelta(days=1)  # midnight ends the day
    start = _local(day, at, now)
    if start <= now and (said.day is None or said.weekday):
        start = _local(day + timedelta(days=1 if said.day is None else 7), at, now)
    return start, has_time


def parse_moment(text: str, now: datetime, default_time: time = DEFAULT_TIME) -> Moment | None:
    """The moment ``text`` names, relative to ``now`` (aware: its zone is the user's); None when
    ``text`` is not, as a whole, a time phrase."""
    if now.tzinfo is None:
        raise ValueError("now must carry the user's time zone")
    parts = _parts(text)
    if not parts:
        return None
    try:
        said = _collect(parts, now.date())
        start, has_time = _start(said, _said_time(said), now, default_time)
        end = None
        if said.until is not None:
            ends = [_local(start.date(), t, now) for t in _until_times(said.until)]
            end = min(e if e > start else _local(e.date() + timedelta(days=1), e.time(), now) for e in ends)
        if said.duration is not None:
            if end is not None:
                raise _NotATime("both an end and a length")
            end = _elapsed(start, said.duration)
    except _NotATime:
        return None
    return Moment(start, has_time, end)


_PERIOD_PREFIX = re.compile(r"^(?:for|during|over)\s+(?:the\s+)?")
_NEXT_DAYS = re.compile(rf"^(?:the\s+)?(?:next|coming)\s+{_NUM}\s+days$")


def parse_period(text: str, now: datetime) -> tuple[date, int] | None:
    """The days a calendar question covers, as (first day, number of days): ``today`` (also the
    empty phrase), ``tomorrow``, ``this week`` (today through Sunday), ``next week`` (Monday to
    Sunday), ``this weekend``, ``next weekend``, ``the next 3 days``, ``this month`` (through its
    last day), ``next month``, or any day :func:`parse_moment` understands (one day)."""
    said = _PERIOD_PREFIX.sub("", normalize(text))
    today = now.date()
    next_monday = today + timedelta(days=7 - today.weekday())
    if said in ("", "today", "tonight", "now", "this morning", "this afternoon", "this evening"):
        return today, 1
    if said in ("this week", "rest of the week", "rest of this week", "the week", "week"):
        return today, 7 - today.weekday()
    if said == "next week":
        return next_monday, 7
    if said in ("weekend", "this weekend", "the weekend"):
        return (today, 7 - today.weekday()) if today.weekday() >= 5 else (today + timedelta(5 - today.weekday()), 2)
    if said == "next weekend":
        return next_monday + timedelta(days=5), 2
    if said in ("this month", "the month", "rest of the month"):
        return today, calendar.monthrange(today.year, today.month)[1] - today.day + 1
    if said == "next month":
        first = today.replace(day=1) + relativedelta(months=1)
        return first, calendar.monthrange(first.year, first.month)[1]
    match = _NEXT_DAYS.match(said)
    if match:
        raw = match.group("num")
        days = int(raw) if raw.isdigit() else NUMBER_WORDS.get(raw, 0)
        return (today, days) if 1 <= days <= MAX_PERIOD_DAYS else None
    moment = parse_moment(said, now)
    return None if moment is None else (moment.start.date(), 1)


# Time phrases inside free text ("a meeting tomorrow at 2pm with Anna") and what each states, for the
# argument review (assistant/chat/arguments.py).
MAX_PHRASE_WORDS = 8  # the longest phrase the scanner tries ("on the 3rd of december 2027 at 18:30" is 7)
_FULL_DAY = frozenset({"year", "month", "day"})
_RELATIVE_DAYS = {"day_after", "tomorrow", "today", "tonight", "this_part", "next_week", "weekend", "weekday"}
_LEADING = "\"'“‘([{<"
_TRAILING = "\"'”’)]}>.,;:!?"
# Weekday abbreviations that are also English words ("I sat", "the sun"): a time only when capitalised.
_WORDLIKE = {"sat", "sun", "wed", "mon"}
_PART_STARTS = tuple(re.compile(p.pattern.removesuffix(_END)) for _, p in _PARTS)  # a part, whatever follows
_DOTTED_NUMBER = re.compile(r"^\d{1,2}\.\d{2}$")  # 12.50 is a price more often than a time


@dataclass(frozen=True)
class FoundMoment:
    """A time phrase found in a text: the phrase as written, its character span in the text, its
    resolution and the fields it states (see :func:`stated_fields`)."""

    text: str
    start: int
    end: int
    moment: Moment
    fields: frozenset[str]


def stated_fields(text: str) -> frozenset[str]:
    """Which of year, month, day and time a phrase fixes by itself: "tomorrow at 3pm" all four,
    "march 19th" month and day (the year is inferred), "the 20th" the day, "at 3pm" the time (the day
    is inferred), "tonight" or "in the morning" the day or nothing (a part of the day is no clock
    time). Empty when ``text`` is not a time phrase."""
    found: set[str] = set()
    for name, match in _parts(text) or ():
        if name in _RELATIVE_DAYS or name == "iso_date":
            found |= _FULL_DAY
        elif name == "date":
            found |= {"month", "day"} | ({"year"} if match.group("y") else set())
        elif name == "day_of_month":
            found.add("day")
        elif name in ("time", "named_time"):
            found.add("time")
        elif name == "offset":
            amount = _amount(match)
            if amount is not None:
                value, unit = amount
                elapsed = unit in ("minutes", "hours") or value != int(value)
                found |= _FULL_DAY | ({"time"} if elapsed else set())
    return frozenset(found)


def _plausible(phrase: str) -> bool:
    """False for phrases that are more likely ordinary words or numbers in free text."""
    abbreviations = [w for w in phrase.split() if w.lower().rstrip(".") in _WORDLIKE]
    lower_abbreviations = bool(abbreviations) and all(w.islower() for w in abbreviations)
    return not (lower_abbreviations or _DOTTED_NUMBER.match(phrase))


def find_moments(text: str, now: datetime, default_time: time = DEFAULT_TIME) -> list[FoundMoment]:
    """The time phrases inside ``text``, left to right: at each word, the longest run of at most
    :data:`MAX_PHRASE_WORDS` words that :func:`parse_moment` understands as a whole (surrounding
    quotes, brackets and punctuation aside), then on after it."""
    words = list(re.finditer(r"\S+", text))
    found: list[FoundMoment] = []
    i = 0
    while i < len(words):
        last = min(len(words), i + MAX_PHRASE_WORDS) - 1
        head = normalize(text[words[i].start():words[last].end()]).lstrip(_LEADING)
        if not any(pattern.match(head) for pattern in _PART_STARTS):  # no phrase starts at this word
            i += 1
            continue
        for j in range(last, i - 1, -1):
            start, end = words[i].start(), words[j].end()
            while start < end and text[start] in _LEADING:
                start += 1
            while end > start and text[end - 1] in _TRAILING:
                end -= 1
            phrase = text[start:end]
            if not phrase or not _plausible(phrase):
                continue
            moment = parse_moment(phrase, now, default_time)
            if moment is not None:
                found.append(FoundMoment(phrase, start, end, moment, stated_fields(phrase)))
                i = j + 1
                break
        else:
            i += 1
    return found
