"""The calendar tools over a fake CalendarProvider: argument checks, dates read in the section's
time zone, the answer's shape; the CalDAV backend's iCalendar conversion and its lazy creation."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import icalendar
import pytest

from assistant.errors import ConfigError
from assistant.tools import calendar
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.calendar import (
    CalDAVCalendar,
    CalendarEvent,
    _component_to_event,
    _event_to_ical,
    create_calendar_event,
    list_calendar_events,
)

BERLIN = ZoneInfo("Europe/Berlin")


class FakeCalendar:
    """A CalendarProvider that keeps events in a list and records the ranges asked for."""

    def __init__(self, timezone: ZoneInfo = BERLIN, events: list[CalendarEvent] | None = None):
        self.timezone = timezone
        self.stored = list(events or [])
        self.ranges: list[tuple[datetime, datetime]] = []

    def events(self, start: datetime, end: datetime) -> list[CalendarEvent]:
        self.ranges.append((start, end))
        return list(self.stored)

    def create_event(self, event: CalendarEvent) -> CalendarEvent:
        self.stored.append(event)
        return event


@pytest.fixture
def fake() -> FakeCalendar:
    return FakeCalendar()


@pytest.fixture
def ctx(fake: FakeCalendar) -> ToolContext:
    return ToolContext("u1", {"calendar": fake})


# --- list_calendar_events --------------------------------------------------------------------------


def test_the_range_starts_now_in_the_section_time_zone_by_default(ctx: ToolContext, fake: FakeCalendar) -> None:
    before = datetime.now(UTC)
    assert list_calendar_events(ctx, {}) == []
    (start, end), = fake.ranges
    assert start.tzinfo == BERLIN and before <= start <= datetime.now(UTC)
    assert end - start == timedelta(days=7)


@pytest.mark.parametrize(("given", "expected"), [
    ("2024-05-01", datetime(2024, 5, 1, tzinfo=BERLIN)),  # a date: its midnight in Berlin
    ("2024-05-01T14:30", datetime(2024, 5, 1, 14, 30, tzinfo=BERLIN)),  # naive: Berlin time
    ("2024-05-01 14:30:00", datetime(2024, 5, 1, 14, 30, tzinfo=BERLIN)),
    ("2024-05-01T12:30:00Z", datetime(2024, 5, 1, 14, 30, tzinfo=BERLIN)),  # aware: converted
    ("2024-05-01T14:30:00-04:00", datetime(2024, 5, 1, 20, 30, tzinfo=BERLIN)),
])
def test_start_is_read_in_the_section_time_zone(ctx: ToolContext, fake: FakeCalendar, given: str,
                                                expected: datetime) -> None:
    list_calendar_events(ctx, {"start": given, "days": 2})
    (start, end), = fake.ranges
    assert start == expected and start.utcoffset() == timedelta(hours=2) and end == expected + timedelta(days=2)


def test_today_and_tomorrow_are_understood(ctx: ToolContext, fake: FakeCalendar) -> None:
    list_calendar_events(ctx, {"start": "tomorrow", "days": 1})
    (start, _), = fake.ranges
    assert start.date() == datetime.now(BERLIN).date() + timedelta(days=1)
    assert (start.hour, start.minute) == (0, 0)


@pytest.mark.parametrize("arguments", [{"days": 0}, {"days": 367}, {"days": "a week"}, {"from": "2024-05-01"}])
def test_out_of_range_arguments_are_refused(ctx: ToolContext, arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for list_calendar_events"):
        list_calendar_events(ctx, arguments)


@pytest.mark.parametrize("bad", ["next monday", "2024-13-01", "01/05/2024", ""])
def test_a_bad_start_names_the_value(ctx: ToolContext, bad: str) -> None:
    with pytest.raises(ToolError, match=f"start: '{bad}' is not an ISO 8601 date"):
        list_calendar_events(ctx, {"start": bad})


def test_events_come_back_sorted_by_start_and_shown_in_the_zone() -> None:
    tokyo = ZoneInfo("Asia/Tokyo")
    events = [
        CalendarEvent("b", "Lunch", datetime(2024, 5, 1, 12, 0, tzinfo=BERLIN), datetime(2024, 5, 1, 13, 0, tzinfo=BERLIN),
                      "Canteen", "Soup\n\n   and bread " + "x" * 300),
        CalendarEvent("c", "Tokyo call", datetime(2024, 5, 1, 16, 0, tzinfo=tokyo), datetime(2024, 5, 1, 17, 0, tzinfo=tokyo)),
        CalendarEvent("a", "May Day", date(2024, 5, 1), date(2024, 5, 2)),
        CalendarEvent("d", "Floating", datetime(2024, 5, 1, 10, 0), datetime(2024, 5, 1, 10, 30)),
    ]
    ctx = ToolContext("u1", {"calendar": FakeCalendar(events=events)})
    listed = list_calendar_events(ctx, {"start": "2024-05-01", "days": 1})
    assert [e["uid"] for e in listed] == ["a", "c", "d", "b"]
    assert listed[0] == {"uid": "a", "title": "May Day", "start": "2024-05-01", "end": "2024-05-01", "all_day": True,
                         "location": None, "description": None}
    assert listed[1]["start"] == "2024-05-01T09:00:00+02:00"  # 16:00 in Tokyo
    assert listed[2]["start"] == "2024-05-01T10:00:00"  # floating stays as written
    lunch = listed[3]
    assert lunch["location"] == "Canteen" and lunch["description"].startswith("Soup and bread xxx")
    assert len(lunch["description"]) == 160 and lunch["description"].endswith("…")


# --- create_calendar_event -------------------------------------------------------------------------


def test_a_naive_start_is_created_in_the_section_time_zone(ctx: ToolContext, fake: FakeCalendar) -> None:
    created = create_calendar_event(ctx, {"title": "  Dentist ", "start": "2024-01-15T09:00", "location": "Main St"})
    event, = fake.stored
    assert event.start == datetime(2024, 1, 15, 9, 0, tzinfo=BERLIN) and event.start.tzinfo == BERLIN
    assert event.end == datetime(2024, 1, 15, 10, 0, tzinfo=BERLIN)  # default: 60 minutes
    assert (event.title, event.location, event.description) == ("Dentist", "Main St", None)
    assert created == {"uid": event.uid, "title": "Dentist", "start": "2024-01-15T09:00:00+01:00",
                       "end": "2024-01-15T10:00:00+01:00"}


def test_end_or_duration_sets_the_end(ctx: ToolContext, fake: FakeCalendar) -> None:
    create_calendar_event(ctx, {"title": "a", "start": "2024-01-15T09:00", "duration_minutes": 15})
    create_calendar_event(ctx, {"title": "b", "start": "2024-01-15T09:00", "end": "2024-01-15T08:30:00Z"})
    assert [e.end for e in fake.stored] == [datetime(2024, 1, 15, 9, 15, tzinfo=BERLIN),
                                           datetime(2024, 1, 15, 9, 30, tzinfo=BERLIN)]


def test_an_all_day_event_takes_dates_and_an_inclusive_end(ctx: ToolContext, fake: FakeCalendar) -> None:
    one = create_calendar_event(ctx, {"title": "Holiday", "start": "2024-05-01"})
    three = create_calendar_event(ctx, {"title": "Trip", "start": "2024-05-03", "end": "2024-05-05"})
    assert [(e.start, e.end) for e in fake.stored] == [(date(2024, 5, 1), date(2024, 5, 2)),
                                                       (date(2024, 5, 3), date(2024, 5, 6))]  # DTEND exclusive
    assert (one["start"], one["end"], one["all_day"]) == ("2024-05-01", "2024-05-01", True)
    assert (three["start"], three["end"]) == ("2024-05-03", "2024-05-05")


@pytest.mark.parametrize(("arguments", "message"), [
    ({"start": "2024-01-15T09:00", "end": "2024-01-15T08:00"}, "end 2024-01-15T08:00:00.01:00 is not after start"),
    ({"start": "2024-01-15T09:00", "end": "2024-01-15T09:00"}, "is not after start"),
    ({"start": "2024-05-03", "end": "2024-05-02"}, "end 2024-05-02 is before start 2024-05-03"),
    ({"start": "2024-05-03", "end": "2024-05-04T10:00"}, "is a date-time but start is a date"),
    ({"start": "2024-05-03T10:00", "end": "2024-05-04"}, "is a date but start is a date-time"),
    ({"start": "15.01.2024 09:00"}, "start: '15.01.2024 09:00' is not an ISO 8601"),
    ({"start": "2024-01-15T09:00", "end": "later"}, "end: 'later' is not an ISO 8601"),
    ({"start": "2024-01-15T09:00", "title": " \n"}, "title: give the event a title"),
    ({"start": "2024-01-15T25:00"}, "'2024-01-15T25:00' is not an ISO 8601"),
])
def test_bad_times_are_tool_errors_and_nothing_is_created(ctx: ToolContext, fake: FakeCalendar, arguments: dict,
                                                         message: str) -> None:
    with pytest.raises(ToolError, match=message):
        create_calendar_event(ctx, {"title": "x", **arguments})
    assert fake.stored == []


@pytest.mark.parametrize("arguments", [{"start": "2024-01-15T09:00"}, {"title": "", "start": "2024-01-15T09:00"},
                                       {"title": "x", "start": "2024-01-15T09:00", "duration_minutes": 0}])
def test_missing_or_empty_arguments_are_refused(ctx: ToolContext, arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for create_calendar_event"):
        create_calendar_event(ctx, arguments)


def test_without_the_capability_the_tools_say_so() -> None:
    with pytest.raises(ToolError, match="the calendar capability is not configured"):
        list_calendar_events(ToolContext("u1"), {})


# --- the CalDAV backend's pieces -------------------------------------------------------------------


def test_an_event_round_trips_through_icalendar() -> None:
    event = CalendarEvent("uid-1", "Dentist", datetime(2024, 1, 15, 9, 0, tzinfo=BERLIN),
                          datetime(2024, 1, 15, 10, 0, tzinfo=BERLIN), "Main St", "Bring the card")
    text = _event_to_ical(event)
    assert "DTSTART;TZID=Europe/Berlin:20240115T090000" in text and "BEGIN:VTIMEZONE" in text
    parsed = icalendar.Calendar.from_ical(text)
    vevent, = parsed.walk("VEVENT")
    assert _component_to_event(vevent) == event


def test_a_missing_dtend_gets_the_icalendar_default_and_a_missing_start_is_skipped() -> None:
    vevent = icalendar.Event.from_ical("BEGIN:VEVENT\r\nUID:x\r\nDTSTART;VALUE=DATE:20240501\r\nEND:VEVENT\r\n")
    assert _component_to_event(vevent) == CalendarEvent("x", "(no title)", date(2024, 5, 1), date(2024, 5, 2))
    timed = icalendar.Event.from_ical("BEGIN:VEVENT\r\nUID:y\r\nSUMMARY:Call\r\nDTSTART:20240501T100000Z\r\n"
                                      "DURATION:PT30M\r\nEND:VEVENT\r\n")
    assert _component_to_event(timed).end == datetime(2024, 5, 1, 10, 30, tzinfo=UTC)
    assert _component_to_event(icalendar.Event.from_ical("BEGIN:VEVENT\r\nUID:z\r\nEND:VEVENT\r\n")) is None


def test_the_capability_is_configured_by_url_and_created_without_connecting(make_settings) -> None:
    assert not calendar.CAPABILITY.configured(make_settings())
    settings = make_settings(calendar={"url": "http://127.0.0.1:9/dav/", "timezone": "Europe/Berlin"})
    assert calendar.CAPABILITY.configured(settings)
    backend = calendar.CAPABILITY.create(CapabilityDeps(settings))  # port 9 is closed: nothing is contacted
    assert isinstance(backend, CalDAVCalendar) and backend.timezone == BERLIN
    backend.close()


@pytest.mark.parametrize(("section", "message"), [
    ({"backend": "exchange"}, "calendar.backend: unknown backend 'exchange'; known: caldav"),
    ({"timezone": "Mars/Olympus"}, "calendar.timezone: unknown time zone 'Mars/Olympus'"),
])
def test_configuration_mistakes_are_config_errors(make_settings, section: dict, message: str) -> None:
    settings = make_settings(calendar={"url": "http://127.0.0.1:9/", **section})
    with pytest.raises(ConfigError, match=message):
        calendar.CAPABILITY.create(CapabilityDeps(settings))
