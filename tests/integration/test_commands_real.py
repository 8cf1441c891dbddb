"""Structured commands against real components: Open-Meteo answers replayed on loopback, Radicale
(calendar and tasks), Dovecot (IMAP), the SQLite reminders, and /parse with the real embedded model
(Qwen2.5-Coder-0.5B) for a sentence no quick pattern understands."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from assistant.commands.parser import CHANGING, CommandType
from assistant.services import Services
from assistant.testing.replay import ReplayServer
from assistant.tools.calendar import CalendarEvent
from assistant.tools.tasks import Task
from tests.integration.support import free_port, serve
from tests.integration.tools.dav_server import DavServer, dav_server_fixture  # noqa: F401
from tests.integration.tools.mail_server import (  # noqa: F401
    ADDRESS,
    PASSWORD,
    USER,
    DovecotServer,
    dovecot_server_fixture,
    make_message,
)
from tests.integration.tools.replay_server import replay_server_fixture  # noqa: F401

pytestmark = pytest.mark.integration

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2033, 6, 15, 8, 0, tzinfo=UTC)  # 10:00 in Berlin: a day no other test uses


@pytest.fixture
def commands_client(make_settings: Callable[..., Any], make_services: Callable[..., Services],
                    make_client: Callable[[Services], Any], replay_server: ReplayServer):
    """``make(**sections)``: (client, auth headers, services) with the weather pointing at the replay
    server, the default location Berlin, the user's zone Europe/Berlin and a fixed clock."""

    def make(**sections: Any) -> tuple[Any, dict[str, str], Services]:
        settings = make_settings(**replay_server.settings_overrides(), commands={"default_location": "Berlin"},
                                 **sections)
        services = make_services(settings)
        services.commands.clock = services.commands.parser.clock = lambda: NOW
        key, _ = services.keys.create("integration")
        return make_client(services), {"Authorization": f"Bearer {key}"}, services

    return make


def briefing(client: Any, auth: dict[str, str]) -> dict[str, Any]:
    response = client.post("/v1/commands", json={"command": "briefing"}, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


def test_weather_command_against_the_replayed_service(commands_client, replay_server: ReplayServer) -> None:
    client, auth, _ = commands_client(calendar={"timezone": "Europe/Berlin"})
    response = client.post("/v1/commands", json={"command": "weather", "args": {"location": "Paris"}}, headers=auth)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["location"] == {"name": "Paris", "country": "France"}
    assert result["current"]["temperature"] == 11.2 and result["current"]["conditions"] == "slight rain"
    assert result["today"] == {"date": "2026-11-12", "conditions": "slight rain", "max": 12.4, "min": 8.1,
                               "precipitation": 4.7, "precipitation_probability": 85}
    geocode, forecast = replay_server.requests
    assert geocode.query["name"] == "Paris" and forecast.query["forecast_days"] == "1"

    default = client.post("/v1/commands", json={"command": "weather"}, headers=auth).json()
    assert default["result"]["location"]["name"] == "Berlin"  # [commands] default_location

    unknown = client.post("/v1/commands", json={"command": "weather", "args": {"location": "Atlantis"}}, headers=auth)
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"]["fields"] == [
        {"field": "args.location", "error": "no place called 'Atlantis' was found"}]

    replay_server.fail("open-meteo", status=503)
    failed = client.post("/v1/commands", json={"command": "weather", "args": {"location": "Paris"}}, headers=auth)
    assert failed.status_code == 502 and failed.json()["error"]["code"] == "UPSTREAM_ERROR"
    assert failed.json()["error"]["message"].startswith("weather: ")


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_briefing_from_every_real_capability(commands_client, dav_server: DavServer,
                                             dovecot_server: DovecotServer, replay_server: ReplayServer) -> None:
    dav = {"url": dav_server.base_url + "/", "username": dav_server.username, "password": dav_server.password}
    client, auth, services = commands_client(
        calendar={**dav, "calendar": "Personal", "timezone": "Europe/Berlin"},
        tasks={**dav, "task_list": "Chores"},
        email={"imap_host": dovecot_server.host, "imap_port": dovecot_server.port, "imap_security": "none",
               "smtp_host": "127.0.0.1", "smtp_port": free_port(), "smtp_security": "none",  # never contacted
               "username": USER, "password": PASSWORD, "from_address": ADDRESS},
    )
    backends = services.tools.backends
    assert {"weather", "calendar", "tasks", "email", "reminders"} <= set(backends)
    backends["calendar"].create_event(CalendarEvent("brief-1", "Dentist", datetime(2033, 6, 15, 14, 0, tzinfo=BERLIN),
                                                    datetime(2033, 6, 15, 15, 0, tzinfo=BERLIN)))
    backends["calendar"].create_event(CalendarEvent("brief-2", "Not today", datetime(2033, 6, 16, 9, 0, tzinfo=BERLIN),
                                                    datetime(2033, 6, 16, 10, 0, tzinfo=BERLIN)))
    backends["tasks"].create_task(Task("brief-task", "Pay the rent", date(2033, 6, 16)))
    dovecot_server.append(make_message("bob@example.net", "Lunch?", "Are you free on Friday?"))
    dovecot_server.append(make_message("ann@example.net", "Read already", "Old news"), flags="\\Seen")
    owner = str(services.keys.owner_user_id())
    backends["reminders"].store.add(owner, "stretch", NOW + timedelta(hours=2))
    backends["reminders"].store.add(owner, "next week", NOW + timedelta(days=7))

    body = briefing(client, auth)
    r = body["result"]
    assert body["status"] == "completed", r["errors"]
    assert (r["unavailable"], r["errors"], r["date"], r["timezone"]) == ([], [], "2033-06-15", "Europe/Berlin")
    assert r["weather"]["location"] == {"name": "Berlin", "country": "Germany"}
    assert r["weather"]["current"]["temperature"] == 7.4  # the recorded Open-Meteo answer
    assert [(e["title"], e["start"]) for e in r["calendar"]["events"]] == [("Dentist", "2033-06-15T14:00:00+02:00")]
    assert r["email"] == {"unread": 1}
    assert "Pay the rent" in [t["title"] for t in r["tasks"]["items"]]
    assert [d["text"] for d in r["reminders"]["due"]] == ["stretch"]

    replay_server.down("open-meteo")
    body = briefing(client, auth)
    assert body["status"] == "partial"
    (error,) = body["result"]["errors"]
    assert error["capability"] == "weather" and body["result"]["weather"] is None
    assert body["result"]["email"] == {"unread": 1} and body["result"]["calendar"]["count"] == 1


def test_parse_with_the_real_model(tmp_path: Path, default_model_path: Path) -> None:
    live, key = serve(
        tmp_path,
        inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0},
        memory={"embedding_backend": "hashing"},
        calendar={"timezone": "Europe/Berlin"},
        security={"rate_limit_enabled": False},
        commands={"parse_timeout_secs": 600},  # a shared, loaded machine: never a wall-clock assertion
    )
    with live:
        response = httpx.post(f"{live.base_url}/v1/commands/parse", timeout=900,
                              headers={"Authorization": f"Bearer {key}"},
                              json={"input": "I need to see the dentist next Tuesday at 10am"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["source"] == "model"  # no quick pattern knows this sentence: the model was asked
        assert 0.0 <= body["confidence"] <= 0.9
        kind = CommandType(body["command"]["type"])
        assert body["parsed"] is (kind is not CommandType.UNKNOWN)
        assert body["requires_approval"] is (kind in CHANGING)
        if kind is CommandType.CALENDAR_EVENT:
            start = datetime.fromisoformat(body["command"]["start"])
            end = datetime.fromisoformat(body["command"]["end"])
            assert end > start and body["command"]["title"]
