"""POST /v1/commands and POST /v1/commands/parse: every command, every error envelope."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from assistant.commands.parser import TOOL_NAME
from assistant.errors import ServiceUnavailableError
from assistant.llm.scripted import ScriptedChatModel
from assistant.tools.base import ToolError
from tests.assistant.commands.fakes import NOW, FakeCalendar, FakeMail, FakeWeather, mail


@pytest.fixture
def services(make_services, make_settings, model: ScriptedChatModel):
    services = make_services(make_settings(calendar={"timezone": "Europe/Berlin"}), model)
    services.commands.clock = services.commands.parser.clock = lambda: NOW  # Wednesday 2026-11-11 10:00 Berlin
    return services


def post(client, auth, body: Any, path: str = "/v1/commands"):
    return client.post(path, json=body, headers=auth)


def fields(response) -> list[tuple[str, str]]:
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["request_id"]
    return [(f["field"], f["error"]) for f in error["details"]["fields"]]


# --- POST /v1/commands ---------------------------------------------------------------------------


def test_help(client, auth) -> None:
    response = post(client, auth, {"command": "help"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"command", "status", "result", "executed_at"}
    assert (body["command"], body["status"], body["executed_at"]) == ("help", "completed", "2026-11-11T09:00:00.000Z")
    names = [c["name"] for c in body["result"]["commands"]]
    assert names == ["briefing", "weather", "calendar", "emails", "help"]


def test_briefing_with_only_reminders_configured(client, auth, services) -> None:
    owner = str(services.keys.owner_user_id())
    store = services.tools.backends["reminders"].store
    store.add(owner, "water the plants", NOW + timedelta(hours=3))
    store.add(owner, "not today", NOW + timedelta(days=2))
    response = post(client, auth, {"command": "briefing", "args": {}})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "completed"
    r = body["result"]
    assert r["date"] == "2026-11-11" and r["timezone"] == "Europe/Berlin" and r["errors"] == []
    assert [d["text"] for d in r["reminders"]["due"]] == ["water the plants"]
    assert [u["capability"] for u in r["unavailable"]] == ["weather", "calendar", "email", "tasks"]
    assert r["weather"] is None and r["email"] is None


def test_briefing_is_partial_when_a_capability_fails(client, auth, services) -> None:
    failing = FakeMail()
    failing.fail = ToolError("IMAP server at imap.example.org:993 unreachable")
    services.tools.backends.update(weather=FakeWeather(), email=failing)
    body = post(client, auth, {"command": "briefing", "args": {"location": "Berlin"}}).json()
    assert body["status"] == "partial"
    assert body["result"]["errors"] == [{"capability": "email", "error": "IMAP server at imap.example.org:993 "
                                                                         "unreachable"}]
    assert body["result"]["weather"]["location"]["name"] == "Berlin"


def test_weather_calendar_and_emails_with_their_backends(client, auth, services) -> None:
    services.tools.backends.update(weather=FakeWeather(), calendar=FakeCalendar(),
                                   email=FakeMail([mail("1", "hello"), mail("2", "again")]))
    weather = post(client, auth, {"command": "weather", "args": {"location": "Paris"}}).json()
    assert weather["command"] == "weather" and weather["result"]["location"] == {"name": "Paris", "country": "France"}
    calendar = post(client, auth, {"command": "calendar", "args": {"days": 7}}).json()
    assert calendar["result"] == {"start": "2026-11-11", "days": 7, "timezone": "Europe/Berlin", "count": 0,
                                  "events": []}
    emails = post(client, auth, {"command": "emails", "args": {"count": 1}}).json()
    assert [m["subject"] for m in emails["result"]["emails"]] == ["hello"]


def test_an_unknown_place_is_422(client, auth, services) -> None:
    services.tools.backends["weather"] = FakeWeather()
    response = post(client, auth, {"command": "weather", "args": {"location": "Atlantis"}})
    assert response.status_code == 422
    assert fields(response) == [("args.location", "no place called 'Atlantis' was found")]
    response = post(client, auth, {"command": "weather"})
    assert response.status_code == 422 and fields(response)[0][0] == "args.location"


@pytest.mark.parametrize(("command", "configure"), [
    ("weather", "[weather] enabled = true"), ("calendar", "[calendar] url"),
    ("emails", "[email] imap_host and smtp_host"),
])
def test_a_command_whose_capability_is_not_configured_is_503(client, auth, command: str, configure: str) -> None:
    response = post(client, auth, {"command": command})
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "SERVICE_UNAVAILABLE" and configure in error["message"]
    assert error["details"]["configure"] == configure


def test_a_failing_server_is_502(client, auth, services) -> None:
    calendar = FakeCalendar()
    calendar.fail = ToolError("calendar server at http://dav.example.org unreachable")
    services.tools.backends["calendar"] = calendar
    response = post(client, auth, {"command": "calendar"})
    assert response.status_code == 502
    assert response.json()["error"] == {"code": "UPSTREAM_ERROR", "message": "calendar: calendar server at "
                                        "http://dav.example.org unreachable", "details": {"capability": "calendar"},
                                        "request_id": response.headers["x-request-id"]}


@pytest.mark.parametrize(("body", "expected"), [
    ({"command": "dance"}, [("command", "unknown command 'dance'; known: briefing, weather, calendar, emails, help")]),
    ({"command": "calendar", "args": {"days": 0}},
     [("args.days", "Input should be greater than or equal to 1 (got 0)")]),
    ({"command": "calendar", "args": {"days": "7"}}, [("args.days", "Input should be a valid integer (got '7')")]),
    ({"command": "emails", "args": {"count": 51, "folder": "x"}},
     [("args.count", "Input should be less than or equal to 50 (got 51)"),
      ("args.folder", "unknown argument; emails takes: count")]),
    ({"command": "help", "args": {"verbose": True}}, [("args.verbose", "unknown argument; help takes: no arguments")]),
    ({"args": {}}, [("command", "Field required")]),
    ({"command": 5}, [("command", "Input should be a valid string (got 5)")]),
    ({"command": "help", "args": [1]}, [("args", "Input should be a valid dictionary")]),
    ({"command": "help", "extra": 1}, [("extra", "Extra inputs are not permitted")]),
])
def test_bad_commands_are_422_naming_the_field(client, auth, body: dict, expected: list) -> None:
    response = post(client, auth, body)
    assert response.status_code == 422
    assert fields(response) == expected


def test_a_body_that_is_not_json_is_400(client, auth) -> None:
    response = client.post("/v1/commands", content=b"{nope", headers={**auth, "Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "BAD_REQUEST"


@pytest.mark.parametrize("path", ["/v1/commands", "/v1/commands/parse"])
def test_a_key_is_needed_and_must_not_be_read_only(client, read_only_auth, path: str) -> None:
    body = {"command": "help"} if path == "/v1/commands" else {"input": "help"}
    assert client.post(path, json=body).status_code == 401
    response = client.post(path, json=body, headers=read_only_auth)
    assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"


def test_the_catalog_routes_are_not_shadowed(client, auth) -> None:
    assert client.get("/v1/commands/catalog", headers=auth).status_code == 200
    assert client.get("/v1/commands", headers=auth).status_code == 405  # only POST here


# --- POST /v1/commands/parse ---------------------------------------------------------------------


def test_parse_a_calendar_event(client, auth, model: ScriptedChatModel) -> None:
    response = post(client, auth, {"input": "add meeting with Bob tomorrow at 3pm for an hour"}, "/v1/commands/parse")
    assert response.status_code == 200
    assert response.json() == {
        "parsed": True,
        "command": {"type": "calendar_event", "title": "Meeting with Bob", "start": "2026-11-12T14:00:00.000Z",
                    "end": "2026-11-12T15:00:00.000Z", "all_day": False, "timezone": "Europe/Berlin"},
        "confidence": 0.95, "requires_approval": True, "source": "pattern",
    }
    assert model.calls == []


def test_parse_runs_nothing(client, auth, services) -> None:
    owner = str(services.keys.owner_user_id())
    body = post(client, auth, {"input": "remind me to call mom in 2 hours"}, "/v1/commands/parse").json()
    assert body["command"]["type"] == "reminder" and body["requires_approval"] is True
    assert services.tools.backends["reminders"].store.list_for_user(owner) == []


def test_parse_falls_back_to_the_model(client, auth, model: ScriptedChatModel) -> None:
    model.enqueue(tool_calls=[(TOOL_NAME, {"what": "Oslo", "when": "", "type": "weather", "confidence": 0.99})])
    body = post(client, auth, {"input": "do I need an umbrella in Oslo"}, "/v1/commands/parse").json()
    assert body == {"parsed": True, "command": {"type": "weather", "location": "Oslo"}, "confidence": 0.9,
                    "requires_approval": False, "source": "model"}
    assert model.calls[0][1].tools[0].name == TOOL_NAME


def test_parse_nothing_understood(client, auth) -> None:
    body = post(client, auth, {"input": "tell me a joke"}, "/v1/commands/parse").json()  # the model answers prose
    assert body == {"parsed": False, "command": {"type": "unknown"}, "confidence": 0.0, "requires_approval": False,
                    "source": "model"}


@pytest.mark.parametrize("said", ["0", "0" * 1000, "0" * 2000, "123 456", "!!!", "12:30"])
def test_parse_of_input_without_words_is_not_understood_without_the_model(client, auth, model: ScriptedChatModel,
                                                                          said: str) -> None:
    # Once answered after 10-60 s with a confident command borrowed from the prompt's examples.
    model.enqueue(tool_calls=[(TOOL_NAME, {"what": "Lunch with Sam", "when": "Friday at noon",
                                           "type": "calendar_event", "confidence": 0.9})])
    body = post(client, auth, {"input": said}, "/v1/commands/parse").json()
    assert body == {"parsed": False, "command": {"type": "unknown"}, "confidence": 0.0, "requires_approval": False,
                    "source": None}
    assert model.calls == []


def test_parse_refuses_an_answer_the_sentence_does_not_ground(client, auth, model: ScriptedChatModel) -> None:
    model.enqueue(tool_calls=[(TOOL_NAME, {"what": "Lunch with Sam", "when": "Friday at noon",
                                           "type": "calendar_event", "confidence": 0.9})])
    body = post(client, auth, {"input": "qwerty asdf"}, "/v1/commands/parse").json()
    assert body["parsed"] is False and body["confidence"] == 0.0 and body["source"] == "model"


def test_parse_past_its_timeout_is_503(make_settings, make_services, make_client, model: ScriptedChatModel) -> None:
    services = make_services(make_settings(commands={"parse_timeout_secs": 0.2}), model)
    client = make_client(services)
    key, _ = services.keys.create("k")
    model.enqueue(tool_calls=[(TOOL_NAME, {"what": "x", "when": "", "type": "task", "confidence": 1})], delay_secs=30)
    response = client.post("/v1/commands/parse", json={"input": "something slow"},
                           headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503, response.text
    assert "parse_timeout_secs" in response.json()["error"]["message"]


def test_parse_with_the_engine_down_is_503(client, auth, model: ScriptedChatModel) -> None:
    model.enqueue(error=ServiceUnavailableError("the model file is missing"))
    response = post(client, auth, {"input": "tell me a joke"}, "/v1/commands/parse")
    assert response.status_code == 503 and response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


@pytest.mark.parametrize(("body", "field"), [
    ({"input": ""}, "input"), ({"input": "   "}, "input"), ({"input": "x" * 2001}, "input"), ({}, "input"),
    ({"input": 3}, "input"), ({"input": "help", "model": "x"}, "model"),
])
def test_parse_bad_input_is_422(client, auth, body: dict, field: str) -> None:
    response = post(client, auth, body, "/v1/commands/parse")
    assert response.status_code == 422 and fields(response)[0][0] == field


def test_both_routes_are_documented(client) -> None:
    spec = client.get("/api-docs/openapi.json").json()
    run, parse = spec["paths"]["/v1/commands"]["post"], spec["paths"]["/v1/commands/parse"]["post"]
    assert {"200", "422", "502", "503"} <= set(run["responses"]) and "partial" in run["description"]
    assert "requires_approval" in parse["description"] and {"200", "422", "503"} <= set(parse["responses"])
