"""GET /api/v1/signals: the caller's and the server-wide signals, filtered by kind and time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assistant.observability.signals import SignalKind


@pytest.fixture
def user_id(services, api_key):
    return services.keys.authenticate(api_key).user_id


@pytest.fixture
def other_auth(services) -> dict[str, str]:
    from uuid import uuid4

    key, _ = services.keys.create("someone-else", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


def test_lists_the_callers_and_server_wide_signals_only(services, client, auth, other_auth, user_id) -> None:
    bus = services.signals
    bus.publish(SignalKind.THERMAL_UPDATE, {"zone": "x86_pkg_temp"}, value=48.0)
    bus.publish(SignalKind.COGNITIVE_LOAD_ESTIMATE, {"format": "Narrative"}, user_id=str(user_id), value=0.2)
    bus.publish(SignalKind.PRIVACY_SPEND, {"query": "memory-stats"}, user_id="someone-else", value=0.1)
    body = client.get("/api/v1/signals", headers=auth).json()
    kinds = [s["kind"] for s in body["signals"]]
    assert kinds == ["ThermalUpdate", "CognitiveLoadEstimate"]
    assert body["capacity"] == 1024 and body["retention_days"] == 90 and len(body["kinds"]) == 10
    assert all(s["user_id"] in (None, str(user_id)) for s in body["signals"])
    other = client.get("/api/v1/signals", headers=other_auth).json()
    assert [s["kind"] for s in other["signals"]] == ["ThermalUpdate"]


def test_filters_by_kind_and_since(services, client, auth, user_id) -> None:
    bus = services.signals
    bus.publish(SignalKind.THERMAL_UPDATE, value=50.0)
    bus.publish(SignalKind.QUALITY_SCORE, user_id=str(user_id), value=0.9)
    only = client.get("/api/v1/signals", params={"kind": "QualityScore"}, headers=auth).json()
    assert [s["value"] for s in only["signals"]] == [0.9]
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert client.get("/api/v1/signals", params={"since": later}, headers=auth).json()["total"] == 0


def test_bad_input_is_422_and_no_key_is_401(client, auth) -> None:
    bad = client.get("/api/v1/signals", params={"kind": "Weather"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "VALIDATION_ERROR"
    assert client.get("/api/v1/signals", params={"limit": 0}, headers=auth).status_code == 422
    assert client.get("/api/v1/signals").status_code == 401
