"""CommandService with fake backends: briefing, weather, calendar, emails, help, and their errors."""

from __future__ import annotations

import asyncio
from datetime import date, datetime, timedelta
from typing import Any

import pytest

from assistant.commands.parser import CommandParser
from assistant.commands.service import CommandResult, CommandService, validate
from assistant.errors import ServiceUnavailableError, UpstreamError, ValidationFailed
from assistant.tools.base import ToolError
from assistant.tools.calendar import CalendarEvent
from assistant.tools.tasks import Task
from tests.assistant.commands.fakes import (
    BERLIN,
    NOW,
    FakeCalendar,
    FakeMail,
    FakeReminderStore,
    FakeTasks,
    FakeWeather,
    mail,
    reminder,
    reminder_runner,
    toolbox,
)

USER = "user-1"


def service(default_location: str | None = None, **backends: Any) -> CommandService:
    return CommandService(toolbox(**backends), CommandParser(None, BERLIN, lambda: NOW), BERLIN, default_location,
                          lambda: NOW)


def run(svc: CommandService, command: str, args: dict | None = None) -> CommandResult:
    return asyncio.run(svc.run(USER, command, args))


def everything() -> dict[str, Any]:
    calendar = FakeCalendar([
        CalendarEvent("e2", "Standup", datetime(2026, 11, 11, 9, 30, tzinfo=BERLIN),
                      datetime(2026, 11, 11, 9, 45, tzinfo=BERLIN)),
        CalendarEvent("e1", "Dentist", datetime(2026, 11, 11, 16, 0, tzinfo=BERLIN),
                      datetime(2026, 11, 11, 17, 0, tzinfo=BERLIN)),
        CalendarEvent("e3", "Tomorrow's thing", datetime(2026, 11, 12, 9, 0, tzinfo=BERLIN)),
        CalendarEvent("e4", "Conference", date(2026, 11, 13), date(2026, 11, 15)),
    ])
    tasks = FakeTasks([Task("t1", "Pay rent", date(2026, 11, 12)), Task("t2", "Old", status="completed"),
                       Task("t3", "Call plumber")])
    store = FakeReminderStore([
        reminder(USER, "stretch", NOW + timedelta(hours=2)),
        reminder(USER, "overdue", NOW - timedelta(hours=1)),
        reminder(USER, "next week", NOW + timedelta(days=7)),
        reminder(USER, "fired", NOW - timedelta(hours=2), fired=True),
        reminder("someone-else", "not mine", NOW + timedelta(hours=1)),
    ])
    return {"weather": FakeWeather(), "calendar": calendar, "email": FakeMail([mail("1", "a"), mail("2", "b", False),
                                                                             mail("3", "c")]),
            "tasks": tasks, "reminders": reminder_runner(store)}


# --- briefing ------------------------------------------------------------------------------------


def test_briefing_assembles_every_configured_capability() -> None:
    backends = everything()
    result = run(service(**backends), "briefing", {"location": "Berlin"})
    assert (result.command, result.status, result.executed_at) == ("briefing", "completed", "2026-11-11T09:00:00.000Z")
    r = result.result
    assert (r["date"], r["timezone"], r["unavailable"], r["errors"]) == ("2026-11-11", "Europe/Berlin", [], [])
    assert r["weather"]["location"] == {"name": "Berlin", "country": "Germany"}
    assert r["weather"]["current"]["conditions"] == "overcast" and r["weather"]["today"]["conditions"] == "slight rain"
    assert r["weather"]["units"]["temperature"] == "°C"
    assert [e["title"] for e in r["calendar"]["events"]] == ["Standup", "Dentist"]  # today's only, by start
    assert r["calendar"]["events"][0]["start"] == "2026-11-11T09:30:00+01:00"
    assert (r["calendar"]["start"], r["calendar"]["days"], r["calendar"]["count"]) == ("2026-11-11", 1, 2)
    (begin, end), = backends["calendar"].ranges
    assert (begin.isoformat(), end.isoformat()) == ("2026-11-11T00:00:00+01:00", "2026-11-12T00:00:00+01:00")
    assert r["email"] == {"unread": 2}
    assert r["tasks"]["open"] == 2 and [t["title"] for t in r["tasks"]["items"]] == ["Pay rent", "Call plumber"]
    assert r["reminders"]["count"] == 2
    assert [(d["text"], d["overdue"]) for d in r["reminders"]["due"]] == [("overdue", True), ("stretch", False)]
    assert r["reminders"]["due"][1]["due_at"] == "2026-11-11T12:00:00+01:00"


def test_missing_capabilities_are_named_not_errors() -> None:
    result = run(service(email=FakeMail([mail("1", "a")])), "briefing")
    r = result.result
    assert result.status == "completed" and r["errors"] == []
    assert r["email"] == {"unread": 1}
    assert all(r[c] is None for c in ("weather", "calendar", "tasks", "reminders"))
    reasons = {u["capability"]: u["reason"] for u in r["unavailable"]}
    assert list(reasons) == ["weather", "calendar", "tasks", "reminders"]
    assert reasons["calendar"] == "not configured (set [calendar] url)"


def test_weather_without_a_location_is_listed_as_needing_one() -> None:
    weather = FakeWeather()
    r = run(service(weather=weather), "briefing").result
    assert r["weather"] is None and weather.asked == []
    assert {"capability": "weather", "reason": "no location: pass args.location or set [commands] default_location"} \
        in r["unavailable"]
    r = run(service("Paris", weather=weather), "briefing").result  # the configured default
    assert r["weather"]["location"]["name"] == "Paris" and weather.asked == ["Paris"]


def test_a_failing_backend_makes_the_briefing_partial() -> None:
    backends = everything()
    backends["email"].fail = ToolError("IMAP server at imap.example.org:993 unreachable: [Errno 111] Connection refused")
    backends["tasks"].fail = RuntimeError("boom")
    result = run(service(**backends), "briefing", {"location": "Atlantis"})
    assert result.status == "partial"
    assert result.result["errors"] == [
        {"capability": "weather", "error": "no place called 'Atlantis' was found"},
        {"capability": "email", "error": "IMAP server at imap.example.org:993 unreachable: [Errno 111] Connection "
                                         "refused"},
        {"capability": "tasks", "error": "RuntimeError: boom"},
    ]
    assert result.result["email"] is None and result.result["tasks"] is None
    assert result.result["calendar"]["count"] == 2  # the others still came


def test_a_capability_configured_but_unavailable_says_why() -> None:
    svc = service()
    svc.toolbox.status[0] = type(svc.toolbox.status[0])("weather", True, False, (), "no network")
    r = run(svc, "briefing").result
    assert r["unavailable"][0] == {"capability": "weather", "reason": "configured but unavailable: no network"}


# --- single commands -----------------------------------------------------------------------------


def test_weather_command() -> None:
    result = run(service(weather=FakeWeather()), "weather", {"location": "Paris"})
    assert result.status == "completed" and result.result["location"]["name"] == "Paris"
    assert set(result.result) == {"location", "current", "today", "units"}


def test_weather_command_location_rules() -> None:
    with pytest.raises(ValidationFailed) as caught:
        run(service(weather=FakeWeather()), "weather")
    assert caught.value.details["fields"][0]["field"] == "args.location"
    with pytest.raises(ValidationFailed) as caught:
        run(service(weather=FakeWeather()), "weather", {"location": "Atlantis"})
    assert caught.value.details["fields"] == [{"field": "args.location", "error": "no place called 'Atlantis' was found"}]
    assert run(service("berlin", weather=FakeWeather()), "WEATHER").result["location"]["name"] == "Berlin"


def test_calendar_command_covers_days_from_the_start_of_today() -> None:
    calendar = everything()["calendar"]
    result = run(service(calendar=calendar), "calendar", {"days": 3})
    r = result.result
    assert [e["title"] for e in r["events"]] == ["Standup", "Dentist", "Tomorrow's thing", "Conference"]
    conference = r["events"][3]
    assert conference["all_day"] is True and (conference["start"], conference["end"]) == ("2026-11-13", "2026-11-14")
    assert (r["start"], r["days"], r["timezone"], r["count"]) == ("2026-11-11", 3, "Europe/Berlin", 4)
    (begin, end), = calendar.ranges
    assert end - begin == timedelta(days=3)
    assert run(service(calendar=FakeCalendar()), "calendar").result["days"] == 1  # the default


def test_emails_command_lists_the_newest() -> None:
    reader = FakeMail([mail(str(i), f"subject {i}") for i in range(15)])
    r = run(service(email=reader), "emails", {"count": 3}).result
    assert r["count"] == 3 and [m["subject"] for m in r["emails"]] == ["subject 0", "subject 1", "subject 2"]
    assert set(r["emails"][0]) == {"id", "from", "to", "subject", "date", "snippet", "unread"}
    assert reader.searches == [{"words": [], "unread_only": False, "limit": 3, "since": None}]
    assert run(service(email=reader), "emails").result["count"] == 10


@pytest.mark.parametrize(("command", "capability", "configure"), [
    ("weather", "weather", "[weather] enabled = true"),
    ("calendar", "calendar", "[calendar] url"),
    ("emails", "email", "[email] imap_host and smtp_host"),
])
def test_a_command_without_its_capability_is_unavailable(command: str, capability: str, configure: str) -> None:
    with pytest.raises(ServiceUnavailableError) as caught:
        run(service(), command, {"location": "Paris"} if command == "weather" else None)
    assert caught.value.details == {"capability": capability, "configure": configure,
                                    "reason": f"not configured (set {configure})"}
    assert configure in caught.value.message


def test_a_failing_backend_is_an_upstream_error() -> None:
    calendar = FakeCalendar()
    calendar.fail = ToolError("calendar server at http://dav unreachable")
    with pytest.raises(UpstreamError) as caught:
        run(service(calendar=calendar), "calendar")
    assert caught.value.message == "calendar: calendar server at http://dav unreachable"


def test_help_lists_commands_arguments_and_availability() -> None:
    r = run(service(weather=FakeWeather(), reminders=reminder_runner(FakeReminderStore())), "help").result
    by_name = {c["name"]: c for c in r["commands"]}
    assert list(by_name) == ["briefing", "weather", "calendar", "emails", "help"]
    assert by_name["weather"]["available"] and by_name["weather"]["reason"] is None
    assert not by_name["calendar"]["available"] and by_name["calendar"]["reason"] == "not configured (set [calendar] url)"
    assert by_name["briefing"]["available"] and by_name["briefing"]["uses"] == ["weather", "reminders"]
    (days,) = by_name["calendar"]["args"]
    assert days == {"name": "days", "type": "integer", "required": False, "default": 1, "minimum": 1, "maximum": 366,
                    "description": "How many days from the start of today."}
    assert by_name["emails"]["args"][0]["maximum"] == 50 and by_name["help"]["args"] == []


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "args", "fields"), [
    ("dance", None, [("command", "unknown command 'dance'; known: briefing, weather, calendar, emails, help")]),
    ("", None, [("command", "unknown command ''; known: briefing, weather, calendar, emails, help")]),
    ("calendar", {"days": 0}, [("args.days", "Input should be greater than or equal to 1 (got 0)")]),
    ("calendar", {"days": 367}, [("args.days", "Input should be less than or equal to 366 (got 367)")]),
    ("calendar", {"days": "5"}, [("args.days", "Input should be a valid integer (got '5')")]),
    ("calendar", {"days": True}, [("args.days", "Input should be a valid integer (got True)")]),
    ("emails", {"count": 51}, [("args.count", "Input should be less than or equal to 50 (got 51)")]),
    ("emails", {"count": 2.5}, [("args.count", "Input should be a valid integer (got 2.5)")]),
    ("emails", {"limit": 5}, [("args.limit", "unknown argument; emails takes: count")]),
    ("help", {"x": 1}, [("args.x", "unknown argument; help takes: no arguments")]),
    ("briefing", {"days": 1}, [("args.days", "unknown argument; briefing takes: location")]),
    ("weather", {"location": 5}, [("args.location", "Input should be a valid string (got 5)")]),
    ("weather", {"location": ""}, [("args.location", "String should have at least 1 character (got '')")]),
    ("weather", {"location": "   "}, [("args.location", "must name a place")]),
    ("weather", ["Paris"], [("args", "must be a JSON object")]),
])
def test_bad_commands_and_arguments_name_the_field(command: str, args: Any, fields: list[tuple[str, str]]) -> None:
    with pytest.raises(ValidationFailed) as caught:
        validate(command, args)
    assert [(f["field"], f["error"]) for f in caught.value.details["fields"]] == fields


def test_every_bad_argument_is_named() -> None:
    with pytest.raises(ValidationFailed) as caught:
        validate("emails", {"count": 0, "unread": True})
    assert [f["field"] for f in caught.value.details["fields"]] == ["args.count", "args.unread"]


def test_create_reads_the_zone_and_default_location(make_settings) -> None:
    settings = make_settings(calendar={"timezone": "Europe/Berlin"}, commands={"default_location": "Paris"})
    svc = CommandService.create(settings, toolbox(), None)
    assert svc.zone.key == "Europe/Berlin" and svc.parser.zone is svc.zone and svc.default_location == "Paris"
