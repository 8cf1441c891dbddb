"""Relative dates and times, resolved from a fixed now in a fixed zone."""

from __future__ import annotations

from datetime import date, datetime, time
from zoneinfo import ZoneInfo

import pytest

from assistant.commands.when import find_moments, normalize, parse_moment, parse_period, stated_fields

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 11, 10, 0, tzinfo=BERLIN)  # Wednesday 10:00


def at(month: int, day: int, hour: int, minute: int = 0, year: int = 2026) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=BERLIN)


@pytest.mark.parametrize(("said", "start", "has_time"), [
    ("tomorrow", at(11, 12, 9), False),
    ("tomorrow at 3pm", at(11, 12, 15), True),
    ("Tomorrow at 3 PM", at(11, 12, 15), True),
    ("at 3pm", at(11, 11, 15), True),
    ("at 9", at(11, 12, 9), True),  # 09:00 has passed today: tomorrow
    ("today at 9", at(11, 11, 9), True),  # said "today": stays today
    ("at 3", at(11, 11, 15), True),  # a bare hour 1..7 is p.m.
    ("at 07:00", at(11, 12, 7), True),  # written as 07:00: a.m.
    ("at 10:30", at(11, 11, 10, 30), True),
    ("at 15:45", at(11, 11, 15, 45), True),
    ("at 3 o'clock", at(11, 11, 15), True),
    ("at noon", at(11, 11, 12), True),
    ("midnight", at(11, 12, 0), True),
    ("tonight", at(11, 11, 20), True),
    ("tonight at 11", at(11, 11, 23), True),
    ("in the evening at 8", at(11, 11, 20), True),
    ("tomorrow morning", at(11, 12, 9), True),
    ("this afternoon", at(11, 11, 15), True),
    ("in the morning", at(11, 12, 9), True),
    ("friday", at(11, 13, 9), False),
    ("on friday at 2pm", at(11, 13, 14), True),
    ("this friday", at(11, 13, 9), False),
    ("next friday", at(11, 20, 9), False),  # the Friday of next week
    ("next monday", at(11, 16, 9), False),
    ("monday", at(11, 16, 9), False),
    ("wednesday at 11", at(11, 11, 11), True),  # today, still ahead
    ("on wednesday at 9", at(11, 18, 9), True),  # today's has passed: next week's
    ("next wed", at(11, 18, 9), False),
    ("the day after tomorrow at noon", at(11, 13, 12), True),
    ("next week", at(11, 16, 9), False),
    ("this weekend", at(11, 14, 9), False),
    ("next weekend", at(11, 21, 9), False),
    ("12 march", at(3, 12, 9, year=2027), False),  # passed this year: next year
    ("on the 3rd of december at 18:30", at(12, 3, 18, 30), True),
    ("march 12th 2028", at(3, 12, 9, year=2028), False),
    ("the 20th", at(11, 20, 9), False),
    ("the 5th", at(12, 5, 9), False),
    ("2026-12-24 at 18:00", at(12, 24, 18), True),
    ("by friday", at(11, 13, 9), False),
    ("tomorrow, at 10:30", at(11, 12, 10, 30), True),
    ("in 3 days", at(11, 14, 10), True),  # keeps now's time of day
    ("in 3 days at 8am", at(11, 14, 8), True),
    ("2 weeks from now", at(11, 25, 10), True),
    ("in a month", at(12, 11, 10), True),
])
def test_days_and_times(said: str, start: datetime, has_time: bool) -> None:
    moment = parse_moment(said, NOW)
    assert moment is not None, said
    assert moment.start == start and moment.start.tzinfo is BERLIN
    assert moment.has_time is has_time
    assert moment.end is None


@pytest.mark.parametrize(("said", "minutes"), [
    ("in 2 hours", 120), ("in 2h", 120), ("in 30 minutes", 30), ("in half an hour", 30),
    ("in an hour and a half", 90), ("in 1.5 hours", 90), ("in a couple of hours", 120), ("in ten minutes", 10),
    ("half an hour from now", 30),
])
def test_offsets_count_from_now(said: str, minutes: int) -> None:
    moment = parse_moment(said, NOW)
    assert moment is not None and moment.has_time
    assert (moment.start - NOW).total_seconds() == minutes * 60


def test_hours_are_elapsed_time_across_a_daylight_saving_change() -> None:
    before = datetime(2026, 3, 29, 1, 30, tzinfo=BERLIN)  # clocks go 02:00 -> 03:00 this night
    moment = parse_moment("in 1 hour", before)
    assert moment.start.isoformat() == "2026-03-29T03:30:00+02:00"
    days = parse_moment("in 1 day", before)
    assert days.start.isoformat() == "2026-03-30T01:30:00+02:00"  # the same wall-clock time


@pytest.mark.parametrize(("said", "start", "end"), [
    ("tomorrow at 3pm for an hour", at(11, 12, 15), at(11, 12, 16)),
    ("for 90 minutes tomorrow at 3pm", at(11, 12, 15), at(11, 12, 16, 30)),
    ("from 3 to 4pm", at(11, 11, 15), at(11, 11, 16)),
    ("at 3-4pm", at(11, 11, 15), at(11, 11, 16)),
    ("friday from 12 to 1:30pm", at(11, 13, 12), at(11, 13, 13, 30)),
    ("tonight at 11 until 1", at(11, 11, 23), at(11, 12, 1)),  # the first 1 o'clock after the start
    ("from 9 to 5", at(11, 12, 9), at(11, 12, 17)),
    ("from 10 to 11", at(11, 12, 10), at(11, 12, 11)),
    ("tomorrow at 22:00 until midnight", at(11, 12, 22), at(11, 13, 0)),
])
def test_ends_and_lengths(said: str, start: datetime, end: datetime) -> None:
    moment = parse_moment(said, NOW)
    assert moment is not None and (moment.start, moment.end) == (start, end)


@pytest.mark.parametrize("said", [
    "", "blah", "3", "at 13pm", "at 25:00", "at 9:75", "feb 30", "2026-02-30", "tomorrow friday",
    "tomorrow in 2 hours", "for an hour", "until 5pm", "at 3pm at 4pm", "tonight in the morning",
    "tomorrow at 3pm for an hour until 5pm", "in 0 minutes", "call mom at 5pm",
])
def test_what_is_not_a_time(said: str) -> None:
    assert parse_moment(said, NOW) is None


def test_default_time_and_naive_now() -> None:
    assert parse_moment("friday", NOW, default_time=time(8)).start == at(11, 13, 8)
    with pytest.raises(ValueError):
        parse_moment("friday", datetime(2026, 11, 11, 10))


@pytest.mark.parametrize(("said", "period"), [
    ("", (date(2026, 11, 11), 1)),
    ("today", (date(2026, 11, 11), 1)),
    ("tomorrow", (date(2026, 11, 12), 1)),
    ("this week", (date(2026, 11, 11), 5)),  # through Sunday
    ("for the rest of the week", (date(2026, 11, 11), 5)),
    ("next week", (date(2026, 11, 16), 7)),
    ("this weekend", (date(2026, 11, 14), 2)),
    ("next weekend", (date(2026, 11, 21), 2)),
    ("the next 3 days", (date(2026, 11, 11), 3)),
    ("the coming ten days", (date(2026, 11, 11), 10)),
    ("this month", (date(2026, 11, 11), 20)),
    ("next month", (date(2026, 12, 1), 31)),
    ("on friday", (date(2026, 11, 13), 1)),
    ("for next week", (date(2026, 11, 16), 7)),
])
def test_periods(said: str, period: tuple[date, int]) -> None:
    assert parse_period(said, NOW) == period


def test_periods_that_are_not() -> None:
    assert parse_period("the project", NOW) is None
    assert parse_period("the next 400 days", NOW) is None


def test_the_weekend_seen_from_a_sunday() -> None:
    sunday = datetime(2026, 11, 15, 10, tzinfo=BERLIN)
    assert parse_period("this weekend", sunday) == (date(2026, 11, 15), 1)


def test_normalize() -> None:
    assert normalize("  Tomorrow’s   AT 3pm?! ") == "tomorrow's at 3pm"


# The scanner for time phrases inside free text (used by assistant/chat/arguments.py).


@pytest.mark.parametrize(("text", "phrases"), [
    ("add a meeting with the marketing team tomorrow at 2pm", [("tomorrow at 2pm", at(11, 12, 14))]),
    ("Meeting with the marketing team at 2pm tomorrow at 9:00 AM.",
     [("at 2pm tomorrow", at(11, 12, 14)), ("at 9:00 AM", at(11, 12, 9))]),
    ("It's set for March 19th, 2023 at 9:30 AM.", [("March 19th, 2023 at 9:30 AM", at(3, 19, 9, 30, year=2023))]),
    ('The content is "Call mom" (tonight).', [("tonight", at(11, 11, 20))]),
    ("8 am tomorrow. Today is 2021-10-13.",
     [("8 am tomorrow", at(11, 12, 8)), ("Today", at(11, 11, 9)), ("2021-10-13", at(10, 13, 9, year=2021))]),
    ("see you on Sat", [("on Sat", at(11, 14, 9))]),
    ("I sat in the sun", []),  # lower-case weekday abbreviations that are words
    ("That costs 12.50 euros, for 3 people", []),  # a dotted number is no time, nor a bare number
    ("Can you tell me today's date?", []),
    ("", []),
])
def test_find_moments_finds_the_longest_phrases_in_text(text: str, phrases: list[tuple[str, datetime]]) -> None:
    found = find_moments(text, NOW)
    assert [(f.text, f.moment.start) for f in found] == phrases
    assert all(text[f.start:f.end] == f.text for f in found)


@pytest.mark.parametrize(("said", "fields"), [
    ("tomorrow at 3pm", {"year", "month", "day", "time"}),
    ("tomorrow", {"year", "month", "day"}),
    ("at 3 pm", {"time"}),
    ("noon", {"time"}),
    ("march 19th", {"month", "day"}),
    ("march 19th 2023 at 9:30", {"year", "month", "day", "time"}),
    ("the 20th", {"day"}),
    ("2023-03-19", {"year", "month", "day"}),
    ("in 2 hours", {"year", "month", "day", "time"}),
    ("in 3 days", {"year", "month", "day"}),
    ("tonight", {"year", "month", "day"}),  # a part of the day is no clock time
    ("in the morning", set()),
    ("a banana", set()),
])
def test_stated_fields_are_what_the_phrase_itself_fixes(said: str, fields: set[str]) -> None:
    assert stated_fields(said) == fields
