"""Free-text arguments keep the user's own words (assistant/chat/arguments_words.py)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from assistant.chat.arguments_words import is_free_text, keep_user_words

NOW = datetime(2026, 11, 11, 10, 0, tzinfo=ZoneInfo("Europe/Berlin"))


@pytest.mark.parametrize(("value", "users", "others", "kept"), [
    ("Meeting with the marketing team at 2pm tomorrow at 9:00 AM.",
     ["add a meeting with the marketing team tomorrow at 2pm"], [], "meeting with the marketing team"),
    ("Tomorrow at 2pm: Meeting with John", ["set up a Meeting with John"], [], "Meeting with John"),
    ("Dentist appointment at Main Street clinic", ["book the dentist appointment"], ["Main Street clinic"],
     "dentist appointment"),
    ("Buy milk.", ["remind me: buy milk"], [], "buy milk"),
    # the newest message wins a tie
    ("Call Anna at 5pm", ["call anna tomorrow", "no, Call Anna today"], [], "Call Anna"),
])
def test_padding_trimmed(value: str, users: list[str], others: list[str], kept: str) -> None:
    assert keep_user_words(value, users, others, NOW) == kept


@pytest.mark.parametrize(("value", "users"), [
    ("Buy milk", ["buy milk at 5"]),  # nothing to trim
    ("buy milk at 5", ["Buy milk at 5 please"]),  # the user wrote it so
    ("Buy oat milk at 5pm", ["buy milk"]),  # "oat" is the model's own word, no padding
    ("Buy milk!", ["buy milk"]),  # an exclamation mark is no padding
    ("at 5pm", ["at 5pm"]),  # nothing but padding
    ("the and of", ["the and of"]),
    ("Meeting at 5pm", ["completely unrelated"]),
])
def test_left_alone(value: str, users: list[str]) -> None:
    assert keep_user_words(value, users, [], NOW) is None


def test_a_time_is_padding_only_when_another_argument_holds_it() -> None:
    assert keep_user_words("Call mom at 5pm", ["add a todo: call mom", "at 5pm"], [], NOW) == "call mom"
    assert keep_user_words("Call mom at 5pm", ["add a todo: call mom", "at 5pm"], [], NOW,
                           times_elsewhere=False) is None


@pytest.mark.parametrize(("name", "schema", "value", "free"), [
    ("content", {"type": "string"}, "Call mom", True),
    ("content", {"type": ["string", "null"]}, "Call mom", True),
    ("content", {"type": "string"}, "Call", False),  # one word: a name, an id
    ("content", {"type": "string", "enum": ["Call mom"]}, "Call mom", False),
    ("content", {"type": "string", "format": "email"}, "a b", False),
    ("user_id", {"type": "string"}, "ab 12", False),
    ("newPassword", {"type": "string"}, "open sesame", False),
    ("recipient", {"type": "string"}, "anna at example.com", True),
    ("recipient", {"type": "string"}, "anna @example.com", False),
    ("count", {"type": "integer"}, "two apples", False),
])
def test_what_counts_as_free_text(name: str, schema: dict, value: str, free: bool) -> None:
    assert is_free_text(name, schema, value) is free


def test_the_casing_kept_is_the_users_unless_asked_for_the_models() -> None:
    value, users = "Meeting with the marketing team at 2pm.", ["The meeting with the marketing team", "at 2pm"]
    assert keep_user_words(value, users, [], NOW) == "meeting with the marketing team"
    assert keep_user_words(value, users, [], NOW, casing="model") == "Meeting with the marketing team"


def test_a_core_that_runs_into_the_time_ends_where_the_task_does() -> None:
    # seen with the real 0.5B model: the user's "3pm" is the model's "3 pm", so the longest common run
    # of words was "call the dentist tomorrow at"; the time phrase and the connector are cut from it
    kept = keep_user_words("Call the dentist tomorrow at 3 pm", ["Remind me to call the dentist tomorrow at 3pm."],
                           ["2026-11-12T15:00:00+01:00"], NOW)
    assert kept == "call the dentist"
    # without another argument holding the time, the time is the content: nothing is cut
    assert keep_user_words("Call the dentist tomorrow at 3 pm", ["Remind me to call the dentist tomorrow at 3pm."],
                           [], NOW, times_elsewhere=False) is None
