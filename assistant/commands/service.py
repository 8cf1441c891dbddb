"""Structured commands (``POST /v1/commands``): briefing, weather, calendar, emails, help.

Each command reads the backends of the configured tool capabilities (``Toolbox.backends``)
directly, never the model:

- ``briefing`` (optional ``location``): the weather, today's calendar events, the unread e-mail
  count, the open tasks and the reminders due today, gathered concurrently. A capability that is
  not set up is named under ``unavailable`` (``{capability, reason}``) and its section is null; a
  capability whose backend fails is named under ``errors`` (``{capability, error}``) and the status
  is ``partial``. Otherwise the status is ``completed``. Sections: ``weather``, ``calendar``,
  ``email``, ``tasks``, ``reminders``; ``date`` and ``timezone`` say which day "today" is.
- ``weather`` (``location``), ``calendar`` (``days`` 1..366, default 1, from the start of today),
  ``emails`` (``count`` 1..50, default 10, newest first), ``help`` (every command, its arguments
  and whether it can run here).

Where the weather's place comes from: ``args.location``, else ``[commands] default_location``;
with neither, ``weather`` is 422 on ``args.location`` and the briefing lists weather as unavailable
("no location"). "Today" is the day in ``[calendar] timezone`` (the user's zone, default UTC).

Errors: an unknown command, an unknown argument, a wrong type (strict: ``"5"`` is not an integer)
or a value out of range is :class:`ValidationFailed` (422) with ``details.fields`` naming
``command`` or ``args.<name>``; a single command whose capability is not set up is
:class:`ServiceUnavailableError` (503) whose details name the capability and the settings to
configure; a backend that fails is :class:`UpstreamError` (502); an unknown place is 422 on
``args.location``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assistant.clock import iso, utcnow
from assistant.commands.parser import CommandParser, ParsedCommand
from assistant.errors import ServiceUnavailableError, UpstreamError, ValidationFailed
from assistant.llm.queue import InferenceQueue
from assistant.tools.base import ToolError
from assistant.tools.calendar import list_calendar_events
from assistant.tools.catalog import Toolbox
from assistant.tools.dav import zone as configured_zone
from assistant.tools.mail import search_emails
from assistant.tools.tasks import list_tasks
from assistant.tools.weather import Forecast, Place, WeatherProvider, describe_wmo

log = logging.getLogger("assistant.commands")

MAX_BRIEFING_TASKS = 20

# How to set each capability up: named in 503s and in the briefing's "unavailable".
CONFIGURE = {
    "weather": "[weather] enabled = true",
    "calendar": "[calendar] url",
    "email": "[email] imap_host and smtp_host",
    "tasks": "[tasks] url",
    "reminders": "[reminders] enabled = true",
}
BRIEFING_CAPABILITIES = ("weather", "calendar", "email", "tasks", "reminders")


class CommandName(StrEnum):
    BRIEFING = "briefing"
    WEATHER = "weather"
    CALENDAR = "calendar"
    EMAILS = "emails"
    HELP = "help"


class Status(StrEnum):
    COMPLETED = "completed"  # every part that could run, ran
    PARTIAL = "partial"  # some capability failed; its error is in result.errors


@dataclass(frozen=True)
class CommandResult:
    command: str
    status: str
    result: dict[str, Any]
    executed_at: str


# --- arguments -----------------------------------------------------------------------------------


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


Location = Field(None, min_length=1, max_length=200,
                 description="A place name, e.g. 'Berlin'; default: [commands] default_location.")


class BriefingArgs(_Args):
    location: str | None = Location


class WeatherArgs(_Args):
    location: str | None = Location


class CalendarArgs(_Args):
    days: int = Field(1, ge=1, le=366, description="How many days from the start of today.")


class EmailsArgs(_Args):
    count: int = Field(10, ge=1, le=50, description="How many of the newest e-mails.")


class HelpArgs(_Args):
    pass


@dataclass(frozen=True)
class CommandInfo:
    name: CommandName
    description: str
    args: type[_Args]
    needs: str | None = None  # the capability it cannot run without


COMMANDS: dict[str, CommandInfo] = {c.name.value: c for c in (
    CommandInfo(CommandName.BRIEFING, "Weather, today's calendar, unread e-mail, open tasks and reminders due "
                                      "today, from whichever of these capabilities are configured.", BriefingArgs),
    CommandInfo(CommandName.WEATHER, "Current weather and today's forecast for a place.", WeatherArgs, "weather"),
    CommandInfo(CommandName.CALENDAR, "Calendar events from the start of today for some days.", CalendarArgs,
                "calendar"),
    CommandInfo(CommandName.EMAILS, "The newest e-mails of the inbox.", EmailsArgs, "email"),
    CommandInfo(CommandName.HELP, "The commands, their arguments, and which can run here.", HelpArgs),
)}


def _field_error(err: Mapping[str, Any], info: CommandInfo) -> dict[str, str]:
    loc = ".".join(str(p) for p in err["loc"])
    if err["type"] == "extra_forbidden":
        takes = ", ".join(info.args.model_fields) or "no arguments"
        return {"field": f"args.{loc}", "error": f"unknown argument; {info.name.value} takes: {takes}"}
    message = err["msg"].removeprefix("Value error, ")
    value = err.get("input")
    if isinstance(value, bool | int | float | str):
        shown = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "..."
        message += f" (got {shown!r})"
    return {"field": f"args.{loc}" if loc else "args", "error": message}


def validate(command: str, args: Mapping[str, Any] | None) -> tuple[CommandInfo, _Args]:
    """The command and its checked arguments; ValidationFailed naming every bad field."""
    name = command.strip().lower() if isinstance(command, str) else ""
    info = COMMANDS.get(name)
    if info is None:
        known = ", ".join(COMMANDS)
        raise ValidationFailed(f"command: unknown command {command!r}; known: {known}",
                               [{"field": "command", "error": f"unknown command {command!r}; known: {known}"}])
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        raise ValidationFailed("args: must be a JSON object", [{"field": "args", "error": "must be a JSON object"}])
    try:
        parsed = info.args.model_validate(dict(args))
    except ValidationError as exc:
        fields = [_field_error(e, info) for e in exc.errors()]
        summary = "; ".join(f"{f['field']}: {f['error']}" for f in fields[:3])
        raise ValidationFailed(f"invalid arguments for {info.name.value}: {summary}", fields) from None
    location = getattr(parsed, "location", None)
    if location is not None and not location.strip():
        raise ValidationFailed("args.location: must name a place",
                               [{"field": "args.location", "error": "must name a place"}])
    return info, parsed


def _argument_list(model: type[_Args]) -> list[dict[str, Any]]:
    out = []
    for name, f in model.model_fields.items():
        annotation = f.annotation
        kind = "integer" if annotation is int else "string"
        item: dict[str, Any] = {"name": name, "type": kind, "required": f.is_required(), "default": f.default,
                                "description": f.description}
        for meta in f.metadata:
            for attr, key in (("ge", "minimum"), ("le", "maximum"), ("min_length", "min_length"),
                              ("max_length", "max_length")):
                if getattr(meta, attr, None) is not None:
                    item[key] = getattr(meta, attr)
        out.append(item)
    return out


# --- the parts of the answers --------------------------------------------------------------------


class UnknownPlace(Exception):
    def __init__(self, name: str):
        super().__init__(f"no place called {name!r} was found")


def weather_report(provider: WeatherProvider, location: str) -> dict[str, Any]:
    """Current weather and today's forecast at ``location`` (UnknownPlace when it is not found)."""
    name = location.strip()
    place: Place | None = provider.geocode(name)
    if place is None:
        raise UnknownPlace(name)
    forecast: Forecast = provider.forecast(place, 1)
    current = forecast.current
    today = forecast.daily[0] if forecast.daily else None
    return {
        "location": {"name": place.name, "country": place.country},
        "current": None if current is None else {
            "time": current.time, "temperature": current.temperature, "feels_like": current.feels_like,
            "humidity": current.humidity, "precipitation": current.precipitation,
            "wind_speed": current.wind_speed, "conditions": describe_wmo(current.weather_code)},
        "today": None if today is None else {
            "date": today.date, "conditions": describe_wmo(today.weather_code), "max": today.max, "min": today.min,
            "precipitation": today.precipitation, "precipitation_probability": today.precipitation_probability},
        "units": dict(forecast.units),
    }


@dataclass
class CommandService:
    """Runs the structured commands over ``toolbox`` backends and parses sentences with ``parser``.
    ``zone`` is the user's time zone; ``clock`` gives now (UTC)."""

    toolbox: Toolbox | None
    parser: CommandParser
    zone: tzinfo = UTC
    default_location: str | None = None
    clock: Callable[[], datetime] = field(default=utcnow)

    @classmethod
    def create(cls, settings: Any, toolbox: Toolbox | None, queue: InferenceQueue | None,
               clock: Callable[[], datetime] = utcnow) -> CommandService:
        """From Settings: the zone is ``[calendar] timezone``, the default place
        ``[commands] default_location``."""
        zone = configured_zone("calendar", settings.calendar.timezone)
        parser = CommandParser(queue, zone, clock, timeout_secs=settings.commands.parse_timeout_secs)
        return cls(toolbox, parser, zone, settings.commands.default_location, clock)

    # --- capabilities ----------------------------------------------------------------------------

    def backend(self, capability: str) -> Any:
        return self.toolbox.backends.get(capability) if self.toolbox is not None else None

    def unavailable_reason(self, capability: str) -> str:
        status = next((s for s in self.toolbox.status if s.name == capability), None) if self.toolbox else None
        if status is not None and status.configured:
            return f"configured but unavailable: {status.reason}"
        return f"not configured (set {CONFIGURE.get(capability, f'[{capability}]')})"

    def _require(self, info: CommandInfo) -> Any:
        capability = info.needs or ""
        found = self.backend(capability)
        if found is None:
            reason = self.unavailable_reason(capability)
            raise ServiceUnavailableError(
                f"the {info.name.value} command needs the {capability} capability, which is {reason}",
                {"capability": capability, "configure": CONFIGURE.get(capability), "reason": reason},
            )
        return found

    # --- running ---------------------------------------------------------------------------------

    async def run(self, user_id: UUID | str, command: str, args: Mapping[str, Any] | None = None) -> CommandResult:
        info, parsed = validate(command, args)
        executed_at = iso(self.clock())
        status = Status.COMPLETED
        if info.name is CommandName.BRIEFING:
            result, status = await self.briefing(user_id, parsed.location)
        elif info.name is CommandName.WEATHER:
            result = await self._single(info, self._weather, parsed.location)
        elif info.name is CommandName.CALENDAR:
            result = await self._single(info, self._calendar, user_id, parsed.days)
        elif info.name is CommandName.EMAILS:
            result = await self._single(info, self._emails, user_id, parsed.count)
        else:
            result = self.help()
        return CommandResult(info.name.value, status.value, result, executed_at)

    async def parse(self, text: str) -> ParsedCommand:
        return await self.parser.parse(text)

    async def _single(self, info: CommandInfo, part: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
        backend = self._require(info)
        try:
            return await asyncio.to_thread(part, backend, *args)
        except UnknownPlace as exc:
            raise ValidationFailed(f"args.location: {exc}", [{"field": "args.location", "error": str(exc)}]) from None
        except ToolError as exc:
            raise UpstreamError(f"{info.needs}: {exc}", {"capability": info.needs}) from None

    def _where(self, location: str | None) -> str | None:
        return (location or self.default_location or "").strip() or None

    def _weather(self, provider: WeatherProvider, location: str | None) -> dict[str, Any]:
        where = self._where(location)
        if where is None:
            raise ValidationFailed("args.location: required, as no default location is configured",
                                   [{"field": "args.location", "error": "required: no default location is "
                                                                        "configured ([commands] default_location)"}])
        return weather_report(provider, where)

    def _today(self) -> datetime:
        return self.clock().astimezone(self.zone)

    def _calendar(self, provider: Any, user_id: UUID | str, days: int) -> dict[str, Any]:
        first = self._today().date()
        events = list_calendar_events(self.toolbox.context(user_id), {"start": first.isoformat(), "days": days})
        return {"start": first.isoformat(), "days": days, "timezone": _zone_name(provider.timezone),
                "count": len(events), "events": events}

    def _emails(self, reader: Any, user_id: UUID | str, count: int) -> dict[str, Any]:
        emails = search_emails(self.toolbox.context(user_id), {"limit": count})
        return {"count": len(emails), "emails": emails}

    def _unread(self, reader: Any, user_id: UUID | str) -> dict[str, Any]:
        return {"unread": int(reader.unread_count())}

    def _tasks(self, provider: Any, user_id: UUID | str) -> dict[str, Any]:
        tasks = list_tasks(self.toolbox.context(user_id), {})
        return {"open": len(tasks), "items": tasks[:MAX_BRIEFING_TASKS]}

    def _reminders(self, runner: Any, user_id: UUID | str) -> dict[str, Any]:
        """Reminders not yet fired that are due before the end of today (overdue ones included)."""
        today = self._today()
        end = datetime.combine(today.date() + timedelta(days=1), datetime.min.time(), tzinfo=self.zone)
        due = [r for r in runner.store.list_for_user(str(user_id), include_fired=False) if r.due_at < end]
        zone = getattr(runner, "zone", self.zone)
        return {"count": len(due), "due": [
            {"id": r.id, "text": r.text, "due_at": r.due_at.astimezone(zone).isoformat(timespec="seconds"),
             "overdue": r.due_at <= today} for r in due]}

    # --- briefing and help -----------------------------------------------------------------------

    async def briefing(self, user_id: UUID | str, location: str | None = None) -> tuple[dict[str, Any], Status]:
        today = self._today()
        result: dict[str, Any] = {"date": today.date().isoformat(), "timezone": _zone_name(self.zone),
                                  **{c: None for c in BRIEFING_CAPABILITIES}, "unavailable": [], "errors": []}
        parts: dict[str, Callable[[Any], dict[str, Any]]] = {
            "weather": lambda b: weather_report(b, where),
            "calendar": lambda b: self._calendar(b, user_id, 1),
            "email": lambda b: self._unread(b, user_id),
            "tasks": lambda b: self._tasks(b, user_id),
            "reminders": lambda b: self._reminders(b, user_id),
        }
        where = self._where(location)
        jobs = {}
        for capability in BRIEFING_CAPABILITIES:
            backend = self.backend(capability)
            if backend is None:
                result["unavailable"].append({"capability": capability, "reason": self.unavailable_reason(capability)})
            elif capability == "weather" and where is None:
                result["unavailable"].append({"capability": "weather", "reason": "no location: pass args.location or "
                                                                                 "set [commands] default_location"})
            else:
                jobs[capability] = asyncio.to_thread(parts[capability], backend)
        outcomes = await asyncio.gather(*jobs.values(), return_exceptions=True)
        for capability, outcome in zip(jobs, outcomes, strict=True):
            if isinstance(outcome, Exception):
                result["errors"].append({"capability": capability, "error": _describe(capability, outcome)})
            elif isinstance(outcome, BaseException):
                raise outcome
            else:
                result[capability] = outcome
        return result, Status.PARTIAL if result["errors"] else Status.COMPLETED

    def help(self) -> dict[str, Any]:
        out = []
        for info in COMMANDS.values():
            available, reason = True, None
            if info.needs is not None and self.backend(info.needs) is None:
                available, reason = False, self.unavailable_reason(info.needs)
            item = {"name": info.name.value, "description": info.description, "args": _argument_list(info.args),
                    "available": available, "needs": info.needs, "reason": reason}
            if info.name is CommandName.BRIEFING:
                item["uses"] = [c for c in BRIEFING_CAPABILITIES if self.backend(c) is not None]
            out.append(item)
        return {"commands": out}


def _zone_name(zone: tzinfo) -> str:
    return getattr(zone, "key", None) or str(zone)


def _describe(capability: str, exc: Exception) -> str:
    if isinstance(exc, ToolError | UnknownPlace):
        return str(exc)
    log.warning("briefing: the %s backend failed", capability, exc_info=exc)
    return f"{type(exc).__name__}: {exc}"
