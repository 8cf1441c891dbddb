"""GET /metrics (JSON) and /metrics/prometheus (text exposition)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from assistant.dream.journal import APPLIERS, Applied
from assistant.dream.service import default_steps
from assistant.dream.session import PhaseContext
from assistant.dream.types import Operation
from assistant.errors import UpstreamError
from assistant.llm.scripted import ScriptedChatModel
from assistant.testing.graph import ScriptedExtractor

default_steps()  # imports NREM and REM, which register their appliers: a test replaces one after that


def metrics(client) -> dict:  # noqa: ANN001
    response = client.get("/metrics")
    assert response.status_code == 200
    return response.json()


def test_metrics_shape(client) -> None:
    body = metrics(client)
    assert set(body) == {"uptime_seconds", "http", "inference"}
    assert set(body["http"]) == {
        "requests_total", "requests_success", "requests_client_error", "requests_server_error",
        "active_requests", "response_time_avg_ms",
    }
    assert set(body["inference"]) == {
        "requests_total", "requests_success", "requests_failed", "time_avg_ms", "tokens_total", "healthy",
    }
    assert isinstance(body["uptime_seconds"], int)
    assert body["http"]["active_requests"] == 1  # this request


def test_http_counts_move(client, auth, model: ScriptedChatModel) -> None:
    before = metrics(client)["http"]
    client.get("/health")
    client.get("/nope")
    client.get("/v1/system/status")  # 401
    model.enqueue(error=RuntimeError("boom"))
    client.post("/v1/chat", json={"message": "hi"}, headers=auth)  # 500
    after = metrics(client)["http"]
    assert after["requests_total"] == before["requests_total"] + 5
    assert after["requests_success"] == before["requests_success"] + 2  # /health and the first /metrics
    assert after["requests_client_error"] == before["requests_client_error"] + 2
    assert after["requests_server_error"] == before["requests_server_error"] + 1
    assert after["response_time_avg_ms"] > 0


def test_inference_counts_move(client, auth, model: ScriptedChatModel) -> None:
    reply = client.post("/v1/chat", json={"message": "count my tokens"}, headers=auth).json()
    model.enqueue(error=UpstreamError("down"))
    client.post("/v1/chat", json={"message": "fails"}, headers=auth)
    inference = metrics(client)["inference"]
    assert inference["requests_total"] == 2
    assert inference["requests_success"] == 1
    assert inference["requests_failed"] == 1
    assert inference["tokens_total"] == reply["tokens"]["total"]
    assert inference["time_avg_ms"] >= 0


def test_healthy_follows_the_readiness_probe(client) -> None:
    assert metrics(client)["inference"]["healthy"] is False  # not probed yet
    client.get("/ready")
    assert metrics(client)["inference"]["healthy"] is True


def test_prometheus_exposition(client, auth) -> None:
    client.post("/v1/chat", json={"message": "hi"}, headers=auth)
    client.get("/nope")
    response = client.get("/metrics/prometheus")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    assert "# TYPE app_uptime_seconds counter" in lines
    assert any(line.startswith("app_uptime_seconds ") for line in lines)
    for status in ("success", "client_error", "server_error"):
        assert any(line.startswith(f'http_requests_total{{status="{status}"}} ') for line in lines), status
    assert 'http_requests_total{status="client_error"} 1.0' in lines
    for le in ("100", "250", "500", "1000", "+Inf"):
        assert any(line.startswith(f'inference_time_ms_bucket{{le="{le}"}} ') for line in lines), le
    assert 'inference_time_ms_bucket{le="+Inf"} 1.0' in lines
    assert "inference_time_ms_count 1.0" in lines


def test_metrics_need_no_key(client) -> None:
    assert client.get("/metrics").status_code == 200
    assert client.get("/metrics/prometheus").status_code == 200


def test_prometheus_has_a_circuit_gauge_per_backend(client, services) -> None:
    text = client.get("/metrics/prometheus").text
    assert "# TYPE circuit_breaker_state gauge" in text
    assert 'circuit_breaker_state{backend="inference"} 0.0' in text
    assert 'circuit_breaker_state{backend="embedder"} 0.0' in text
    breaker = services.breakers.get("inference")
    for _ in range(breaker.failure_threshold):
        breaker.record_failure("engine down")
    text = client.get("/metrics/prometheus").text
    assert 'circuit_breaker_state{backend="inference"} 2.0' in text


def test_prometheus_has_the_speaker_unavailable_counter_with_voice(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(voice={}))
    text = make_client(services).get("/metrics/prometheus").text
    assert "voice_speaker_unavailable_total 0.0" in text.splitlines()  # voice configured, not yet started


class CountingExtractor:
    """An extractor that keeps the counters /metrics reads (a missing one counts 0)."""

    def __init__(self, id: str, **counters: float):  # noqa: A002 - the Extractor protocol's attribute
        self.id = id
        for name, value in counters.items():
            setattr(self, name, value)

    def extract(self, passages):  # noqa: ANN001, ANN201
        raise AssertionError("not called")


def test_prometheus_has_the_knowledge_graph_series(client, auth, services) -> None:
    services.graph.extractor = ScriptedExtractor()  # capitalised words become nodes: two here, one call
    assert client.post("/v1/memories", json={"content": "Anna met Tom", "summary": "s"}, headers=auth).status_code == 201
    assert services.graph.wait_idle()
    lines = client.get("/metrics/prometheus").text.splitlines()
    assert "knowledge_graph_nodes 2.0" in lines and "knowledge_graph_edges 0.0" in lines
    assert 'knowledge_graph_events_total{type="NodeCreated"} 2.0' in lines
    assert 'knowledge_graph_extraction_calls_total{extractor="scripted"} 1.0' in lines
    families = {f.name: f for f in text_string_to_metric_families("\n".join(lines) + "\n")}
    assert families["knowledge_graph_nodes"].type == families["knowledge_graph_edges"].type == "gauge"
    for name in ("calls", "failures", "fallbacks", "seconds"):
        assert families[f"knowledge_graph_extraction_{name}"].type == "counter", name
    assert families["knowledge_graph_events"].type == "counter"


def test_the_extraction_counters_come_from_the_extractor_and_its_fallback(client, services) -> None:
    services.graph.extractor = CountingExtractor("llm", calls=5, failures=2, fallbacks=1, seconds=1.5)
    services.graph.fallback = CountingExtractor("rules", calls=1)
    lines = client.get("/metrics/prometheus").text.splitlines()
    for line in ('knowledge_graph_extraction_calls_total{extractor="llm"} 5.0',
                 'knowledge_graph_extraction_failures_total{extractor="llm"} 2.0',
                 'knowledge_graph_extraction_fallbacks_total{extractor="llm"} 1.0',
                 'knowledge_graph_extraction_seconds_total{extractor="llm"} 1.5',
                 'knowledge_graph_extraction_calls_total{extractor="rules"} 1.0',
                 'knowledge_graph_extraction_seconds_total{extractor="rules"} 0.0'):
        assert line in lines, line


def test_no_knowledge_graph_series_while_it_is_disabled(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(knowledge_graph={"enabled": False}))
    assert "knowledge_graph" not in make_client(services).get("/metrics/prometheus").text


DREAM_SERIES = {  # the spec's dream counters: name -> the label and its values (None: no label)
    "sessions": ("status", ("running", "paused", "completed", "failed")),
    "cycles": ("phase", ("nrem", "rem")),
    "memories_consolidated": None,
    "memories_archived": None,
    "insights": ("type", ("pattern", "connection", "suggestion", "hypothesis")),
    "graph_edges_modified": ("operation", ("pruned", "reweighted", "created")),
    "graph_nodes_merged": None,
    "llm_calls": None,
    "duration_seconds": None,
}


def dream_samples(client) -> dict[tuple[str, tuple], float]:  # noqa: ANN001
    """(sample name, labels) -> value of every assistant_dream_ series; each family a counter."""
    text = client.get("/metrics/prometheus").text
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("assistant_dream_"):
            assert family.type == "counter", family.name
            for sample in family.samples:
                found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_every_dream_counter_is_present_at_zero_before_the_first_dream(client) -> None:
    samples = dream_samples(client)
    expected = set()
    for name, labelled in DREAM_SERIES.items():
        full = f"assistant_dream_{name}_total"
        if labelled is None:
            expected.add((full, ()))
        else:
            label, values = labelled
            expected |= {(full, ((label, value),)) for value in values}
    assert set(samples) == expected
    assert set(samples.values()) == {0.0}


class Archiving:
    """A dream step: one engine call of two requests and one MemoryArchived operation (3 memories) per phase."""

    name = "archive"

    def run(self, ctx: PhaseContext) -> None:
        ctx.emit("llm_call", calls=2)
        ctx.record(Operation.MEMORY_ARCHIVED, f"archive:{ctx.session.id}:{ctx.cycle}", {})


def test_the_dream_counters_count_a_session(client, auth, services, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setitem(APPLIERS, Operation.MEMORY_ARCHIVED, lambda deps, entry: Applied(count=3))
    services.dream.nrem_steps, services.dream.rem_steps = [Archiving()], []
    started = client.post("/v1/dream/trigger", headers=auth)
    assert started.status_code == 202, started.text
    assert services.dream.wait(started.json()["user_id"], 60).status.value == "completed"
    samples = dream_samples(client)
    cycles = services.settings.dream.max_cycles
    assert samples[("assistant_dream_sessions_total", (("status", "running"),))] == 1
    assert samples[("assistant_dream_sessions_total", (("status", "completed"),))] == 1
    assert samples[("assistant_dream_sessions_total", (("status", "failed"),))] == 0
    assert samples[("assistant_dream_cycles_total", (("phase", "nrem"),))] == cycles
    assert samples[("assistant_dream_cycles_total", (("phase", "rem"),))] == cycles
    assert samples[("assistant_dream_memories_archived_total", ())] == 3 * cycles
    assert samples[("assistant_dream_llm_calls_total", ())] == 2 * cycles
    assert samples[("assistant_dream_duration_seconds_total", ())] > 0


def test_requests_are_windowed_with_their_route_for_anomaly_detection(client, services, auth) -> None:
    client.get("/v1/tools", headers=auth)
    client.get("/v1/memories/does-not-exist", headers=auth)
    samples = {(s.path, s.status) for s in services.metrics.window.since(0)}
    assert ("/v1/tools", 200) in samples
    assert any(path == "/v1/memories/does-not-exist" and status >= 400 for path, status in samples)
