"""`GET /api/v1/precache/status` and `POST /api/v1/precache/refresh`: roles, the caller's data only, 503 when off."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from fastapi.testclient import TestClient

from assistant.services import Services
from tests.assistant.extended.precache_support import FakeThermal, seed_days

P = "/api/v1/precache"
QUERY = "How long is my commute to the lab today?"


def keys(services: Services) -> tuple[dict[str, str], str, dict[str, str]]:
    key, principal = services.keys.create("a", user_id=uuid4())
    other, _ = services.keys.create("b", user_id=uuid4())
    return {"X-API-Key": key}, str(principal.user_id), {"Authorization": f"Bearer {other}"}


def test_disabled_is_503_naming_the_key_before_the_body(make_settings: Callable[..., Any],
                                                         make_services: Callable[..., Services],
                                                         make_client: Callable[[Services], TestClient]) -> None:
    services = make_services(make_settings(precache_prediction={"enabled": False}))
    client = make_client(services)
    auth, _, _ = keys(services)
    for response in (client.get(f"{P}/status", headers=auth),
                     client.post(f"{P}/refresh", headers=auth, json={"unexpected": 1})):
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "precache_prediction.enabled" in error["message"]


def test_status_and_refresh_for_the_caller_only(services: Services, client: TestClient,
                                                read_only_auth: dict[str, str]) -> None:
    services.precache.thermal = FakeThermal(50.0)
    auth, user, other = keys(services)
    seed_days(services, user, QUERY, 8, datetime.now(UTC), hour=None)  # at this time of day, 8 of 10 days

    empty = client.get(f"{P}/status", headers=auth)
    assert empty.status_code == 200, empty.text
    body = empty.json()
    assert (body["predictions"], body["last_refresh"], body["hits"], body["hit_rate"]) == ([], None, 0, 0.0)
    assert body["settings"] == {"min_probability": 0.7, "check_interval_minutes": 15, "max_precached_queries": 20,
                                "thermal_pause_celsius": 65.0}
    assert body["thermal"] == {"status": "ok", "temperature_celsius": 50.0, "sensor": "x86_pkg_temp",
                               "threshold_celsius": 65.0}

    refreshed = client.post(f"{P}/refresh", headers=auth)
    assert refreshed.status_code == 200, refreshed.text
    body = refreshed.json()
    (predicted,) = body["predictions"]
    assert (predicted["query"], predicted["probability"], predicted["slot_kind"]) == (QUERY, 0.8, "hour_of_day")
    assert predicted["cached"] and predicted["fresh"] and body["cached"] == 1
    assert body["last_refresh"]["status"] == "ran" and body["last_refresh"]["predicted"] == 1

    assert services.precache.lookup(user, QUERY) is not None
    assert client.get(f"{P}/status", headers=auth).json()["hits"] == 1

    for headers in (other, read_only_auth):  # another user (and the owner's read-only key: another user id here)
        seen = client.get(f"{P}/status", headers=headers)
        assert seen.status_code == 200 and QUERY not in seen.text and user not in seen.text
        assert seen.json()["predictions"] == [] and seen.json()["hits"] == 0
    mine = client.post(f"{P}/refresh", headers=other, json={})
    assert mine.status_code == 200 and QUERY not in mine.text and mine.json()["predictions"] == []
    assert services.precache.lookup(user, QUERY) is not None  # B's refresh left A's entry


def test_roles_and_bad_input(services: Services, client: TestClient, read_only_auth: dict[str, str]) -> None:
    auth, _, _ = keys(services)
    assert client.get(f"{P}/status").status_code == 401
    assert client.get(f"{P}/status", headers=read_only_auth).status_code == 200
    forbidden = client.post(f"{P}/refresh", headers=read_only_auth)
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "FORBIDDEN"
    bad = client.post(f"{P}/refresh", headers=auth, json={"user_id": "someone else"})
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "VALIDATION_ERROR"
    assert bad.json()["error"]["details"]["fields"]


def test_a_hot_cpu_pauses_the_refresh(services: Services, client: TestClient) -> None:
    services.precache.thermal = FakeThermal(65.5)
    auth, user, _ = keys(services)
    seed_days(services, user, QUERY, 8, datetime.now(UTC), hour=None)
    body = client.post(f"{P}/refresh", headers=auth).json()
    assert body["paused"] is True and body["thermal"]["status"] == "paused"
    assert body["last_refresh"]["status"] == "paused" and body["predictions"] == []
    services.precache.thermal = FakeThermal(None)
    body = client.post(f"{P}/refresh", headers=auth).json()
    assert (body["paused"], body["thermal"]["status"], body["last_refresh"]["status"]) == (False, "no sensor", "ran")
    assert len(body["predictions"]) == 1
