"""Readiness probes: the cached inference probe and the per-service report."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from assistant.health import SERVICE_NAMES, HealthProbe, database_health, http_health
from assistant.llm.scripted import ScriptedChatModel


class CountingModel(ScriptedChatModel):
    def __init__(self) -> None:
        super().__init__()
        self.probes = 0

    def health(self):  # noqa: ANN201
        self.probes += 1
        return super().health()


def test_probe_is_cached() -> None:
    model = CountingModel()
    probe = HealthProbe(model, cache_secs=3600)
    assert probe.inference().healthy
    assert probe.inference().healthy
    assert model.probes == 1


def test_probe_without_cache_asks_every_time() -> None:
    model = CountingModel()
    probe = HealthProbe(model, cache_secs=0)
    probe.inference()
    probe.inference()
    assert model.probes == 2


def test_service_report(services) -> None:  # noqa: ANN001
    report = services.service_health()
    assert set(report) == set(SERVICE_NAMES)
    assert report["inference"].healthy is True
    assert report["database"].healthy is True
    assert isinstance(report["database"].latency_ms, int)
    for name in ("cache", "messenger", "email", "calendar", "weather"):
        assert report[name].healthy is False
        assert report[name].latency_ms is None
        assert report[name].detail == "not configured"
    assert report["embedder"].healthy is True
    assert services.metrics.inference_healthy is True


def test_database_health_reports_a_closed_database(tmp_path) -> None:  # noqa: ANN001
    from assistant.storage.db import Database

    db = Database(tmp_path / "x.db")
    assert database_health(db).healthy
    db.close()
    broken = database_health(db)
    assert broken.healthy is False
    assert broken.latency_ms is None


@pytest.fixture
def status_server():  # noqa: ANN201
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # noqa: ANN002
            pass

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(int(self.path.strip("/")))
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_http_health(status_server: str) -> None:
    ok = http_health(status_server + "/200")
    assert ok.healthy is True
    assert isinstance(ok.latency_ms, int)
    assert http_health(status_server + "/404").healthy is True  # answering at all is healthy
    assert http_health(status_server + "/503").healthy is False


def test_http_health_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = http_health(f"http://127.0.0.1:{port}")
    assert (down.healthy, down.latency_ms) == (False, None)


def test_enabled_messenger_is_probed(make_settings, make_services, status_server: str) -> None:  # noqa: ANN001
    services = make_services(make_settings(messenger={"enabled": True, "api_base_url": status_server + "/200"}))
    report = services.service_health()
    assert report["messenger"].healthy is True
    assert isinstance(report["messenger"].latency_ms, int)


def test_all_runs_probes_once_per_ttl_and_concurrently() -> None:
    from assistant.health import ServiceHealth

    now = [0.0]
    probe = HealthProbe(CountingModel(), all_cache_secs=5, clock=lambda: now[0])
    barrier = threading.Barrier(3, timeout=10)  # each probe waits for the others: they run together
    calls: list[str] = []

    def make(name: str):  # noqa: ANN202
        def run() -> ServiceHealth:
            calls.append(name)
            barrier.wait()
            return ServiceHealth(True, 1, name)
        return run

    probes = {name: make(name) for name in ("a", "b", "c")}
    assert probe.all(probes)["b"].detail == "b"
    now[0] = 4.9
    barrier.reset()
    probe.all(probes)
    assert len(calls) == 3 and probe.rounds == 1  # served from the cache
    now[0] = 5.0
    probe.all(probes)
    assert len(calls) == 6 and probe.rounds == 2


def test_all_reports_a_broken_probe_as_unhealthy() -> None:
    def broken():  # noqa: ANN202
        raise OSError("no route to host")

    report = HealthProbe(CountingModel()).all({"x": broken})
    assert report["x"].healthy is False
    assert "no route to host" in report["x"].detail


def test_cache_is_not_canned(make_settings, make_services) -> None:  # noqa: ANN001
    """The KV cache is healthy only while the llama.cpp model is loaded; with the model file
    missing it is not (the report used to say healthy whenever the backend was llama.cpp)."""
    from assistant.llm.llama_cpp import LlamaCppChatModel

    settings = make_settings(server={"readiness_cache_secs": 0})
    model = LlamaCppChatModel("not-installed-model", settings.data_dir)
    report = make_services(settings, model).service_health()
    assert report["cache"].healthy is False
    assert "not loaded" in report["cache"].detail
    assert report["inference"].healthy is False

    class Loaded(LlamaCppChatModel):
        def is_loaded(self, name: str | None = None) -> bool:
            return True

        def health(self):  # noqa: ANN201
            from assistant.llm.base import Health
            return Health(True, self.default_model, 3)

    report = make_services(settings, Loaded("m", settings.data_dir)).service_health()
    assert report["cache"].healthy is True and isinstance(report["cache"].latency_ms, int)


def test_embedder_probe_reports_a_failing_embedder(make_settings, make_services, monkeypatch) -> None:  # noqa: ANN001
    services = make_services(make_settings())
    inner = services.memory.embedder.inner

    def fail(texts):  # noqa: ANN001, ANN202
        raise RuntimeError("embedding model crashed")

    monkeypatch.setattr(inner, "embed", fail)
    report = services.service_health()
    assert report["embedder"].healthy is False
    assert "crashed" in report["embedder"].detail
    assert report["embedder"].circuit == "closed"  # a probe is not traffic: the breaker is untouched
