"""review_arguments: what a tool call's arguments become before the tool runs (issue 20)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assistant.chat.arguments import Review, ReviewOptions, review_arguments, time_context
from assistant.llm.base import ToolSpec

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 11, 10, 0, tzinfo=BERLIN)  # Wednesday 10:00, as in assistant/commands/when.py
FORMAT = "%Y-%m-%d %H:%M:%S"

AGENDA = ToolSpec("AddAgenda", "Add an agenda item.", {
    "type": "object",
    "properties": {
        "token": {"type": "string", "description": "User authentication token."},
        "content": {"type": "string", "description": "The content of the agenda."},
        "time": {"type": "string", "description": f"The time for the agenda. Format: {FORMAT}"},
        "location": {"type": "string", "description": "The location of the agenda."},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "repeat": {"type": "integer", "description": "How many times."},
    },
    "required": ["token", "content", "time"],
})


def review(arguments: dict, *users: str, spec: ToolSpec = AGENDA, **options: object) -> Review:
    return review_arguments(spec, arguments, user_text=list(users), now=NOW, options=ReviewOptions(**options))


def call(**arguments: object) -> dict:
    return {"token": "z9x8c7", "content": "Call mom", **arguments}


def test_time_context_names_weekday_date_time_and_zone() -> None:
    assert time_context(NOW) == "Current date and time: Wednesday 2026-11-11 10:00 (Europe/Berlin, UTC+01:00)."
    assert time_context(datetime(2026, 7, 1, 8, 5, tzinfo=ZoneInfo("UTC"))) == \
        "Current date and time: Wednesday 2026-07-01 08:05 (UTC)."
    assert time_context(NOW, datetime(2021, 9, 27)).endswith(
        "(Europe/Berlin, UTC+01:00). The conversation is dated Monday 2021-09-27: \"today\" means that day.")


def test_a_relative_time_is_resolved_in_the_format_the_description_names() -> None:
    result = review(call(time="tomorrow at 3pm"), "remind me to call mom tomorrow at 3pm")
    assert result.arguments["time"] == "2026-11-12 15:00:00"
    assert [c.as_dict() for c in result.changes] == [
        {"field": "time", "before": "tomorrow at 3pm", "after": "2026-11-12 15:00:00",
         "reason": "resolved 'tomorrow at 3pm'"}]
    assert result.ok


@pytest.mark.parametrize(("said", "written"), [
    ("next Friday", "2026-11-20 09:00:00"),
    ("3 pm", "2026-11-11 15:00:00"),
    ("15:30", "2026-11-11 15:30:00"),
    ("in 2 hours", "2026-11-11 12:00:00"),
    ("March 19th 2027 at 9:30 AM", "2027-03-19 09:30:00"),
])
def test_phrases_the_model_wrote_are_resolved(said: str, written: str) -> None:
    assert review(call(time=said), "hello").arguments["time"] == written


def test_the_classic_0300_for_3pm_is_corrected_to_the_users_time_keeping_the_models_day() -> None:
    result = review(call(time="2026-11-12 03:00:00"), "remind me tomorrow to call mom", "make it 3 pm")
    assert result.arguments["time"] == "2026-11-12 15:00:00"
    assert result.changes[0].reason == "the user said '3 pm'"


def test_a_date_against_the_wrong_day_follows_the_users_relative_day() -> None:
    result = review(call(time="2026-11-11 15:00:00"), "call mom tomorrow at 3pm")
    assert result.arguments["time"] == "2026-11-12 15:00:00"
    assert result.changes[0].reason == "the user said 'tomorrow at 3pm'"


def test_a_day_without_a_year_fixes_month_and_day_only() -> None:
    result = review(call(time="2023-03-20 09:30:00"), "It is set for March 19th at 9:30 AM.")
    assert result.arguments["time"] == "2023-03-19 09:30:00"  # the model's year stays


def test_a_phrase_without_a_time_fixes_the_date_only() -> None:
    assert review(call(time="2026-11-12 18:45:00"), "remind me tomorrow").changes == ()
    assert review(call(time="2026-11-13 18:45:00"), "remind me tomorrow").arguments["time"] == "2026-11-12 18:45:00"


def test_agreeing_literal_and_ambiguous_values_are_left_alone() -> None:
    assert review(call(time="2026-11-12 15:00:00"), "tomorrow at 3pm please").changes == ()
    # typed by the user: never changed, even against another phrase in the message
    assert review(call(time="2023-03-19 09:30:00"), "it was 2023-03-19 09:30:00, not tomorrow").changes == ()
    # two phrases in the newest message that has one: which one the value means is not clear
    assert review(call(time="2026-11-12 08:00:00"), "8 am tomorrow. Today is Monday").changes == ()
    # two date/time arguments: a phrase is not attributed to either
    spec = ToolSpec("Meet", "", {"type": "object", "properties": {"start_time": {"type": "string"},
                                                                  "end_time": {"type": "string"}}})
    assert review({"start_time": "2026-11-12T03:00:00", "end_time": "2026-11-12T04:00:00"}, "tomorrow 3pm",
                  spec=spec).changes == ()


def test_the_day_the_user_says_it_is_or_the_conversation_date_is_the_reference() -> None:
    said = review(call(time="tomorrow at 2pm"), "add a meeting tomorrow at 2pm. Today is 2021-09-27")
    assert said.arguments["time"] == "2021-09-28 14:00:00"
    # the statement of today's date is not a time the value must agree with
    alarm = review(call(time="2021-10-13 08:00:00"), "8 am tomorrow. Today is 2021-10-13.")
    assert alarm.arguments["time"] == "2021-10-14 08:00:00"
    assert alarm.changes[0].reason == "the user said '8 am tomorrow'"
    given = review(call(time="tomorrow at 2pm"), "hi", conversation_date=datetime(2023, 3, 1, 12, 0))
    assert given.arguments["time"] == "2023-03-02 14:00:00"


def test_an_iso_value_in_another_shape_is_rewritten_but_never_losing_a_time() -> None:
    assert review(call(time="2026-11-12T15:00"), "hi").arguments["time"] == "2026-11-12 15:00:00"
    day_only = ToolSpec("Q", "", {"type": "object", "properties": {"time": {
        "type": "string", "description": "The day. Format: %Y-%m-%d"}}})
    kept = review({"time": "2023-03-25 14:00:00"}, "hi", spec=day_only)
    assert kept.changes == ()
    assert kept.problems == ("time: '2023-03-25 14:00:00' is not a valid date (expected %Y-%m-%d)",)
    assert review({"time": "2023-03-25T00:00:00"}, "hi", spec=day_only).arguments["time"] == "2023-03-25"


@pytest.mark.parametrize(("schema", "said", "written"), [
    ({"type": "string", "format": "date-time"}, "tomorrow at 3pm", "2026-11-12T15:00:00+01:00"),
    ({"type": "string", "format": "date"}, "next friday", "2026-11-20"),
    ({"type": "string", "format": "time"}, "3pm", "15:00:00+01:00"),
    ({"type": "string", "description": "When, as YYYY-MM-DD HH:MM"}, "tomorrow at 3pm", "2026-11-12 15:00"),
    ({"type": "string", "description": "Start as HH:MM"}, "at 3pm", "15:00"),
    ({"type": "string", "description": "The day (DD/MM/YYYY)"}, "tomorrow", "12/11/2026"),
    ({"type": "string", "description": "in the format of 'dd/mm/yyyy HH:MM'"}, "tomorrow at 3pm", "12/11/2026 15:00"),
    ({"type": "string", "description": "in the format of 'YYYY-MM-DD HH:mm:ss'"}, "at noon", "2026-11-11 12:00:00"),
    ({"type": "string", "description": "ISO-8601 (e.g., 'YYYY-MM-DDTHH:MM:SSZ')"}, "tomorrow at 3pm",
     "2026-11-12T15:00:00"),
])
def test_the_format_comes_from_the_schema_or_the_description(schema: dict, said: str, written: str) -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {"at": schema}})
    result = review({"at": said}, "hi", spec=spec)
    assert result.arguments["at"] == written and result.ok


@pytest.mark.parametrize(("name", "written"), [
    ("deadline", "2026-11-12T15:00:00+01:00"), ("dueDate", "2026-11-12"), ("start", "2026-11-12T15:00:00+01:00"),
    ("when", "2026-11-12T15:00:00+01:00"), ("check_in_date", "2026-11-12"),
])
def test_a_string_named_like_a_date_is_grounded_in_iso(name: str, written: str) -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {name: {"type": "string"}}})
    assert review({name: "tomorrow at 3pm"}, "hi", spec=spec).arguments[name] == written


def test_a_date_named_argument_without_a_format_keeps_an_absolute_value_and_lists_no_problem() -> None:
    spec = ToolSpec("Flight", "", {"type": "object", "properties": {
        "departure_time": {"type": "string", "description": "In 24-hour format, such as '18:45'."},
        "departure_date": {"type": "string"}}})
    result = review({"departure_time": "14:00", "departure_date": "16/03/2024"}, "around 14:00 on the 16th",
                    spec=spec)
    assert result.changes == () and result.ok


def test_a_zone_designator_on_a_value_is_kept() -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {
        "when": {"type": "string", "description": "ISO-8601 (e.g., 'YYYY-MM-DDTHH:MM:SS')"}}})
    result = review({"when": "2023-11-01T16:00:00Z"}, "hi", spec=spec)
    assert result.changes == () and result.ok


@pytest.mark.parametrize(("name", "written"), [("deadline", "2026-11-12"), ("start_time", "2026-11-12T09:00:00+01:00")])
def test_a_day_without_a_time_is_a_date_where_the_parameter_allows_one(name: str, written: str) -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {name: {"type": "string"}}})
    assert review({name: "tomorrow"}, "hi", spec=spec).arguments[name] == written


@pytest.mark.parametrize("name", ["backend", "weekend", "update", "runtime", "time_period", "title"])
def test_other_names_are_not_dates(name: str) -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {name: {"type": "string"}}})
    assert review({name: "tomorrow"}, "hi", spec=spec).changes == ()


def test_padding_is_trimmed_to_the_users_own_words() -> None:
    result = review(call(content="Meeting with the marketing team at 2pm tomorrow at 9:00 AM.",
                         time="2026-11-12 14:00:00"),
                    "add a meeting with the marketing team tomorrow at 2pm")
    assert result.arguments["content"] == "meeting with the marketing team"
    assert result.changes[-1].reason == "kept the user's words"


def test_a_place_given_in_another_argument_and_a_trailing_period_are_padding() -> None:
    placed = review(call(content="Call mom in the cafeteria", location="cafeteria"),
                    "Call mom, tomorrow, in the cafeteria")
    assert placed.arguments["content"] == "Call mom"
    assert review(call(content="Call the bank."), "please call the bank").arguments["content"] == "call the bank"


@pytest.mark.parametrize(("content", "users"), [
    ("Call mom", ["remind me to call mom at 5"]),  # no padding
    ("Call Mom.", ["Call Mom."]),  # typed so
    ("Call mom about the loan", ["remind me to call mom"]),  # words of the model's own: not padding
    ("What is the capital of France?", ["what is the capital of france"]),  # a question mark is no padding
    ("The meeting with John", ["meeting with John"]),  # only a connector added: left alone
    ("Quarterly review at 3pm", ["add the quarterly planning review at 3pm"]),  # the user's core differs
])
def test_free_text_left_alone_when_unsure(content: str, users: list[str]) -> None:
    assert review(call(content=content), *users).arguments["content"] == content


def test_a_time_in_free_text_stays_when_no_argument_holds_it() -> None:
    todo = ToolSpec("AddTodo", "", {"type": "object", "properties": {"title": {"type": "string"}}})
    assert review({"title": "Call mom at 5pm"}, "add a todo: call mom", "at 5pm", spec=todo).changes == ()


def test_identifiers_secrets_and_single_words_are_not_free_text() -> None:
    spec = ToolSpec("Login", "", {"type": "object", "properties": {
        "username": {"type": "string"}, "password": {"type": "string"}, "title": {"type": "string"}}})
    arguments = {"username": "John Doe at 3pm", "password": "pass 123 tomorrow", "title": "Gym."}
    assert review(arguments, "I'm John Doe, my password is pass 123, gym", spec=spec).changes == ()


def test_unambiguous_coercions_are_changes_with_their_reason() -> None:
    result = review(call(time="2026-11-12 15:00:00", priority="High", repeat="5"), "hi")
    assert result.arguments["priority"] == "high" and result.arguments["repeat"] == 5
    assert {c.field: c.reason for c in result.changes} == {
        "priority": "the allowed value differing only in case or spaces", "repeat": "a whole number given as text"}
    assert result.ok


def test_problems_name_the_field_and_what_is_wrong() -> None:
    result = review({"token": "t", "time": "someday", "priority": "urgent", "repeat": "twice"}, "hi")
    assert result.problems == (
        f"time: 'someday' is not a valid date-time (expected {FORMAT})",
        "content: missing (required)",
        "priority: 'urgent' is not one of ['low', 'normal', 'high']",
        "repeat: 'twice' is not of type 'integer'",
    )
    assert not result.ok and result.as_dict()["problems"] == list(result.problems)


def test_schema_format_is_checked_and_null_optional_values_count_as_left_out() -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {
        "at": {"type": "string", "format": "date-time"}, "note": {"type": "string"}}, "required": ["at"]})
    assert review({"at": "2026-11-12T15:00:00+01:00", "note": None}, "hi", spec=spec).ok
    assert review({"at": "soon"}, "hi", spec=spec).problems == (
        "at: 'soon' is not a valid date-time (expected ISO 8601)",)


def test_an_enum_written_on_an_array_checks_its_items() -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {
        "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["trust", "view"]}}})
    assert review({"metrics": ["view"]}, "hi", spec=spec).ok
    assert review({"metrics": ["views"]}, "hi", spec=spec).problems == (
        "metrics.0: 'views' is not one of ['trust', 'view']",)


def test_a_broken_tool_schema_is_a_problem_not_an_exception() -> None:
    spec = ToolSpec("T", "", {"type": "object", "properties": {"a": {"type": "no-such-type"}}})
    assert review({"a": 1}, "hi", spec=spec).problems[0].startswith("the tool's schema is invalid")


def test_options_switched_off_change_nothing() -> None:
    arguments = call(content="Meeting with the marketing team at 2pm tomorrow.", time="tomorrow at 3pm",
                     priority="HIGH", repeat="2")
    result = review(arguments, "add a meeting with the marketing team tomorrow at 2pm",
                    ground_dates=False, keep_user_words=False, check_schema=False)
    assert result.arguments == arguments and result.changes == () and result.problems == ()


def test_the_callers_arguments_are_not_mutated() -> None:
    arguments = call(time="tomorrow at 3pm")
    review(arguments, "hi")
    assert arguments["time"] == "tomorrow at 3pm"


MEETING = ToolSpec("AddMeeting", "", {"type": "object", "properties": {
    "meeting_topic": {"type": "string"},
    "start_time": {"type": "string", "description": f"Format: {FORMAT}"},
    "end_time": {"type": "string", "description": f"Format: {FORMAT}"}}})


def test_an_interval_phrase_grounds_a_start_and_an_end_argument() -> None:
    result = review({"meeting_topic": "budget", "start_time": "2026-11-12 02:00:00", "end_time": "2026-11-12 04:00:00"},
                    "set up the budget meeting tomorrow from 2pm to 4pm", spec=MEETING)
    assert (result.arguments["start_time"], result.arguments["end_time"]) == ("2026-11-12 14:00:00",
                                                                              "2026-11-12 16:00:00")
    assert [c.reason for c in result.changes] == ["the user said 'tomorrow from 2pm to 4pm'"] * 2
    # a phrase without an end is about neither argument in particular
    assert review({"start_time": "2026-11-12 02:00:00", "end_time": "2026-11-12 04:00:00"},
                  "tomorrow at 2pm", spec=MEETING).changes == ()
    # from/to are not start/end (ModifyAlarm's from_time is the alarm's old time)
    alarm = ToolSpec("ModifyAlarm", "", {"type": "object", "properties": {
        "from_time": {"type": "string"}, "to_time": {"type": "string"}}})
    assert review({"from_time": "2026-11-12 07:00:00", "to_time": "2026-11-12 08:00:00"},
                  "I want it to be 9:00AM to 10:00AM", spec=alarm).changes == ()


def test_a_naive_now_and_odd_schemas_do_not_raise() -> None:
    naive = review_arguments(AGENDA, call(time="tomorrow at 3pm"), user_text=["hi"], now=datetime(2026, 11, 11, 10))
    assert naive.arguments["time"] == "2026-11-12 15:00:00"
    for parameters in ({}, {"type": "object"}, {"properties": []}, {"properties": {"a": "x"}, "required": 3}):
        assert review_arguments(ToolSpec("T", "", parameters), {"a": "tomorrow"}, user_text=[], now=NOW).arguments \
            == {"a": "tomorrow"}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.dictionaries(st.sampled_from(["token", "content", "time", "location", "priority", "repeat", "x"]),
                              st.one_of(st.text(max_size=40), st.integers(), st.none(), st.booleans(),
                                        st.sampled_from(["tomorrow at 3pm", "03:00", "2026-02-30 10:00:00", "HIGH",
                                                         "at 25:00", "the 31st", "Meeting at 2pm."]))),
       users=st.lists(st.text(max_size=60), max_size=3))
def test_review_never_raises(values: dict, users: list[str]) -> None:
    result = review_arguments(AGENDA, values, user_text=users, now=NOW)
    assert set(result.arguments) == set(values)
