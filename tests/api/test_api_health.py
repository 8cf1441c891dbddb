"""GET /health, /ready and /ready/all (no authentication)."""

from __future__ import annotations

from assistant.health import SERVICE_NAMES
from assistant.llm.scripted import ScriptedChatModel


def test_health(client) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_ready_when_the_engine_is_healthy(client, services) -> None:
    response = client.get("/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["inference"]["healthy"] is True
    assert body["inference"]["model"] == "scripted"
    assert body["inference"]["latency_ms"] == 0
    assert services.metrics.inference_healthy is True


def test_ready_is_503_when_the_engine_is_not(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(), ScriptedChatModel(healthy=False))
    response = make_client(services).get("/ready")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] != "ready"
    assert body["inference"]["healthy"] is False
    assert body["inference"]["latency_ms"] is None
    assert body["inference"]["detail"]
    assert services.metrics.inference_healthy is False


def test_ready_all_lists_every_service(client) -> None:
    response = client.get("/ready/all")
    assert response.status_code == 200
    body = response.json()
    services = body["services"]
    assert set(services) == {"inference", "database", "cache", "messenger", "email", "calendar", "weather"}
    assert set(services) == set(SERVICE_NAMES)
    for state in services.values():
        assert set(state) == {"healthy", "latency_ms"}
    assert services["inference"] == {"healthy": True, "latency_ms": 0}
    assert services["database"]["healthy"] is True
    assert isinstance(services["database"]["latency_ms"], int)
    for name in ("cache", "messenger", "email", "calendar", "weather"):  # not configured
        assert services[name] == {"healthy": False, "latency_ms": None}
    assert set(body["latency_percentiles"]) == {"p50_ms", "p90_ms", "p99_ms"}
    assert body["status"] == "ok"


def test_ready_all_percentiles_follow_requests(client) -> None:
    first = client.get("/ready/all").json()["latency_percentiles"]
    assert first == {"p50_ms": None, "p90_ms": None, "p99_ms": None}  # nothing recorded before it
    for _ in range(5):
        client.get("/health")
    p = client.get("/ready/all").json()["latency_percentiles"]
    assert all(isinstance(v, float | int) for v in p.values())
    assert 0 <= p["p50_ms"] <= p["p90_ms"] <= p["p99_ms"]


def test_ready_all_degraded_when_the_engine_is_down(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(), ScriptedChatModel(healthy=False))
    response = make_client(services).get("/ready/all")
    assert response.status_code == 200
    body = response.json()
    assert body["services"]["inference"] == {"healthy": False, "latency_ms": None}
    assert body["status"] != "ok"


def test_health_routes_need_no_key_and_ignore_a_bad_one(client) -> None:
    bad = {"Authorization": "Bearer wrong"}
    for path in ("/health", "/ready", "/ready/all"):
        assert client.get(path).status_code == 200
        assert client.get(path, headers=bad).status_code == 200


def test_ready_all_probes_configured_weather_calendar_and_email(make_settings, make_services, make_client,
                                                                 model) -> None:
    """A configured capability's backend is probed for reachability: the replayed weather service
    answers; a calendar and an IMAP server on closed ports do not."""
    import socket

    from assistant.testing.replay import ReplayServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with ReplayServer() as replay:
        settings = make_settings(
            **replay.settings_overrides(),
            calendar={"url": f"http://127.0.0.1:{closed}/dav/"},
            email={"imap_host": "127.0.0.1", "imap_port": closed, "smtp_host": "127.0.0.1",
                   "username": "u", "password": "p", "from_address": "me@example.org"},
        )
        body = make_client(make_services(settings, model)).get("/ready/all").json()["services"]
    assert body["weather"]["healthy"] is True and isinstance(body["weather"]["latency_ms"], int)
    assert body["calendar"] == {"healthy": False, "latency_ms": None}
    assert body["email"] == {"healthy": False, "latency_ms": None}
