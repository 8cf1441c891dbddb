"""The argument review against this project's real tools: their generated JSON schemas, their pydantic
validation and their own date parsing accept what review_arguments writes (issue 20)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from assistant.chat.arguments import review_arguments
from assistant.tools.calendar import create_calendar_event, list_calendar_events
from assistant.tools.dav import parse_when
from assistant.tools.reminders import _due_time, create_reminder
from assistant.tools.tasks import create_task

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 11, 10, 0, tzinfo=BERLIN)  # a Wednesday


@pytest.mark.parametrize(("tool", "arguments", "user", "field", "meant"), [
    (create_calendar_event, {"title": "Dentist", "start": "tomorrow at 3pm"}, "dentist tomorrow at 3pm",
     "start", datetime(2026, 11, 12, 15, 0, tzinfo=BERLIN)),
    (create_calendar_event, {"title": "Dentist", "start": "2026-11-12T03:00"}, "dentist tomorrow at 3 pm",
     "start", datetime(2026, 11, 12, 15, 0, tzinfo=BERLIN)),
    (create_calendar_event, {"title": "Holiday", "start": "next friday"}, "block next friday",
     "start", date(2026, 11, 20)),  # a day alone: an all-day event
    (list_calendar_events, {"start": "next week"}, "what is on next week?", "start", date(2026, 11, 16)),
    (create_task, {"title": "File the taxes", "due": "friday"}, "file the taxes by friday", "due",
     date(2026, 11, 13)),
])
def test_calendar_and_task_dates_are_parsed_by_the_tool_as_the_user_meant(tool, arguments, user, field,
                                                                          meant) -> None:  # noqa: ANN001
    review = review_arguments(tool.spec, arguments, user_text=[user], now=NOW)
    assert review.ok, review.problems
    parsed = tool.validate(review.arguments)
    assert parse_when(getattr(parsed, field), field, BERLIN) == meant


def test_a_reminder_time_is_a_date_and_time_the_tool_accepts() -> None:
    review = review_arguments(create_reminder.spec, {"text": "Call mom at 5pm tomorrow.", "at": "tomorrow at 5pm"},
                              user_text=["remind me to call mom tomorrow at 5pm"], now=NOW)
    assert review.ok, review.problems
    parsed = create_reminder.validate(review.arguments)
    assert parsed.text == "call mom"  # the time is in `at`: the padding went
    assert _due_time(parsed.at, None, BERLIN, NOW) == datetime(2026, 11, 12, 16, 0, tzinfo=UTC)
    # "tomorrow" alone: the reminder needs a time of day, so it gets the default one, not a bare date
    alone = review_arguments(create_reminder.spec, {"text": "call mom", "at": "tomorrow"}, user_text=["hi"], now=NOW)
    assert _due_time(alone.arguments["at"], None, BERLIN, NOW) == datetime(2026, 11, 12, 8, 0, tzinfo=UTC)
