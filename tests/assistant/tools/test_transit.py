"""search_transit with a fake TransitProvider; hafas-rest-api journeys parsed from the packaged recording."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from assistant.testing.replay import DEFAULT_RECORDINGS
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.catalog import build_toolbox
from assistant.tools.transit import (
    CAPABILITY,
    Journey,
    Leg,
    Stop,
    TransitBackend,
    TransportRestTransit,
    departure_time,
    parse_journeys,
    parse_leg,
    search_transit,
)

ZURICH, BASEL = Stop("8503000", "Zürich HB"), Stop("8500010", "Basel SBB")


def _leg(origin: str, dest: str, dep: str, arr: str, line: str | None = "IC 3", walking: bool = False,
         delay: int | None = None) -> Leg:
    return Leg(origin, dest, dep, arr, None if walking else line, "walking" if walking else "train",
               None if walking else "Basel SBB", delay, None if walking else "7", walking)


JOURNEYS = [
    Journey((_leg("Zürich HB", "Basel SBB", "2026-11-12T08:07:00+01:00", "2026-11-12T09:00:00+01:00", delay=3),)),
    Journey((
        _leg("Zürich HB", "Zürich HB (Sihlpost)", "2026-11-12T08:20:00+01:00", "2026-11-12T08:26:00+01:00",
             walking=True),
        _leg("Zürich HB (Sihlpost)", "Brugg AG", "2026-11-12T08:30:00+01:00", "2026-11-12T08:58:00+01:00", "IR 36"),
        _leg("Brugg AG", "Basel SBB", "2026-11-12T09:05:00+01:00", "2026-11-12T09:41:00+01:00", "IR 16"),
    )),
]


class FakeTransit:
    def __init__(self, journeys: list[Journey] = JOURNEYS):
        self.stops = {"zurich hb": ZURICH, "basel sbb": BASEL, "basel": BASEL}
        self.journeys_returned = journeys
        self.asked: list[tuple] = []

    def find_stop(self, query: str) -> Stop | None:
        self.asked.append(("find_stop", query))
        return self.stops.get(query.casefold())

    def journeys(self, origin: Stop, destination: Stop, departure: str, results: int) -> list[Journey]:
        self.asked.append(("journeys", origin.id, destination.id, departure, results))
        return self.journeys_returned


def ctx(provider: FakeTransit | None = None, max_results: int = 3) -> ToolContext:
    return ToolContext("u1", {"transit": TransitBackend(provider or FakeTransit(), max_results)})


def test_journeys_with_duration_changes_and_legs() -> None:
    fake = FakeTransit()
    result = search_transit(ctx(fake), {"origin": "Zurich  HB", "destination": "Basel SBB",
                                        "departure": "2026-11-12T08:00"})
    assert result["origin"] == "Zürich HB" and result["destination"] == "Basel SBB"
    direct, with_change = result["journeys"]
    assert (direct["departure"], direct["arrival"]) == ("2026-11-12T08:07:00+01:00", "2026-11-12T09:00:00+01:00")
    assert direct["duration_minutes"] == 53 and direct["changes"] == 0
    assert direct["legs"] == [{"from": "Zürich HB", "to": "Basel SBB", "departure": "2026-11-12T08:07:00+01:00",
                               "arrival": "2026-11-12T09:00:00+01:00", "line": "IC 3", "mode": "train",
                               "direction": "Basel SBB", "delay_minutes": 3, "platform": "7", "walking": False}]
    assert with_change["duration_minutes"] == 81 and with_change["changes"] == 1  # the walk is not a change
    assert with_change["legs"][0]["walking"] is True and with_change["legs"][0]["line"] is None
    assert fake.asked == [("find_stop", "Zurich HB"), ("find_stop", "Basel SBB"),
                          ("journeys", "8503000", "8500010", "2026-11-12T08:00:00", 3)]


def test_max_results_trims_the_journeys() -> None:
    result = search_transit(ctx(max_results=1), {"origin": "Zurich HB", "destination": "Basel"})
    assert len(result["journeys"]) == 1


def test_unknown_or_identical_stops_are_reported() -> None:
    with pytest.raises(ToolError, match="no station or stop called 'Atlantis Hbf' was found"):
        search_transit(ctx(), {"origin": "Atlantis Hbf", "destination": "Basel"})
    with pytest.raises(ToolError, match="no station or stop called 'Nowhere' was found"):
        search_transit(ctx(), {"origin": "Zurich HB", "destination": "Nowhere"})
    with pytest.raises(ToolError, match="same stop"):
        search_transit(ctx(), {"origin": "Basel", "destination": "Basel SBB"})
    with pytest.raises(ToolError, match="destination must name a station"):
        search_transit(ctx(), {"origin": "Basel", "destination": "  "})


@pytest.mark.parametrize("arguments", [{"origin": "Basel"}, {"origin": "", "destination": "Basel"},
                                       {"origin": "a", "destination": "b", "via": "c"}])
def test_bad_arguments_are_refused(arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for search_transit"):
        search_transit(ctx(), arguments)


def test_departure_times() -> None:
    assert departure_time("2026-11-12T08:30") == "2026-11-12T08:30:00"  # naive: the network's local time
    assert departure_time("2026-11-12T08:30:00+01:00") == "2026-11-12T08:30:00+01:00"
    assert departure_time("2026-11-12T07:30Z") == "2026-11-12T07:30:00+00:00"
    now = datetime.fromisoformat(departure_time(None))
    assert now.utcoffset() is not None and now.utcoffset().total_seconds() == 0
    assert datetime.fromisoformat(departure_time("  ")).utcoffset() is not None  # blank = now, in UTC
    for bad in ("tomorrow morning", "12.11.2026 08:30", "2026-13-01T08:00"):
        with pytest.raises(ToolError, match="not an ISO 8601 date and time"):
            search_transit(ctx(), {"origin": "Zurich HB", "destination": "Basel", "departure": bad})


def test_recorded_db_journeys_are_parsed() -> None:
    data = json.loads((DEFAULT_RECORDINGS / "transport-rest" / "journeys-berlin-muenchen.json").read_text("utf-8"))
    journeys = parse_journeys(data)
    summary = [(j.as_dict()["duration_minutes"], j.changes, len(j.legs)) for j in journeys]
    assert summary == [(243, 0, 1), (277, 1, 2), (253, 0, 2)]
    first = journeys[0].legs[0]
    assert (first.line, first.mode, first.delay_minutes, first.platform) == ("ICE 1001", "train", 2, "1")
    assert first.departure == "2026-11-12T08:36:00+01:00"  # realtime, not the planned 08:34
    walk = journeys[2].legs[0]
    assert walk.walking and walk.mode == "walking" and walk.line is None and walk.destination == "Berlin Hbf (tief)"


def test_a_cancelled_leg_keeps_its_planned_times() -> None:
    leg = parse_leg({"origin": {"type": "stop", "id": "1", "name": "A"}, "destination": {"address": "Street 1"},
                     "departure": None, "plannedDeparture": "2026-11-12T08:00:00+01:00", "departureDelay": None,
                     "arrival": None, "plannedArrival": "2026-11-12T08:30:00+01:00", "cancelled": True,
                     "line": {"name": "RE 1", "mode": "train"}, "plannedDeparturePlatform": "4"})
    assert leg.as_dict() == {"from": "A", "to": "Street 1", "departure": "2026-11-12T08:00:00+01:00",
                             "arrival": "2026-11-12T08:30:00+01:00", "line": "RE 1", "mode": "train",
                             "direction": None, "delay_minutes": None, "platform": "4", "walking": False,
                             "cancelled": True}


def test_answers_without_journeys_are_refused() -> None:
    with pytest.raises(ToolError, match="without a journeys list"):
        parse_journeys({"message": "no connections"})
    assert parse_journeys({"journeys": []}) == []


def test_capability_is_registered_only_when_enabled(make_settings) -> None:
    off = build_toolbox(CapabilityDeps(make_settings()), [CAPABILITY])
    assert len(off.registry) == 0
    on = build_toolbox(CapabilityDeps(make_settings(transit={"enabled": True, "max_results": 2})), [CAPABILITY])
    assert on.registry.names() == ["search_transit"]
    backend = on.backends["transit"]
    assert isinstance(backend.provider, TransportRestTransit) and backend.max_results == 2
    on.close()
