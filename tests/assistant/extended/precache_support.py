"""Seeding a user's real query history with backdated times (the conversation store and tool runs, sealed as
the chat stores them), a fake clock, a fake thermal sensor and a fake weather backend: shared by the
precache unit, API and integration tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from assistant.chat.tool_loop import ToolRecord
from assistant.chat.tool_runs import ToolRunStore
from assistant.clock import iso
from assistant.extended.thermal import ThermalReading
from assistant.llm.base import ToolCall
from assistant.services import Services
from assistant.tools.weather import CurrentWeather, DailyWeather, Forecast, Place


def backdate(services: Services, at: datetime, *, message_ids: list[str] = (), conversation_id: str | None = None,
             tool_message_id: str | None = None) -> None:
    """Move the given messages (and the tool runs of ``tool_message_id``) to ``at``."""
    stamp = iso(at)
    for ident in message_ids:
        services.db.execute("UPDATE messages SET created_at = ? WHERE id = ?", (stamp, ident))
    if tool_message_id is not None:
        services.db.execute("UPDATE tool_runs SET created_at = ? WHERE message_id = ?", (stamp, tool_message_id))


def ask(services: Services, user_id: str, text: str, at: datetime,
        tool_calls: list[tuple[str, dict]] = ()) -> str:
    """Store one exchange as the chat does (sealed), with the reply's tool runs, and move it to ``at``."""
    conversation, reply_id, _ = services.conversations.record_exchange(
        user_id=user_id, conversation_id=None, user_message=text, reply="Here you are.", model="scripted",
        prompt_tokens=1, completion_tokens=1)
    if tool_calls:
        records = [ToolRecord(1, ToolCall(f"call-{i}", name, args), {"ok": True}, None, 5.0)
                   for i, (name, args) in enumerate(tool_calls)]
        ToolRunStore(services.db, services.sealer).record(user_id, conversation, reply_id, records)
    ids = [r["id"] for r in services.db.query("SELECT id FROM messages WHERE conversation_id = ?", (conversation,))]
    backdate(services, at, message_ids=ids, tool_message_id=reply_id)
    return conversation


def seed_days(services: Services, user_id: str, query: str, asked_on: int, now: datetime, *, days: int = 10,
              tool_calls: list[tuple[str, dict]] = (), hour: int | None = 8, minute: int = 5) -> None:
    """``days`` active days before ``now``'s date: ``query`` at ``hour:minute`` (None: ``now``'s time of day)
    on the first ``asked_on``, another message (at noon) on every day."""
    for n in range(1, days + 1):
        at = now - timedelta(days=n)
        if hour is not None:
            at = at.replace(hour=hour, minute=minute)
        ask(services, user_id, f"Note number {n} for the diary", at.replace(hour=12, minute=0))
        if n <= asked_on:
            ask(services, user_id, query, at, tool_calls)


@dataclass
class FakeClock:
    now: datetime = datetime(2026, 3, 11, 7, 55, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@dataclass
class FakeThermal:
    celsius: float | None = 45.0
    sensor: str = "x86_pkg_temp"

    def read(self) -> ThermalReading:
        return ThermalReading(self.celsius, self.sensor if self.celsius is not None else None)


@dataclass
class FakeWeather:
    """A WeatherProvider that counts what it was asked."""

    calls: list[str] = field(default_factory=list)

    def geocode(self, name: str) -> Place | None:
        self.calls.append(f"geocode {name}")
        return Place(name.title(), "Germany", 52.52, 13.41)

    def forecast(self, place: Place, days: int) -> Forecast:
        self.calls.append(f"forecast {place.name} {days}")
        return Forecast(CurrentWeather("2026-03-11T08:00", 7.5, 5.0, 80, 0.0, 12.0, 3),
                        (DailyWeather("2026-03-11", 3, 9.0, 2.0, 0.0, 10),), {"temperature": "°C"})

    def close(self) -> None:
        return None


def weather_call(location: str = "Berlin") -> list[tuple[str, dict[str, Any]]]:
    return [("get_weather", {"location": location})]
