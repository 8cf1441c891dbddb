"""Request and inference metrics, exposed as the spec's JSON and Prometheus series.

The counters live here (thread-safe, per instance, no global registry) and a prometheus-client
collector renders them with exactly the spec's names: ``app_uptime_seconds`` (counter),
``http_requests_total{status}`` with ``success``/``client_error``/``server_error``, and the
``inference_time_ms`` histogram with buckets 100, 250, 500, 1000, +Inf. With the voice pipeline running,
``voice_dropped_messages_total{kind,reason}`` counts the bus messages it dropped (oversized, malformed,
unknown room, ...; the reasons are in docs/voice-bus.md) and ``voice_speaker_unavailable_total`` the
voice exchanges whose speaker engine failed or timed out, answered as an unknown speaker without
personal memories (docs/companion-speaker.md). ``circuit_breaker_state{backend}`` is a
gauge per backend's circuit breaker (assistant/breaker.py): 0 closed, 1 half-open, 2 open.

With the knowledge graph on: ``knowledge_graph_nodes`` and ``knowledge_graph_edges`` (gauges, all
users; edges valid now), the extraction counters per extractor (``{extractor}``: the configured one
and its fallback) ``knowledge_graph_extraction_calls_total``, ``..._failures_total`` (outputs
skipped: invalid JSON after the retry, unknown entities), ``..._fallbacks_total`` (passages handed to
the fallback) and ``knowledge_graph_extraction_seconds_total`` (time spent extracting: with the calls,
the mean latency), and ``knowledge_graph_events_total{type}`` (graph events published).

With dream mode on (``Metrics.dream``: :meth:`assistant.dream.counters.DreamCounters.snapshot`), the
spec's dream counters, prefix ``assistant_dream_`` (:data:`DREAM_PREFIX`; the spec's ``<svc>``):
``sessions_total{status}`` (sessions entering running, paused, completed, failed),
``cycles_total{phase}`` (nrem, rem phases finished), ``memories_consolidated_total``,
``memories_archived_total``, ``insights_total{type}`` (pattern, connection, suggestion, hypothesis),
``graph_edges_modified_total{operation}`` (pruned, reweighted, created), ``graph_nodes_merged_total``,
``llm_calls_total`` and ``duration_seconds_total`` (wall time of finished sessions). Every labelled
series is present at 0 from the start (the label values are fixed), so a dashboard's rate() has a
baseline before the first dream.

``assistant_tool_call_problems_total{reason}`` counts what the tool loop did to calls before running
them (assistant/chat/call_review.py): ``unknown_tool``, ``malformed``, ``prerequisite``, ``repair``,
``invalid_arguments`` (still invalid after the repair round) and ``arguments_changed``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric

INFERENCE_BUCKETS_MS = (100, 250, 500, 1000)
STATUS_CLASSES = ("success", "client_error", "server_error")
CIRCUIT_VALUES = {"closed": 0, "half_open": 1, "open": 2}


EXTRACTOR_COUNTERS = ("calls", "failures", "fallbacks", "seconds")  # attributes an extractor may keep

DREAM_PREFIX = "assistant_dream_"  # the spec's "<svc>_dream_" with <svc> = assistant
# label -> the values each labelled dream counter always shows (0 until counted); others seen are added
DREAM_LABELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "sessions": ("status", ("running", "paused", "completed", "failed")),
    "cycles": ("phase", ("nrem", "rem")),
    "insights": ("type", ("pattern", "connection", "suggestion", "hypothesis")),
    "graph_edges_modified": ("operation", ("pruned", "reweighted", "created")),
}
DREAM_COUNTERS = (  # snapshot key, help text
    ("sessions", "Dream sessions entering each status."),
    ("cycles", "Dream phases finished, by phase (a cycle is one NREM and one REM phase)."),
    ("memories_consolidated", "Merged memories written by NREM consolidation."),
    ("memories_archived", "Memories archived by dream mode (consolidated originals, duplicates, memories at "
                          "their floor)."),
    ("insights", "Dream insights created, by type."),
    ("graph_edges_modified", "Knowledge-graph edges pruned, reweighted or created by dream mode."),
    ("graph_nodes_merged", "Knowledge-graph nodes merged by dream mode."),
    ("llm_calls", "Inference engine calls made by dream mode (REM hypotheses and suggestions)."),
    ("duration_seconds", "Wall time of finished dream sessions, pauses included."),
)


@dataclass(frozen=True)
class GraphFigures:
    nodes: int = 0
    edges: int = 0
    extractors: dict[str, dict[str, float]] = field(default_factory=dict)  # extractor id -> counter -> value
    events: dict[str, int] = field(default_factory=dict)  # event type -> published


def knowledge_graph_figures(graph: Any) -> GraphFigures:
    """What /metrics reports of a :class:`~assistant.graph.service.KnowledgeGraph`: its totals, the
    counters its extractor and fallback keep (each missing one counts 0) and the events published."""
    totals = graph.totals()
    extractors: dict[str, dict[str, float]] = {}
    for extractor in (graph.extractor, getattr(graph, "fallback", None)):
        if extractor is None:
            continue
        counts = extractors.setdefault(str(getattr(extractor, "id", type(extractor).__name__)), dict.fromkeys(
            EXTRACTOR_COUNTERS, 0.0))
        for name in EXTRACTOR_COUNTERS:
            counts[name] += float(getattr(extractor, name, 0) or 0)
    return GraphFigures(int(totals.get("nodes", 0)), int(totals.get("edges", 0)), extractors,
                        dict(graph.counters.events))


def status_class(status_code: int) -> str:
    if status_code >= 500:
        return "server_error"
    if status_code >= 400:
        return "client_error"
    return "success"


@dataclass(frozen=True)
class RequestSample:
    ts: float  # the metrics clock (monotonic) when the request finished
    path: str
    latency_ms: float
    status: int


class RequestWindow:
    """The last requests, bounded by count and by age: what the anomaly monitor
    (:mod:`assistant.sanitation.anomalies`) reads for latency spikes and error-rate surges. The
    counters above are totals since start; this keeps the recent samples with their route."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_samples: int = 20_000,
                 horizon_secs: float = 3600.0):
        self._clock = clock
        self.horizon_secs = float(horizon_secs)
        self._samples: deque[RequestSample] = deque(maxlen=max(1, int(max_samples)))
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock()

    def record(self, path: str, status: int, latency_ms: float) -> None:
        now = self._clock()
        with self._lock:
            self._samples.append(RequestSample(now, path, float(latency_ms), int(status)))
            self._expire(now)

    def since(self, start: float) -> list[RequestSample]:
        """The samples that finished at or after ``start`` (clock time), oldest first."""
        with self._lock:
            self._expire(self._clock())
            return [s for s in self._samples if s.ts >= start]

    def _expire(self, now: float) -> None:
        while self._samples and self._samples[0].ts < now - self.horizon_secs:
            self._samples.popleft()


class Metrics:
    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.started = clock()
        self._lock = threading.Lock()
        self.requests = dict.fromkeys(STATUS_CLASSES, 0)
        self.active_requests = 0
        self.window = RequestWindow(clock)  # recent requests with their route (anomaly detection)
        self.response_time_sum_ms = 0.0
        self.inference_total = 0
        self.inference_success = 0
        self.inference_failed = 0
        self.inference_time_sum_ms = 0.0
        self.inference_buckets = [0] * len(INFERENCE_BUCKETS_MS)
        self.tokens_total = 0
        self.inference_healthy = False
        self.voice_dropped: Callable[[], dict[tuple[str, str], int]] | None = None  # set by the voice service
        self.voice_speaker_unavailable: Callable[[], int] | None = None  # set by the voice service
        self.circuits: Callable[[], dict[str, str]] | None = None  # backend -> breaker state (build_services)
        self.knowledge_graph: Callable[[], GraphFigures] | None = None  # set by build_services with the graph on
        self.dream: Callable[[], dict] | None = None  # dream counters (DreamCounters.snapshot) with dream mode on
        # what the tool loop did to calls, by reason (ToolCallCounters.snapshot; build_services sets it)
        self.tool_calls: Callable[[], dict[str, int]] | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))

    @property
    def uptime_seconds(self) -> float:
        return self._clock() - self.started

    @property
    def requests_total(self) -> int:
        return sum(self.requests.values())

    def request_started(self) -> None:
        with self._lock:
            self.active_requests += 1

    def request_finished(self, status_code: int, duration_ms: float, path: str | None = None) -> None:
        with self._lock:
            self.active_requests -= 1
            self.requests[status_class(status_code)] += 1
            self.response_time_sum_ms += duration_ms
        if path is not None:
            self.window.record(path, status_code, duration_ms)

    def observe_inference(self, duration_ms: float, tokens: int, ok: bool) -> None:
        with self._lock:
            self.inference_total += 1
            if ok:
                self.inference_success += 1
            else:
                self.inference_failed += 1
            self.inference_time_sum_ms += duration_ms
            self.tokens_total += tokens
            for i, bound in enumerate(INFERENCE_BUCKETS_MS):
                if duration_ms <= bound:
                    self.inference_buckets[i] += 1

    def snapshot(self) -> dict:
        """The spec's JSON metrics."""
        with self._lock:
            total = self.requests_total
            return {
                "uptime_seconds": int(self.uptime_seconds),
                "http": {
                    "requests_total": total,
                    "requests_success": self.requests["success"],
                    "requests_client_error": self.requests["client_error"],
                    "requests_server_error": self.requests["server_error"],
                    "active_requests": self.active_requests,
                    "response_time_avg_ms": round(self.response_time_sum_ms / total, 3) if total else 0.0,
                },
                "inference": {
                    "requests_total": self.inference_total,
                    "requests_success": self.inference_success,
                    "requests_failed": self.inference_failed,
                    "time_avg_ms": round(self.inference_time_sum_ms / self.inference_total, 3)
                    if self.inference_total
                    else 0.0,
                    "tokens_total": self.tokens_total,
                    "healthy": self.inference_healthy,
                },
            }

    def prometheus(self) -> bytes:
        # prometheus-client names a counter's TYPE line "<name>_total"; the spec's uptime counter
        # has no suffix, so its three lines are written here and the rest by the library.
        uptime = (
            "# HELP app_uptime_seconds Seconds since the service started.\n"
            "# TYPE app_uptime_seconds counter\n"
            f"app_uptime_seconds {self.uptime_seconds:.3f}\n"
        )
        return uptime.encode() + generate_latest(self.registry)


class _Collector:
    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        with m._lock:
            requests = dict(m.requests)
            buckets = list(m.inference_buckets)
            count = m.inference_total
            time_sum = m.inference_time_sum_ms
        http = Metric("http_requests", "HTTP requests by status class.", "counter")
        for status in STATUS_CLASSES:
            http.add_sample("http_requests_total", {"status": status}, requests[status])
        yield http
        hist = HistogramMetricFamily("inference_time_ms", "Inference duration in milliseconds.")
        hist.add_metric(
            [],
            [(str(b), float(c)) for b, c in zip(INFERENCE_BUCKETS_MS, buckets, strict=True)] + [("+Inf", float(count))],
            sum_value=time_sum,
        )
        yield hist
        if m.circuits is not None:
            gauge = Metric("circuit_breaker_state", "Circuit breaker per backend: 0 closed, 1 half-open, 2 open.",
                           "gauge")
            for backend, state in sorted(m.circuits().items()):
                gauge.add_sample("circuit_breaker_state", {"backend": backend}, CIRCUIT_VALUES.get(str(state), 0))
            yield gauge
        if m.voice_dropped is not None:
            dropped = Metric("voice_dropped_messages", "Voice bus messages dropped, by topic kind and reason.",
                             "counter")
            for (kind, reason), n in sorted(m.voice_dropped().items()):
                dropped.add_sample("voice_dropped_messages_total", {"kind": kind, "reason": reason}, n)
            yield dropped
        if m.voice_speaker_unavailable is not None:
            unavailable = Metric("voice_speaker_unavailable",
                                 "Voice exchanges answered as an unknown speaker because speaker identification "
                                 "failed or timed out.", "counter")
            unavailable.add_sample("voice_speaker_unavailable_total", {}, m.voice_speaker_unavailable())
            yield unavailable
        if m.knowledge_graph is not None:
            yield from _graph_metrics(m.knowledge_graph())
        if m.dream is not None:
            yield from dream_metrics(m.dream())
        if m.tool_calls is not None:
            calls = Metric("assistant_tool_call_problems",
                           "Tool calls the loop did not run as the model wrote them, by reason: unknown_tool, "
                           "malformed, prerequisite (another tool must run first), repair (invalid arguments, "
                           "the model asked again), invalid_arguments (still invalid after the repair round), "
                           "arguments_changed (dates resolved, the user's words kept).", "counter")
            for reason, n in sorted(m.tool_calls().items()):
                calls.add_sample("assistant_tool_call_problems_total", {"reason": reason}, n)
            yield calls


def dream_metrics(snapshot: dict[str, Any]) -> Iterator[Metric]:
    """The spec's dream counters from a :meth:`DreamCounters.snapshot` (all present, 0 before any dream)."""
    for key, text in DREAM_COUNTERS:
        name = f"{DREAM_PREFIX}{key}"
        metric = Metric(name, text, "counter")
        value = snapshot.get(key, 0)
        if key in DREAM_LABELS:
            label, fixed = DREAM_LABELS[key]
            counts = dict(value or {})
            for item in (*fixed, *sorted(set(counts) - set(fixed))):
                metric.add_sample(f"{name}_total", {label: item}, float(counts.get(item, 0)))
        else:
            metric.add_sample(f"{name}_total", {}, float(value or 0))
        yield metric


def _graph_metrics(figures: GraphFigures) -> Iterator[Metric]:
    for name, value, text in (("nodes", figures.nodes, "Knowledge-graph nodes (all users)."),
                              ("edges", figures.edges, "Knowledge-graph edges valid now (all users).")):
        gauge = Metric(f"knowledge_graph_{name}", text, "gauge")
        gauge.add_sample(f"knowledge_graph_{name}", {}, value)
        yield gauge
    for counter, text in (("calls", "Extraction calls (one per batch of memories), per extractor."),
                          ("failures", "Extraction outputs skipped (invalid JSON after a retry, unknown entities)."),
                          ("fallbacks", "Passages handed to the fallback extractor."),
                          ("seconds", "Seconds spent extracting, per extractor.")):
        name = "knowledge_graph_extraction_seconds" if counter == "seconds" else \
            f"knowledge_graph_extraction_{counter}"
        metric = Metric(name, text, "counter")
        for extractor, counts in sorted(figures.extractors.items()):
            metric.add_sample(f"{name}_total", {"extractor": extractor}, counts[counter])
        yield metric
    events = Metric("knowledge_graph_events", "Knowledge-graph events published, by type.", "counter")
    for kind, n in sorted(figures.events.items()):
        events.add_sample("knowledge_graph_events_total", {"type": kind}, n)
    yield events


# --- sanitation (its own block: the spec's exact names) --------------------------------------------------

SANITATION_PREFIX = "assistant_sanitation_"  # the spec's "<svc>_sanitation_" with <svc> = assistant
SANITATION_SERIES = (  # snapshot key (SanitationCounters), type, help text
    ("memories_quarantined", "counter", "Memories quarantined by sanitation (stale, poisoned, contradicted)."),
    ("contradictions_resolved", "counter", "Contradictions resolved (the losing memory quarantined)."),
    ("graph_orphans", "counter", "Knowledge-graph integrity issues fixed (orphan nodes, dangling and unsourced "
                                 "edges)."),
    ("defense_patterns_added", "counter", "Dynamic defence patterns added by defence evolution."),
    ("anomalies_detected", "counter", "Anomalies detected (latency spikes, error-rate surges)."),
    ("rollbacks", "counter", "Sanitation runs rolled back after a critical failure."),
    ("defense_score_x100", "gauge", "The latest defence score: the share of attacks blocked (detector or new patterns), 0..100."),
    ("quality_score_x100", "gauge", "The latest quality score (0..1), times 100."),
)


def sanitation_exposition(snapshot: dict[str, Any]) -> bytes:
    """The spec's sanitation series in the Prometheus text format, from a
    :meth:`~assistant.sanitation.service.SanitationCounters.snapshot` (each present, 0 before any run).

    Written here rather than by prometheus-client, as ``app_uptime_seconds`` is: the library names a
    counter ``<name>_total``, and the spec's sanitation counters have no suffix
    (``assistant_sanitation_memories_quarantined``)."""
    lines: list[str] = []
    for key, kind, text in SANITATION_SERIES:
        name = f"{SANITATION_PREFIX}{key}"
        lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}", f"{name} {float(snapshot.get(key) or 0)}"]
    return ("\n".join(lines) + "\n").encode()
