"""Stale plans: time phrases read by assistant.commands.when relative to when the memory was
written; only plans go stale, never facts, identities, corrections or recurring times."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assistant.memory.types import Memory, MemoryType
from assistant.sanitation.stale import find_phrase, stale_reason

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)  # a Wednesday


def memory(text: str, days_ago: float, kind: MemoryType = MemoryType.CONTEXT) -> Memory:
    return Memory("m1", "u", text, text, kind, 0.5, created_at=(NOW - timedelta(days=days_ago)).isoformat())


@pytest.mark.parametrize(("text", "days_ago", "phrase"), [
    ("Dentist appointment tomorrow at 3pm", 3, "tomorrow at 3pm"),
    ("I need to finish the report this week", 14, "this week"),
    ("Meeting Anna on Friday", 10, "on friday"),
    ("I'm flying to Rome next week", 20, "next week"),
    ("Let's have lunch on the 20th", 40, "on the 20th"),
    ("Call mom in 2 days", 5, "in 2 days"),
    ("I'm going to a concert tonight!", 2, "tonight"),
    ("Concert next weekend!", 20, "next weekend"),
    ("Remind me to pay rent by 2026-11-01", 30, "by 2026-11-01"),
])
def test_a_plan_whose_time_has_passed_is_stale(text: str, days_ago: float, phrase: str) -> None:
    reason = stale_reason(memory(text, days_ago), NOW)
    written = (NOW - timedelta(days=days_ago)).date().isoformat()
    assert reason is not None and reason.startswith(f"stale: '{phrase}' (written {written}) has passed")


@pytest.mark.parametrize(("text", "days_ago"), [
    ("Dentist appointment tomorrow at 3pm", 0.2),  # not yet
    ("I need to finish the report this week", 1),
    ("I was born on Friday", 10),  # a past fact
    ("We met on Friday at the cafe", 10),
    ("I go swimming every Friday", 10),  # recurring
    ("I go swimming on Fridays", 10),
    ("I have 3 kids", 10),  # a number is not a time
    ("I live in Berlin", 10),
    ("Yesterday I went to the park", 5),
    ("I love Mondays", 9),
    ("Guess what I did this week? I adopted a dog", 20),
])
def test_facts_recurring_times_and_future_plans_are_not_stale(text: str, days_ago: float) -> None:
    assert stale_reason(memory(text, days_ago), NOW) is None


def test_corrections_and_identity_facts_are_never_stale() -> None:
    assert stale_reason(memory("The meeting is tomorrow at 3, not 4", 5, MemoryType.CORRECTION), NOW) is None
    assert stale_reason(memory("My birthday party is next week", 30, MemoryType.FACT), NOW) is None
    assert stale_reason(memory("My party is next week", 30, MemoryType.FACT), NOW) is not None


def test_the_phrase_is_resolved_from_when_it_was_written() -> None:
    written = datetime(2026, 11, 11, 10, tzinfo=UTC)  # a Wednesday
    assert find_phrase("see you on Friday at 9", written)[:3] == ("on friday at 9", datetime(2026, 11, 13).date(), 1)
    assert find_phrase("this week is busy", written)[1:] == (written.date(), 5)
    assert find_phrase("nothing here", written) is None


@pytest.mark.parametrize("text", ["Last Friday I went to a council meeting", "I haven't talked to Jon in a few days",
                                  "We have been busy since Monday"])
def test_times_behind_the_writer_are_not_plans(text: str) -> None:
    assert stale_reason(memory(text, 20), NOW) is None


def test_a_plan_for_tomorrow_is_still_a_plan() -> None:
    assert stale_reason(memory("I booked a table for tomorrow at 8pm", 3), NOW) is not None


def test_a_date_already_over_when_written_dates_the_text_and_is_not_the_plan() -> None:
    text = "On 25 May 2023, Caroline said: I'm going to a pride parade next month."
    assert stale_reason(memory(text, 0), NOW) is None  # stored today: "next month" is still ahead
    written_then = (NOW - datetime(2023, 5, 25, 12, tzinfo=UTC)).days
    reason = stale_reason(memory(text, written_then), NOW)
    assert reason is not None and "(written 2023-05-25) has passed" in reason  # a plan of that time: over now
    assert stale_reason(memory("On 25 May 2023, Melanie said: I'm painting a lake.", 0), NOW) is None
