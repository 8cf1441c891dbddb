"""search_transit: public transport connections between two stops (capability ``transit``).

A :class:`TransitProvider` resolves a stop name to a stop (``find_stop``) and lists journeys between
two stops (``journeys``). The built-in backend, ``TransportRestTransit``, speaks the transport.rest
API (hafas-rest-api: ``v6.db.transport.rest`` for Deutsche Bahn, and the same API for other
networks), whose answers follow the Friendly Public Transport Format: ``journeys[].legs[]`` with
``origin``/``destination`` stops, realtime ``departure``/``arrival`` next to the planned times, a
``departureDelay`` in seconds, ``line`` and ``walking`` legs between platforms.

The tool keeps, per leg, what a traveller reads off a departure board, and derives per journey its
start, end, duration and number of changes. A departure without a UTC offset is passed on as it is:
the service reads it in its own network's local time (Europe/Berlin for DB). Whatever the API
returns is reported; nothing is compared with today's date.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Protocol

from pydantic import Field

from assistant.clock import utcnow
from assistant.tools.base import Capability, CapabilityDeps, ToolContext, ToolError, pick_backend, tool
from assistant.tools.webclient import ServiceClient


@dataclass(frozen=True)
class Stop:
    id: str
    name: str


@dataclass(frozen=True)
class Leg:
    origin: str | None
    destination: str | None
    departure: str | None  # ISO 8601 with offset: realtime when known, else planned
    arrival: str | None
    line: str | None
    mode: str | None
    direction: str | None
    delay_minutes: int | None
    platform: str | None
    walking: bool = False
    cancelled: bool = False

    def as_dict(self) -> dict[str, Any]:
        out = {"from": self.origin, "to": self.destination, "departure": self.departure, "arrival": self.arrival,
               "line": self.line, "mode": self.mode, "direction": self.direction,
               "delay_minutes": self.delay_minutes, "platform": self.platform, "walking": self.walking}
        if self.cancelled:
            out["cancelled"] = True
        return out


def _minutes_between(start: str | None, end: str | None) -> int | None:
    if not start or not end:
        return None
    try:
        return round((datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds() / 60)
    except (TypeError, ValueError):  # unparseable, or one naive and one aware
        return None


@dataclass(frozen=True)
class Journey:
    legs: tuple[Leg, ...]

    @property
    def departure(self) -> str | None:
        return self.legs[0].departure if self.legs else None

    @property
    def arrival(self) -> str | None:
        return self.legs[-1].arrival if self.legs else None

    @property
    def changes(self) -> int:
        return max(0, sum(not leg.walking for leg in self.legs) - 1)

    def as_dict(self) -> dict[str, Any]:
        return {"departure": self.departure, "arrival": self.arrival,
                "duration_minutes": _minutes_between(self.departure, self.arrival), "changes": self.changes,
                "legs": [leg.as_dict() for leg in self.legs]}


class TransitProvider(Protocol):
    def find_stop(self, query: str) -> Stop | None: ...

    def journeys(self, origin: Stop, destination: Stop, departure: str, results: int) -> list[Journey]: ...


# --- transport.rest ----------------------------------------------------------------------------


def _place_name(place: Any) -> str | None:
    if not isinstance(place, dict):
        return None
    return place.get("name") or place.get("address")


def parse_leg(leg: dict[str, Any]) -> Leg:
    """A Leg from one FPTF journey leg of hafas-rest-api."""
    walking = bool(leg.get("walking"))
    line = leg.get("line") or {}
    delay = leg.get("departureDelay")
    return Leg(
        origin=_place_name(leg.get("origin")),
        destination=_place_name(leg.get("destination")),
        departure=leg.get("departure") or leg.get("plannedDeparture"),
        arrival=leg.get("arrival") or leg.get("plannedArrival"),
        line=None if walking else line.get("name"),
        mode="walking" if walking else line.get("mode"),
        direction=leg.get("direction"),
        delay_minutes=round(delay / 60) if isinstance(delay, int | float) else None,
        platform=leg.get("departurePlatform") or leg.get("plannedDeparturePlatform"),
        walking=walking,
        cancelled=bool(leg.get("cancelled")),
    )


def parse_journeys(data: Any) -> list[Journey]:
    """Journeys from a ``/journeys`` answer (``{"journeys": [{"legs": [...]}, ...], ...}``)."""
    if not isinstance(data, dict) or not isinstance(data.get("journeys"), list):
        raise ToolError("the transit service sent an answer without a journeys list")
    return [Journey(tuple(parse_leg(leg) for leg in j.get("legs") or [] if isinstance(leg, dict)))
            for j in data["journeys"] if isinstance(j, dict)]


class TransportRestTransit:
    """A hafas-rest-api service such as https://v6.db.transport.rest (https://v6.db.transport.rest/api.html)."""

    def __init__(self, base_url: str, timeout_secs: float = 15):
        self.base_url = base_url.rstrip("/")
        self.http = ServiceClient("the transit service (transport.rest)", timeout_secs)

    def find_stop(self, query: str) -> Stop | None:
        params = {"query": query, "results": 1, "stops": "true", "addresses": "false", "poi": "false"}
        found = self.http.get_json(f"{self.base_url}/locations", params)
        for place in found if isinstance(found, list) else []:
            if isinstance(place, dict) and place.get("type") in ("stop", "station") and place.get("id"):
                return Stop(str(place["id"]), place.get("name") or str(place["id"]))
        return None

    def journeys(self, origin: Stop, destination: Stop, departure: str, results: int) -> list[Journey]:
        data = self.http.get_json(f"{self.base_url}/journeys", {
            "from": origin.id, "to": destination.id, "departure": departure, "results": results,
        })
        return parse_journeys(data)

    def close(self) -> None:
        self.http.close()


BACKENDS: dict[str, Callable[..., TransitProvider]] = {
    "transport-rest": lambda s: TransportRestTransit(s.base_url, s.timeout_secs),
}


# --- the tool ----------------------------------------------------------------------------------


def departure_time(value: str | None) -> str:
    """The departure to ask for, ISO 8601: the given time (checked), or now in UTC."""
    if value is None or not value.strip():
        return utcnow().isoformat(timespec="seconds")
    try:
        return datetime.fromisoformat(value.strip()).isoformat(timespec="seconds")
    except ValueError:
        raise ToolError(f"departure {value!r} is not an ISO 8601 date and time, e.g. 2026-11-12T08:30") from None


def _stop(provider: TransitProvider, query: str, role: str) -> Stop:
    name = " ".join(query.split())
    if not name:
        raise ToolError(f"{role} must name a station or stop")
    stop = provider.find_stop(name)
    if stop is None:
        raise ToolError(f"no station or stop called {name!r} was found")
    return stop


@tool("transit", icon="🚆")
def search_transit(
    ctx: ToolContext,
    origin: Annotated[str, Field(min_length=1, max_length=200, description="Where to start, a station or stop.")],
    destination: Annotated[str, Field(min_length=1, max_length=200, description="Where to go, a station or stop.")],
    departure: Annotated[str | None, Field(description="Leave at or after, ISO 8601 (e.g. 2026-11-12T08:30); "
                                                       "default now.")] = None,
) -> dict:
    """Public transport connections between two stations, with times, lines, platforms and delays."""
    backend: TransitBackend = ctx.backend("transit")
    when = departure_time(departure)
    start, end = _stop(backend.provider, origin, "origin"), _stop(backend.provider, destination, "destination")
    if start.id == end.id:
        raise ToolError(f"origin and destination are the same stop ({start.name})")
    journeys = backend.provider.journeys(start, end, when, backend.max_results)
    return {"origin": start.name, "destination": end.name,
            "journeys": [j.as_dict() for j in journeys[:backend.max_results]]}


TRANSIT_TOOLS = (search_transit,)


@dataclass(frozen=True)
class TransitBackend:
    """The capability's backend: the provider and how many journeys to ask for."""

    provider: TransitProvider
    max_results: int = 3

    def close(self) -> None:
        close = getattr(self.provider, "close", None)
        if callable(close):
            close()


def _create(deps: CapabilityDeps) -> TransitBackend:
    section = deps.settings.transit
    return TransitBackend(pick_backend("transit", BACKENDS, section.backend)(section), section.max_results)


CAPABILITY = Capability(
    "transit", TRANSIT_TOOLS, configured=lambda settings: settings.transit.enabled, create=_create,
    description="public transport journeys (transport.rest)",
)
