"""list_calendar_events and create_calendar_event over CalDAV (capability ``calendar``).

The tools parse and check what the model sent (ISO 8601 dates and times; naive times are read in
``[calendar] timezone``) and format the answer; a :class:`CalendarProvider` only talks to the server.
``CalDAVCalendar`` uses the ``caldav`` library, which also expands recurring events client-side
(``expand=True``), so every occurrence in the range is listed with its own start.

All-day events are shown with dates, ``all_day: true`` and an inclusive ``end`` (the last day), and
are created the same way (start and end as dates); on the wire DTEND stays exclusive as iCalendar
says. Timed events are shown in the configured time zone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Annotated, Any, Protocol
from uuid import uuid4

from pydantic import Field

from assistant.tools.base import Capability, CapabilityDeps, ToolContext, ToolError, pick_backend, tool
from assistant.tools.dav import CalDAVCollection, iso, parse_when, shorten, start_of, zone

log = logging.getLogger("assistant.tools.calendar")


@dataclass(frozen=True)
class CalendarEvent:
    """An event (or one occurrence of a recurring one) with iCalendar semantics: ``end`` is
    exclusive, a ``date`` start means an all-day event, a naive date-time is floating."""

    uid: str
    title: str
    start: date | datetime
    end: date | datetime | None = None
    location: str | None = None
    description: str | None = None

    @property
    def all_day(self) -> bool:
        return not isinstance(self.start, datetime)


class CalendarProvider(Protocol):
    timezone: tzinfo  # how naive times are read, and the zone events are shown in

    def events(self, start: datetime, end: datetime) -> list[CalendarEvent]:
        """Events overlapping [start, end), recurring ones expanded to their occurrences."""
        ...

    def create_event(self, event: CalendarEvent) -> CalendarEvent: ...


# --- the tools -------------------------------------------------------------------------------------


def _provider(ctx: ToolContext) -> CalendarProvider:
    return ctx.backend("calendar")


def _event_dict(event: CalendarEvent, tz: tzinfo, *, brief: bool = False) -> dict[str, Any]:
    end = event.end
    if event.all_day and isinstance(end, date) and not isinstance(end, datetime) and end > event.start:
        end = end - timedelta(days=1)  # shown inclusive: the last day of the event
    out: dict[str, Any] = {"uid": event.uid, "title": event.title, "start": iso(event.start, tz), "end": iso(end, tz)}
    if event.all_day:
        out["all_day"] = True
    if not brief:
        out["location"] = event.location
        out["description"] = shorten(event.description, 160)
    return out


@tool("calendar", icon="📅")
def list_calendar_events(
    ctx: ToolContext,
    start: Annotated[str | None, Field(description="First day or moment, ISO 8601 (2024-05-01 or "
                                                   "2024-05-01T09:00); default now.")] = None,
    days: Annotated[int, Field(ge=1, le=366, description="How many days from start.")] = 7,
) -> list[dict]:
    """List the events in the user's calendar from start for the given number of days, sorted by start."""
    provider = _provider(ctx)
    tz = provider.timezone
    begin = datetime.now(tz) if start is None else start_of(parse_when(start, "start", tz), tz)
    found = provider.events(begin, begin + timedelta(days=days))
    found = sorted(found, key=lambda e: (start_of(e.start, tz), e.title))
    return [_event_dict(e, tz) for e in found]


def _timed_end(begin: datetime, end: str | None, duration_minutes: int, tz: tzinfo) -> datetime:
    if end is None:
        return begin + timedelta(minutes=duration_minutes)
    finish = parse_when(end, "end", tz)
    if not isinstance(finish, datetime):
        raise ToolError(f"end: {end!r} is a date but start is a date-time; give both as dates (all-day event) "
                        "or both as date-times")
    if finish <= begin:
        raise ToolError(f"end {finish.isoformat()} is not after start {begin.isoformat()}")
    return finish


def _all_day_end(first: date, end: str | None, tz: tzinfo) -> date:
    if end is None:
        return first + timedelta(days=1)
    last = parse_when(end, "end", tz)
    if isinstance(last, datetime):
        raise ToolError(f"end: {end!r} is a date-time but start is a date; give both as dates (all-day event) "
                        "or both as date-times")
    if last < first:
        raise ToolError(f"end {last.isoformat()} is before start {first.isoformat()}")
    return last + timedelta(days=1)  # iCalendar's DTEND of an all-day event is exclusive


@tool("calendar", icon="🗓️")
def create_calendar_event(
    ctx: ToolContext,
    title: Annotated[str, Field(min_length=1, max_length=500, description="What the event is.")],
    start: Annotated[str, Field(description="ISO 8601 date-time (2024-05-01T14:30), or a date "
                                            "(2024-05-01) for an all-day event.")],
    end: Annotated[str | None, Field(description="ISO 8601 end; default start + duration_minutes. For an "
                                                 "all-day event, the last day.")] = None,
    duration_minutes: Annotated[int, Field(ge=1, le=20_160, description="Length when no end is given.")] = 60,
    location: Annotated[str | None, Field(max_length=500, description="Where.")] = None,
    description: Annotated[str | None, Field(max_length=5000, description="Notes.")] = None,
) -> dict:
    """Add an event to the user's calendar."""
    if not title.strip():
        raise ToolError("title: give the event a title")
    provider = _provider(ctx)
    tz = provider.timezone
    begin = parse_when(start, "start", tz)
    if isinstance(begin, datetime):
        finish: date | datetime = _timed_end(begin, end, duration_minutes, tz)
    else:
        finish = _all_day_end(begin, end, tz)
    event = CalendarEvent(str(uuid4()), title.strip(), begin, finish, location or None, description or None)
    return _event_dict(provider.create_event(event), tz, brief=True)


CALENDAR_TOOLS = (list_calendar_events, create_calendar_event)


# --- the CalDAV backend ----------------------------------------------------------------------------


def _component_to_event(component: Any) -> CalendarEvent | None:
    """The event of a VEVENT; None (logged) when it has no usable start."""
    try:
        begin = component.start
    except ValueError as exc:  # icalendar's IncompleteComponent / InvalidCalendar
        log.warning("skipping the event %s: %s", component.get("UID"), exc)
        return None
    try:
        finish = component.end
    except ValueError:
        finish = None
    text = {key: str(component[key]) if key in component else None
            for key in ("UID", "SUMMARY", "LOCATION", "DESCRIPTION")}
    return CalendarEvent(text["UID"] or "", text["SUMMARY"] or "(no title)", begin, finish,
                         text["LOCATION"], text["DESCRIPTION"])


def _event_to_ical(event: CalendarEvent) -> str:
    import icalendar

    vevent = icalendar.Event()
    vevent.add("UID", event.uid)
    vevent.add("DTSTAMP", datetime.now(UTC))
    vevent.add("SUMMARY", event.title)
    vevent.add("DTSTART", event.start)
    if event.end is not None:
        vevent.add("DTEND", event.end)
    if event.location:
        vevent.add("LOCATION", event.location)
    if event.description:
        vevent.add("DESCRIPTION", event.description)
    vcalendar = icalendar.Calendar()
    vcalendar.add("PRODID", "-//assistant//calendar tool//EN")
    vcalendar.add("VERSION", "2.0")
    vcalendar.add_component(vevent)
    vcalendar.add_missing_timezones()
    return vcalendar.to_ical().decode()


class CalDAVCalendar:
    """A CalDAV calendar, found on first use (see :class:`assistant.tools.dav.CalDAVCollection`)."""

    def __init__(self, section: Any):
        self.timezone = zone("calendar", section.timezone)
        self.collection = CalDAVCollection(section, service="calendar", name=section.calendar, component="VEVENT")

    def events(self, start: datetime, end: datetime) -> list[CalendarEvent]:
        with self.collection.session() as calendar:
            found = calendar.search(event=True, start=start, end=end, expand=True)
            events = (_component_to_event(item.icalendar_component) for item in found)
            return [e for e in events if e is not None]

    def create_event(self, event: CalendarEvent) -> CalendarEvent:
        with self.collection.session() as calendar:
            calendar.add_event(ical=_event_to_ical(event), no_overwrite=True)
        return event

    def close(self) -> None:
        self.collection.close()


BACKENDS = {"caldav": CalDAVCalendar}


def _create(deps: CapabilityDeps) -> CalendarProvider:
    section = deps.settings.calendar
    return pick_backend("calendar", BACKENDS, section.backend)(section)


CAPABILITY = Capability(
    "calendar", CALENDAR_TOOLS, configured=lambda settings: bool(settings.calendar.url), create=_create,
    description="the user's calendar (CalDAV)",
)
