"""Metrics: status classes, the inference histogram, the JSON snapshot, the exposition text."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from assistant.observability.metrics import INFERENCE_BUCKETS_MS, Metrics, knowledge_graph_figures, status_class


class Clock:
    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("status", "cls"),
    [(200, "success"), (201, "success"), (204, "success"), (304, "success"), (400, "client_error"),
     (404, "client_error"), (429, "client_error"), (499, "client_error"), (500, "server_error"),
     (503, "server_error")],
)
def test_status_classes(status: int, cls: str) -> None:
    assert status_class(status) == cls


def observed(durations: list[float]) -> Metrics:
    m = Metrics()
    for d in durations:
        m.observe_inference(d, tokens=10, ok=True)
    return m


def test_histogram_buckets_are_cumulative() -> None:
    m = observed([50, 100, 300, 700, 5000])
    assert INFERENCE_BUCKETS_MS == (100, 250, 500, 1000)
    assert m.inference_buckets == [2, 2, 3, 4]
    text = m.prometheus().decode()
    expected = {"100": 2, "250": 2, "500": 3, "1000": 4, "+Inf": 5}
    for le, n in expected.items():
        assert f'inference_time_ms_bucket{{le="{le}"}} {float(n)}' in text
    assert "inference_time_ms_count 5.0" in text
    assert "inference_time_ms_sum 6150.0" in text


def test_requests_by_class_and_snapshot() -> None:
    m = Metrics()
    for status, ms in [(200, 10), (201, 20), (404, 30), (503, 40)]:
        m.request_started()
        m.request_finished(status, ms)
    m.request_started()  # one still in flight
    snap = m.snapshot()
    assert snap["http"] == {
        "requests_total": 4,
        "requests_success": 2,
        "requests_client_error": 1,
        "requests_server_error": 1,
        "active_requests": 1,
        "response_time_avg_ms": 25.0,
    }
    assert m.requests_total == 4


def test_inference_snapshot() -> None:
    m = Metrics()
    m.observe_inference(100, tokens=7, ok=True)
    m.observe_inference(300, tokens=3, ok=False)
    m.inference_healthy = True
    assert m.snapshot()["inference"] == {
        "requests_total": 2,
        "requests_success": 1,
        "requests_failed": 1,
        "time_avg_ms": 200.0,
        "tokens_total": 10,
        "healthy": True,
    }


def test_empty_snapshot_has_zero_averages() -> None:
    snap = Metrics().snapshot()
    assert snap["http"]["response_time_avg_ms"] == 0.0
    assert snap["inference"]["time_avg_ms"] == 0.0
    assert snap["inference"]["healthy"] is False


def test_uptime_follows_the_clock() -> None:
    clock = Clock()
    m = Metrics(clock=clock)
    clock.now += 12.5
    assert m.uptime_seconds == 12.5
    assert m.snapshot()["uptime_seconds"] == 12
    assert "app_uptime_seconds 12.500\n" in m.prometheus().decode()


def test_exposition_names_and_types() -> None:
    m = Metrics()
    m.request_started()
    m.request_finished(200, 5)
    m.request_started()
    m.request_finished(404, 5)
    m.request_started()
    m.request_finished(500, 5)
    m.observe_inference(50, 1, True)
    text = m.prometheus().decode()
    lines = text.splitlines()
    assert "# TYPE app_uptime_seconds counter" in lines
    assert any(line.startswith("app_uptime_seconds ") for line in lines)
    assert "# TYPE http_requests_total counter" in lines
    assert 'http_requests_total{status="success"} 1.0' in lines
    assert 'http_requests_total{status="client_error"} 1.0' in lines
    assert 'http_requests_total{status="server_error"} 1.0' in lines
    assert "# TYPE inference_time_ms histogram" in lines
    assert 'inference_time_ms_bucket{le="100"} 1.0' in lines
    # The whole text parses as the Prometheus exposition format.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["app_uptime_seconds"].type == "counter"
    assert families["http_requests"].type == "counter"
    assert families["inference_time_ms"].type == "histogram"
    # (the Python parser renames a counter's sample to "<name>_total"; the raw line is checked above)
    samples = {s.name for f in families.values() for s in f.samples}
    assert {"http_requests_total", "inference_time_ms_bucket", "inference_time_ms_count",
            "inference_time_ms_sum"} <= samples


def test_instances_do_not_share_counters() -> None:
    a, b = Metrics(), Metrics()
    a.request_started()
    a.request_finished(200, 1)
    assert b.requests_total == 0
    assert 'http_requests_total{status="success"} 0.0' in b.prometheus().decode()


def test_voice_speaker_unavailable_is_a_counter_only_with_voice() -> None:
    m = Metrics()
    assert "voice_speaker_unavailable" not in m.prometheus().decode()  # no [voice]: no series
    count = {"n": 0}
    m.voice_speaker_unavailable = lambda: count["n"]
    count["n"] = 3
    text = m.prometheus().decode()
    assert "# TYPE voice_speaker_unavailable_total counter" in text.splitlines()
    assert "voice_speaker_unavailable_total 3.0" in text.splitlines()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["voice_speaker_unavailable"].type == "counter"


def test_knowledge_graph_figures_read_the_graph_and_default_missing_counters_to_zero() -> None:
    class Extractor:
        id = "llm"
        calls, failures, seconds = 4, 1, 2.5  # no "fallbacks": 0

    graph = SimpleNamespace(totals=lambda: {"nodes": 7, "edges": 9, "edges_invalidated": 1}, extractor=Extractor(),
                            fallback=None, counters=SimpleNamespace(events={"NodeCreated": 7}))
    figures = knowledge_graph_figures(graph)
    assert (figures.nodes, figures.edges, figures.events) == (7, 9, {"NodeCreated": 7})
    assert figures.extractors == {"llm": {"calls": 4.0, "failures": 1.0, "fallbacks": 0.0, "seconds": 2.5}}
    m = Metrics()
    assert "knowledge_graph" not in m.prometheus().decode()  # no graph: no series
    m.knowledge_graph = lambda: figures
    lines = m.prometheus().decode().splitlines()
    assert "knowledge_graph_nodes 7.0" in lines and "knowledge_graph_edges 9.0" in lines
    assert 'knowledge_graph_extraction_fallbacks_total{extractor="llm"} 0.0' in lines
    assert 'knowledge_graph_events_total{type="NodeCreated"} 7.0' in lines


def test_tool_call_problems_by_reason() -> None:
    from assistant.chat.call_review import PROBLEM_REASONS, ToolCallCounters

    metrics, counters = Metrics(), ToolCallCounters()
    metrics.tool_calls = counters.snapshot
    counters.add("prerequisite")
    counters.add("repair", 2)
    families = {f.name: f for f in text_string_to_metric_families(metrics.prometheus().decode())}
    samples = {s.labels["reason"]: s.value for s in families["assistant_tool_call_problems"].samples}
    assert set(samples) == set(PROBLEM_REASONS)  # every reason from the start
    assert samples["prerequisite"] == 1 and samples["repair"] == 2 and samples["unknown_tool"] == 0
