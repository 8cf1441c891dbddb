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
    assert set(services) == {"inference", "database", "cache", "messenger", "email", "calendar", "weather",
                             "embedder"}
    assert set(services) == set(SERVICE_NAMES)
    for state in services.values():
        assert set(state) == {"healthy", "latency_ms", "configured", "circuit"}
    assert services["inference"] == {"healthy": True, "latency_ms": 0, "configured": True, "circuit": "closed"}
    assert services["database"]["healthy"] is True
    assert services["database"]["circuit"] is None
    assert isinstance(services["database"]["latency_ms"], int)
    assert services["embedder"]["healthy"] is True and services["embedder"]["circuit"] == "closed"
    for name in ("cache", "messenger", "email", "calendar", "weather"):  # not configured
        assert services[name] == {"healthy": False, "latency_ms": None, "configured": False, "circuit": None}
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
    assert body["services"]["inference"]["healthy"] is False
    assert body["services"]["inference"]["latency_ms"] is None
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
    for name in ("calendar", "email"):  # configured, unreachable: the real state, not a canned one
        assert body[name] == {"healthy": False, "latency_ms": None, "configured": True, "circuit": "closed"}
    assert body["weather"]["circuit"] == "closed"


def test_ready_all_is_cached_for_every_client(make_settings, make_services, make_client) -> None:
    from tests.assistant.test_health_probe import CountingModel

    model = CountingModel()
    services = make_services(make_settings(server={"readiness_cache_secs": 3600}), model)
    client = make_client(services)
    for _ in range(5):
        assert client.get("/ready/all").status_code == 200
    assert services.probe.rounds == 1
    assert model.probes == 1


def test_ready_all_has_its_own_rate_limit(make_settings, make_services, make_client, model) -> None:
    services = make_services(make_settings(server={"readiness_rpm": 3}, security={"rate_limit_enabled": False}),
                             model)
    client = make_client(services)
    assert [client.get("/ready/all").status_code for _ in range(3)] == [200, 200, 200]
    limited = client.get("/ready/all")
    assert limited.status_code == 429
    error = limited.json()["error"]
    assert error["code"] == "RATE_LIMITED" and error["retry_after"] >= 1
    assert int(limited.headers["retry-after"]) >= 1
    assert client.get("/health").status_code == 200  # the other health routes are not limited by it


def test_ready_all_shows_an_open_breaker(make_settings, make_services, make_client, model) -> None:
    services = make_services(make_settings(server={"readiness_cache_secs": 3600, "circuit_failure_threshold": 1}),
                             model)
    client = make_client(services)
    assert client.get("/ready/all").json()["services"]["inference"]["circuit"] == "closed"
    services.breakers.get("inference").record_failure(RuntimeError("boom"))
    body = client.get("/ready/all").json()  # the probe is cached; the breaker state is read fresh
    assert body["services"]["inference"]["circuit"] == "open"


def test_ready_lists_degraded_components_without_changing_the_status(client, services) -> None:
    from assistant.sanitation.supervisor import ComponentSupervisor

    assert client.get("/ready").json()["degraded"] == {}
    supervisor = ComponentSupervisor(max_restart_count=0)
    supervisor.register("embedder", lambda: None)
    supervisor.restart("embedder")  # no restarts allowed: degraded at once
    services.probe.degraded = supervisor.degraded
    response = client.get("/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["degraded"] == {"embedder": "still failing after 0 restarts"}


def test_ready_survives_a_broken_supervisor(client, services) -> None:
    def broken() -> dict[str, str]:
        raise RuntimeError("boom")

    services.probe.degraded = broken
    response = client.get("/ready")
    assert response.status_code == 200
    assert response.json()["degraded"] == {"supervisor": "unreadable: RuntimeError: boom"}
