"""Which parameters take a date or time, and in which format (assistant/chat/arguments_dates.py)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from assistant.chat.arguments_dates import DateParam, date_param, fits, phrases_for, reformat, stated_today

NOW = datetime(2026, 11, 11, 10, 0, tzinfo=ZoneInfo("Europe/Berlin"))


@pytest.mark.parametrize(("name", "schema", "expected"), [
    ("time", {"type": "string", "description": "Format: %Y-%m-%d %H:%M:%S"}, DateParam("date-time", "%Y-%m-%d %H:%M:%S")),
    ("x", {"type": "string", "description": 'in the format of "%Y-%m-%d %H:%M:%S".'},
     DateParam("date-time", "%Y-%m-%d %H:%M:%S")),
    ("day", {"type": "string", "description": "The date. Format: %Y-%m-%d"}, DateParam("date", "%Y-%m-%d")),
    ("at", {"type": "string", "description": "HH:MM"}, DateParam("time", "%H:%M")),
    ("at", {"type": "string", "description": "MM/DD/YYYY"}, DateParam("date", "%m/%d/%Y")),
    ("at", {"type": "string", "format": "date-time"}, DateParam("date-time")),
    ("at", {"type": "string", "format": "time"}, DateParam("time", rfc3339=True)),
    ("start_time", {"type": "string"}, DateParam("date-time", declared=False)),
    ("dueDate", {"type": "string"}, DateParam("date", declared=False, day_alone=True)),
    ("when", {}, DateParam("date-time", declared=False, day_alone=True)),
    # this project's tools say "ISO 8601" (assistant/tools/reminders.py, tasks.py, calendar.py)
    ("at", {"type": "string", "description": "When, as an ISO 8601 date and time, e.g. 2025-03-01T09:30."},
     DateParam("date-time", declared=False)),
    ("due", {"type": "string", "description": "ISO 8601 date (2024-05-01) or date-time (2024-05-01T17:00)."},
     DateParam("date-time", declared=False, day_alone=True)),
    ("start", {"type": "string", "description": "First day or moment, ISO 8601 (2024-05-01 or 2024-05-01T09:00)"},
     DateParam("date-time", declared=False, day_alone=True)),
    ("birthday", {"type": "string", "description": "The birthday, ISO 8601 date."}, DateParam("date", declared=False,
                                                                                            day_alone=True)),
])
def test_date_params_and_their_formats(name: str, schema: dict, expected: DateParam) -> None:
    assert date_param(name, schema) == expected


@pytest.mark.parametrize(("name", "schema"), [
    ("time_period", {"type": "string", "description": "in the format %Y-%m-%d to %Y-%m-%d"}),  # a range
    ("time", {"type": "integer"}),  # minutes, a count
    ("time", {"type": "string", "enum": ["morning", "evening"]}),
    ("start", {"type": "string", "format": "uri"}),
    ("frontend", {"type": "string"}),
    ("note", {"type": "string", "description": "Free text."}),
])
def test_not_date_params(name: str, schema: dict) -> None:
    assert date_param(name, schema) is None


def test_fields_follow_the_format() -> None:
    assert DateParam("date", "%m-%d").fields == {"month", "day"}
    assert DateParam("date-time").fields == {"year", "month", "day", "time"}
    assert DateParam("time", "%H:%M").fields == {"time"}


def test_fits_and_reformat() -> None:
    param = DateParam("date-time", "%Y-%m-%d %H:%M:%S")
    assert fits("2026-11-12 15:00:00", param) and fits("2026-11-12 15:00:00Z", param)
    assert not fits("2026-11-12T15:00", param)
    assert reformat("2026-11-12T15:00", param) == "2026-11-12 15:00:00"
    assert reformat("15:00", param) is None  # no date in it: not an absolute date-time
    assert fits("2026-11-12", DateParam("date")) and not fits("12/11/2026", DateParam("date"))


def test_stated_today() -> None:
    assert stated_today(["Today is 2021-09-27, add a meeting"], NOW) == datetime(2021, 9, 27, 10, 0,
                                                                                   tzinfo=NOW.tzinfo)
    assert stated_today(["today's date is March 3rd"], NOW).date().isoformat() == "2027-03-03"
    assert stated_today(["today is a good day", "what is today?"], NOW) is None


def test_phrases_for_one_two_and_more_arguments() -> None:
    one = {"time": DateParam("date-time")}
    assert phrases_for(one, ["tomorrow at 3pm"], NOW)["time"].text == "tomorrow at 3pm"
    assert phrases_for(one, ["tomorrow at 3pm", "at 4pm or at 5pm"], NOW) == {}  # newest has two
    assert phrases_for(one, ["tomorrow at 3pm", "ok thanks"], NOW)["time"].text == "tomorrow at 3pm"
    interval = {"start_time": DateParam("date-time"), "end_time": DateParam("date-time")}
    found = phrases_for(interval, ["friday from 9 to 5"], NOW)
    assert (found["start_time"].moment.start.hour, found["end_time"].moment.start.hour) == (9, 17)
    three = {**interval, "time": DateParam("date-time")}
    assert phrases_for(three, ["friday from 9 to 5"], NOW) == {}
