"""Fake backends of the tool capabilities the commands read: each implements its Protocol
(WeatherProvider, CalendarProvider, MailReader, TaskProvider, ReminderStore) and records what it
was asked; ``fail`` makes every call raise the given error."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from email.headerregistry import Address
from email.message import EmailMessage
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from assistant.tools.base import ToolRegistry
from assistant.tools.calendar import CalendarEvent
from assistant.tools.catalog import CapabilityStatus, Toolbox
from assistant.tools.mail import MailSummary, SavedDraft
from assistant.tools.reminders import LogDelivery, Reminder, ReminderRunner
from assistant.tools.tasks import Task
from assistant.tools.weather import CurrentWeather, DailyWeather, Forecast, Place

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 11, 9, 0, tzinfo=UTC)  # a Wednesday, 10:00 in Berlin


class _Failing:
    fail: Exception | None = None

    def _check(self) -> None:
        if self.fail is not None:
            raise self.fail


class FakeWeather(_Failing):
    PLACES: ClassVar[dict[str, Place]] = {"berlin": Place("Berlin", "Germany", 52.52, 13.41, "Europe/Berlin"),
              "paris": Place("Paris", "France", 48.85, 2.35, "Europe/Paris")}

    def __init__(self) -> None:
        self.asked: list[str] = []

    def geocode(self, name: str) -> Place | None:
        self._check()
        self.asked.append(name)
        return self.PLACES.get(name.lower())

    def forecast(self, place: Place, days: int) -> Forecast:
        self._check()
        current = CurrentWeather("2026-11-11T10:00", 7.5, 5.0, 80, 0.0, 12.0, 3)
        daily = tuple(DailyWeather(f"2026-11-{11 + i}", 61, 9.0, 4.0, 1.2, 70) for i in range(days))
        return Forecast(current, daily, {"temperature": "°C", "humidity": "%", "precipitation": "mm",
                                         "wind_speed": "km/h"})


class FakeCalendar(_Failing):
    def __init__(self, events: list[CalendarEvent] | None = None, timezone: ZoneInfo = BERLIN):
        self.timezone = timezone
        self.stored = list(events or [])
        self.ranges: list[tuple[datetime, datetime]] = []

    def events(self, start: datetime, end: datetime) -> list[CalendarEvent]:
        self._check()
        self.ranges.append((start, end))
        return [e for e in self.stored if start <= _aware(e.start, self.timezone) < end]

    def create_event(self, event: CalendarEvent) -> CalendarEvent:
        raise AssertionError("commands never create events")


def _aware(value: date | datetime, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=tz)
    return datetime(value.year, value.month, value.day, tzinfo=tz)


class FakeMail(_Failing):
    address = Address("Alice", addr_spec="alice@example.org")

    def __init__(self, found: list[MailSummary] | None = None):
        self.found = list(found or [])
        self.searches: list[dict[str, Any]] = []

    def search(self, words: list[str], *, unread_only: bool, limit: int, since: date | None) -> list[MailSummary]:
        self._check()
        self.searches.append({"words": words, "unread_only": unread_only, "limit": limit, "since": since})
        return self.found[:limit]

    def unread_count(self) -> int:
        self._check()
        return sum(m.unread for m in self.found)

    def save_draft(self, message: EmailMessage) -> SavedDraft:
        raise AssertionError("commands never save drafts")

    def send(self, message: EmailMessage) -> list[str]:
        raise AssertionError("commands never send mail")


def mail(uid: str, subject: str, unread: bool = True) -> MailSummary:
    return MailSummary(uid, "Bob <bob@example.net>", "alice@example.org", subject, "2026-11-11T08:00:00+01:00",
                       "Hello", unread)


class FakeTasks(_Failing):
    def __init__(self, tasks: list[Task] | None = None):
        self.stored = list(tasks or [])

    def tasks(self, include_completed: bool) -> list[Task]:
        self._check()
        return [t for t in self.stored if include_completed or not t.done]

    def create_task(self, task: Task) -> Task:
        raise AssertionError("commands never create tasks")

    def complete_task(self, task_id: str) -> Task | None:
        raise AssertionError("commands never complete tasks")


class FakeReminderStore(_Failing):
    def __init__(self, reminders: list[Reminder] | None = None):
        self.stored = list(reminders or [])

    def add(self, user_id: str, text: str, due_at: datetime) -> Reminder:
        raise AssertionError("commands never add reminders")

    def list_for_user(self, user_id: str, include_fired: bool = False) -> list[Reminder]:
        self._check()
        found = [r for r in self.stored if r.user_id == user_id and (include_fired or r.fired_at is None)]
        return sorted(found, key=lambda r: r.due_at)

    def due(self, now: datetime) -> list[Reminder]:
        return []

    def claim(self, reminder_id: str, fired_at: datetime) -> bool:
        return False

    def mark_fired(self, reminder_id: str, fired_at: datetime, channel: str, detail: str | None) -> None:
        pass


def reminder(user_id: str, text: str, due_at: datetime, fired: bool = False) -> Reminder:
    return Reminder(f"r-{text}", user_id, text, due_at, NOW - timedelta(days=1),
                    fired_at=due_at if fired else None)


def toolbox(**backends: Any) -> Toolbox:
    """A Toolbox holding ``backends``; every other capability is reported as not configured."""
    box = Toolbox(ToolRegistry(), dict(backends))
    for name in ("weather", "calendar", "email", "tasks", "reminders"):
        box.status.append(CapabilityStatus(name, name in backends, name in backends, ()))
    return box


def reminder_runner(store: FakeReminderStore, zone: ZoneInfo = BERLIN) -> ReminderRunner:
    return ReminderRunner(store, LogDelivery(), zone, clock=lambda: NOW)
