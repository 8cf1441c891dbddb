"""get_weather, search_web and search_transit with their real httpx clients against the replay server
on loopback: recorded answers, SearXNG failing over to DuckDuckGo, unknown places and stops, slow
services, and sections left disabled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from assistant.testing.replay import ReplayServer
from assistant.tools.base import CapabilityDeps, ToolError
from assistant.tools.catalog import Toolbox, build_toolbox
from tests.integration.tools.replay_server import (  # noqa: F401
    HTTP_CAPABILITIES,
    http_toolbox_fixture,
    replay_server_fixture,
)

pytestmark = pytest.mark.integration

MakeToolbox = Callable[..., Toolbox]


def call(toolbox: Toolbox, name: str, **arguments: Any) -> Any:
    tool = toolbox.registry.get(name)
    assert tool is not None, f"{name} is not registered"
    return tool(toolbox.context("user-1"), arguments)


# --- weather -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("place", "name", "country", "conditions"), [
    ("Berlin", "Berlin", "Germany", "overcast"),
    ("Paris", "Paris", "France", "slight rain"),
    ("reykjavik", "Reykjavík", "Iceland", "slight snowfall"),
])
def test_weather_for_recorded_places(http_toolbox: MakeToolbox, replay_server: ReplayServer, place: str, name: str,
                                     country: str, conditions: str) -> None:
    result = call(http_toolbox(), "get_weather", location=place, days=3)
    assert result["location"] == {"name": name, "country": country}
    assert result["current"]["conditions"] == conditions
    assert result["current"]["units"] == {"temperature": "°C", "humidity": "%", "precipitation": "mm",
                                          "wind_speed": "km/h"}
    assert [d["date"] for d in result["daily"]] == ["2026-11-12", "2026-11-13", "2026-11-14"]
    geocode, forecast = replay_server.requests
    assert geocode.path == "/open-meteo/geocoding/v1/search"
    assert geocode.query == {"name": place, "count": "1", "language": "en", "format": "json"}
    assert forecast.path == "/open-meteo/api/v1/forecast"
    assert forecast.query["forecast_days"] == "3" and forecast.query["timezone"] == "auto"
    assert forecast.query["temperature_unit"] == "celsius"
    assert forecast.query["current"].split(",") == ["temperature_2m", "apparent_temperature", "relative_humidity_2m",
                                                    "precipitation", "weather_code", "wind_speed_10m"]


def test_weather_berlin_values(http_toolbox: MakeToolbox) -> None:
    result = call(http_toolbox(weather={"temperature_unit": "fahrenheit"}), "get_weather", location="Berlin")
    assert result["current"] == {"time": "2026-11-12T14:15", "temperature": 7.4, "feels_like": 4.1, "humidity": 81,
                                 "precipitation": 0.0, "wind_speed": 14.8, "conditions": "overcast",
                                 "units": {"temperature": "°C", "humidity": "%", "precipitation": "mm",
                                           "wind_speed": "km/h"}}  # the units the service reports
    assert result["daily"] == [{"date": "2026-11-12", "conditions": "overcast", "max": 8.3, "min": 3.9,
                                "precipitation": 0.0, "precipitation_probability": 12}]


def test_weather_unknown_place_failure_and_timeout(http_toolbox: MakeToolbox, replay_server: ReplayServer) -> None:
    toolbox = http_toolbox(timeout_secs=0.3)
    with pytest.raises(ToolError, match="no place called 'Atlantis' was found"):
        call(toolbox, "get_weather", location="Atlantis")
    replay_server.fail("open-meteo", status=500)
    with pytest.raises(ToolError, match=r"Open-Meteo\) answered HTTP 500: simulated failure"):
        call(toolbox, "get_weather", location="Berlin")
    replay_server.delay("open-meteo", 5.0)
    with pytest.raises(ToolError, match=r"did not answer within 0.3 s"):
        call(toolbox, "get_weather", location="Berlin")


# --- web search --------------------------------------------------------------------------------


def test_searxng_results(http_toolbox: MakeToolbox, replay_server: ReplayServer) -> None:
    result = call(http_toolbox(), "search_web", query="python asyncio tutorial", limit=3)
    assert result["source"] == "searxng"
    assert [r["url"] for r in result["results"]] == ["https://docs.python.org/3/library/asyncio.html",
                                                     "https://realpython.com/async-io-python/",
                                                     "https://docs.python.org/3/library/asyncio-task.html"]
    assert result["results"][1]["title"] == "Python's asyncio: A Hands-On Walkthrough – Real Python"
    other = call(http_toolbox(), "search_web", query="open source weather api")
    assert other["results"][0]["url"] == "https://open-meteo.com/" and len(other["results"]) == 5
    assert [r.service for r in replay_server.requests] == ["searxng", "searxng"]
    assert replay_server.requests[0].query == {"q": "python asyncio tutorial", "format": "json"}


@pytest.mark.parametrize("failure", ["down", "403", "503", "timeout"])
def test_searxng_failing_falls_back_to_duckduckgo(http_toolbox: MakeToolbox, replay_server: ReplayServer,
                                                  failure: str) -> None:
    if failure == "down":
        replay_server.down("searxng")
    elif failure == "timeout":
        replay_server.delay("searxng", 5.0)
    else:
        replay_server.fail("searxng", status=int(failure), body="<h1>Forbidden</h1>", content_type="text/html")
    result = call(http_toolbox(timeout_secs=0.5), "search_web", query="python asyncio tutorial")
    assert result["source"] == "duckduckgo"
    assert [r["url"] for r in result["results"]] == [  # the ad is left out, redirects decoded
        "https://docs.python.org/3/library/asyncio.html",
        "https://realpython.com/async-io-python/",
        "https://superfastpython.com/python-asyncio/",
        "https://docs.python.org/3/library/asyncio-task.html",
        "https://www.geeksforgeeks.org/python/asyncio-in-python/",
    ]
    assert result["results"][1]["snippet"].startswith("Explore how Python asyncio works")
    ddg = replay_server.requests_to("duckduckgo")
    assert len(ddg) == 1 and ddg[0].method == "POST" and ddg[0].form["q"] == "python asyncio tutorial"


def test_both_search_services_failing_names_both_causes(http_toolbox: MakeToolbox,
                                                        replay_server: ReplayServer) -> None:
    replay_server.fail("searxng", status=403)
    replay_server.down("duckduckgo")
    with pytest.raises(ToolError) as failure:
        call(http_toolbox(), "search_web", query="python asyncio tutorial")
    message = str(failure.value)
    assert "searxng: SearXNG answered HTTP 403" in message and "search.formats" in message
    assert "duckduckgo: DuckDuckGo could not be reached" in message


def test_without_a_fallback_a_searxng_failure_is_the_answer(http_toolbox: MakeToolbox,
                                                            replay_server: ReplayServer) -> None:
    replay_server.down("searxng")
    with pytest.raises(ToolError, match="searxng: SearXNG could not be reached"):
        call(http_toolbox(web_search={"fallback": None}), "search_web", query="python asyncio tutorial")
    assert replay_server.requests_to("duckduckgo") == []


def test_duckduckgo_alone_and_a_query_without_results(http_toolbox: MakeToolbox,
                                                      replay_server: ReplayServer) -> None:
    toolbox = http_toolbox(web_search={"base_url": None})
    assert call(toolbox, "search_web", query="python asyncio tutorial", limit=2)["source"] == "duckduckgo"
    assert call(toolbox, "search_web", query="zzqx nonexistent phrase") == {"results": [], "source": "duckduckgo"}
    assert replay_server.requests_to("searxng") == []


# --- transit -----------------------------------------------------------------------------------


def test_journeys_berlin_to_munich(http_toolbox: MakeToolbox, replay_server: ReplayServer) -> None:
    result = call(http_toolbox(), "search_transit", origin="Berlin Hbf", destination="München Hbf",
                  departure="2026-11-12T08:30")
    assert result["origin"] == "Berlin Hbf" and result["destination"] == "München Hbf"
    assert [(j["departure"], j["arrival"], j["duration_minutes"], j["changes"]) for j in result["journeys"]] == [
        ("2026-11-12T08:36:00+01:00", "2026-11-12T12:39:00+01:00", 243, 0),
        ("2026-11-12T09:29:00+01:00", "2026-11-12T14:06:00+01:00", 277, 1),
        ("2026-11-12T10:49:00+01:00", "2026-11-12T15:02:00+01:00", 253, 0),
    ]
    assert result["journeys"][1]["legs"][1] == {
        "from": "Erfurt Hbf", "to": "München Hbf", "departure": "2026-11-12T11:24:00+01:00",
        "arrival": "2026-11-12T14:06:00+01:00", "line": "ICE 1507", "mode": "train", "direction": "München Hbf",
        "delay_minutes": None, "platform": "10", "walking": False}
    assert result["journeys"][2]["legs"][0]["walking"] is True
    locations = replay_server.requests[:2]
    assert [r.query["query"] for r in locations] == ["Berlin Hbf", "München Hbf"]
    assert all(r.path == "/transport-rest/locations" and r.query["results"] == "1" for r in locations)
    journeys = replay_server.requests[2]
    assert journeys.path == "/transport-rest/journeys"
    assert journeys.query == {"from": "8011160", "to": "8000261", "departure": "2026-11-12T08:30:00", "results": "3"}


def test_transit_max_results_default_departure_and_failures(http_toolbox: MakeToolbox,
                                                            replay_server: ReplayServer) -> None:
    toolbox = http_toolbox(timeout_secs=0.3, transit={"max_results": 2})
    result = call(toolbox, "search_transit", origin="Berlin Hauptbahnhof", destination="munchen hbf")
    assert len(result["journeys"]) == 2
    assert replay_server.requests[-1].query["results"] == "2"
    assert replay_server.requests[-1].query["departure"].endswith("+00:00")  # now, in UTC
    with pytest.raises(ToolError, match="no station or stop called 'Atlantis Hbf' was found"):
        call(toolbox, "search_transit", origin="Atlantis Hbf", destination="München Hbf")
    replay_server.delay("transport-rest", 5.0)
    with pytest.raises(ToolError, match=r"transport.rest\) did not answer within 0.3 s"):
        call(toolbox, "search_transit", origin="Berlin Hbf", destination="München Hbf")


# --- configuration -----------------------------------------------------------------------------


def test_disabled_sections_register_no_tools(make_settings: Callable[..., Any],
                                             replay_server: ReplayServer) -> None:
    overrides = replay_server.settings_overrides()
    for section in overrides.values():
        section["enabled"] = False
    toolbox = build_toolbox(CapabilityDeps(make_settings(**overrides)), HTTP_CAPABILITIES)
    assert len(toolbox.registry) == 0 and toolbox.backends == {}
    assert [(s.name, s.configured) for s in toolbox.status] == [("weather", False), ("web_search", False),
                                                                ("transit", False)]
    assert replay_server.requests == []


def test_enabled_sections_register_their_tools(http_toolbox: MakeToolbox) -> None:
    assert http_toolbox().registry.names() == ["get_weather", "search_transit", "search_web"]
