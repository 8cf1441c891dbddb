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
