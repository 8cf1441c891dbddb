"""Latency spikes and error-rate surges over synthetic request windows (fixed clock, fake supervisor)."""

from __future__ import annotations

import pytest

from assistant.config import SanitationSettings
from assistant.observability.metrics import Metrics, RequestWindow
from assistant.sanitation.anomalies import MIN_SAMPLES, AnomalyMonitor, component_of

W = 300  # anomaly_window_secs


class Clock:
    def __init__(self) -> None:
        self.now = 10_000.0

    def __call__(self) -> float:
        return self.now


class FakeSupervisor:
    def __init__(self) -> None:
        self.restarts: list[str] = []
        self.resets: list[str] = []

    def restart(self, component: str) -> str:
        self.restarts.append(component)
        return f"restarted (attempt {len(self.restarts)}/4, backoff 30 s)"

    def reset(self, component: str) -> bool:
        self.resets.append(component)
        return True


@pytest.fixture
def clock() -> Clock:
    return Clock()


def fill(window: RequestWindow, clock: Clock, start: float, end: float, n: int, path: str = "/v1/chat",
         latency: float = 100.0, errors: int = 0) -> None:
    """``n`` requests spread over [start, end) seconds before the clock's final time (0 = now)."""
    final = clock.now
    for i in range(n):
        clock.now = final - start + (start - end) * (i + 0.5) / n
        window.record(path, 500 if i < errors else 200, latency)
    clock.now = final


def monitor(window: RequestWindow, clock: Clock, supervisor=None, **settings) -> AnomalyMonitor:  # noqa: ANN001
    return AnomalyMonitor(window, SanitationSettings(anomaly_window_secs=W, **settings), supervisor, clock)


def baseline(window: RequestWindow, clock: Clock, path: str = "/v1/chat", n: int = 60) -> None:
    fill(window, clock, 4 * W, W, n, path, latency=100.0)


@pytest.mark.parametrize(("path", "component"), [
    ("/v1/chat", "engine"), ("/v1/chat/stream", "engine"), ("/v1/agentic/tasks", "engine"),
    ("/v1/memories/search", "embedder"), ("/v1/voice/rooms", "bus"), ("/v1/tools", "http"),
    ("/v1/chatty", "http"), ("/ready", None), ("/ready/all", None), ("/metrics/prometheus", None), ("/health", None),
])
def test_routes_belong_to_components(path: str, component: str | None) -> None:
    assert component_of(path) == component


def test_a_latency_spike_past_the_multiplier_is_a_warning(clock: Clock) -> None:
    window, sup = RequestWindow(clock), FakeSupervisor()
    baseline(window, clock)
    fill(window, clock, W, 0, 30, latency=250.0)  # p95 250 > 2 x 100
    [anomaly] = monitor(window, clock, sup).check()
    assert (anomaly.kind, anomaly.component, anomaly.severity) == ("latency_spike", "engine", "warning")
    assert (anomaly.value, anomaly.threshold) == (250.0, 200.0)
    assert anomaly.action == "" and sup.restarts == []


def test_a_severe_spike_restarts_the_component(clock: Clock) -> None:
    window, sup = RequestWindow(clock), FakeSupervisor()
    baseline(window, clock, "/v1/memories")
    fill(window, clock, W, 0, 30, "/v1/memories", latency=450.0)  # >= 2 x the threshold
    [anomaly] = monitor(window, clock, sup).check()
    assert (anomaly.component, anomaly.severity) == ("embedder", "severe")
    assert anomaly.action == "restarted (attempt 1/4, backoff 30 s)"
    assert sup.restarts == ["embedder"]


def test_no_spike_under_the_multiplier_or_without_enough_samples(clock: Clock) -> None:
    window, sup = RequestWindow(clock), FakeSupervisor()
    baseline(window, clock)
    fill(window, clock, W, 0, 30, latency=190.0)
    assert monitor(window, clock, sup).check() == []
    assert sup.resets == ["engine"]  # a clean window resets the component's restart record
    few = RequestWindow(clock)
    baseline(few, clock)
    fill(few, clock, W, 0, MIN_SAMPLES - 1, latency=5000.0)
    assert monitor(few, clock).check() == []
    thin = RequestWindow(clock)
    fill(thin, clock, 4 * W, W, MIN_SAMPLES - 1)  # too thin a baseline
    fill(thin, clock, W, 0, 30, latency=5000.0)
    assert monitor(thin, clock).check() == []


def test_the_baseline_is_floored(clock: Clock) -> None:
    window = RequestWindow(clock)
    fill(window, clock, 4 * W, W, 60, latency=3.0)
    fill(window, clock, W, 0, 30, latency=40.0)  # 13x a 3 ms baseline, but under 2 x 50 ms
    assert monitor(window, clock).check() == []


def test_an_error_rate_surge(clock: Clock) -> None:
    window, sup = RequestWindow(clock), FakeSupervisor()
    fill(window, clock, W, 0, 30, "/v1/voice/rooms", errors=2)  # 6.7 % > 5 %
    [anomaly] = monitor(window, clock, sup).check()
    assert (anomaly.kind, anomaly.component, anomaly.severity) == ("error_rate_surge", "bus", "warning")
    assert anomaly.value == pytest.approx(2 / 30, abs=1e-4) and anomaly.threshold == 0.05
    assert sup.restarts == []
    severe = RequestWindow(clock)
    fill(severe, clock, W, 0, 30, "/v1/voice/rooms", errors=4)  # 13 % >= 2 x 5 %
    [anomaly] = monitor(severe, clock, sup).check()
    assert anomaly.severity == "severe" and sup.restarts == ["bus"]


def test_a_sustained_surge_is_severe(clock: Clock) -> None:
    window, sup = RequestWindow(clock), FakeSupervisor()
    fill(window, clock, 2 * W, W, 30, errors=2)  # the window before surged too
    fill(window, clock, W, 0, 30, errors=2)
    [anomaly] = monitor(window, clock, sup).check()
    assert anomaly.severity == "severe" and "window before" in anomaly.detail
    assert sup.restarts == ["engine"]


def test_errors_need_enough_samples_and_probes_do_not_count(clock: Clock) -> None:
    window = RequestWindow(clock)
    fill(window, clock, W, 0, MIN_SAMPLES - 1, errors=MIN_SAMPLES - 1)
    fill(window, clock, W, 0, 100, "/ready", errors=100)  # the engine's health, not failed requests
    assert monitor(window, clock).check() == []


def test_one_restart_per_component_and_check_and_http_is_reported(clock: Clock) -> None:
    window, sup = RequestWindow(clock), FakeSupervisor()
    baseline(window, clock)
    fill(window, clock, W, 0, 30, latency=900.0, errors=10)  # spike and surge, both severe
    fill(window, clock, W, 0, 30, "/v1/tools", errors=30)
    found = monitor(window, clock, sup).check()
    assert sorted((a.component, a.kind) for a in found) == [
        ("engine", "error_rate_surge"), ("engine", "latency_spike"), ("http", "error_rate_surge")]
    assert sup.restarts == ["engine", "http"]  # the supervisor answers for http (it has no restart)
    assert monitor(window, clock, None).check()[0].action == ""  # no supervisor: reported only


def test_the_window_is_bounded_by_count_and_age(clock: Clock) -> None:
    window = RequestWindow(clock, max_samples=50, horizon_secs=100)
    fill(window, clock, 10, 0, 80)
    assert len(window.since(0)) == 50
    clock.now += 200
    assert window.since(0) == []
    # the monitor keeps the horizon its baseline needs
    short = RequestWindow(clock, horizon_secs=60)
    monitor(short, clock)
    assert short.horizon_secs == 4 * W


def test_metrics_record_requests_with_their_route(clock: Clock) -> None:
    metrics = Metrics(clock)
    metrics.request_started()
    metrics.request_finished(503, 12.5, "/v1/chat")
    metrics.request_started()
    metrics.request_finished(200, 1.0)  # without a path: counted, not windowed
    [sample] = metrics.window.since(0)
    assert (sample.path, sample.status, sample.latency_ms, sample.ts) == ("/v1/chat", 503, 12.5, clock.now)
    assert metrics.requests_total == 2
