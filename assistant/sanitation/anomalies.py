"""Anomaly detection from the service's own request metrics, and restarts of the component at fault.

The source is :class:`assistant.observability.metrics.RequestWindow` (``Metrics.window``: every
request the middleware finished, with its route, latency and status, bounded by count and age).
Each route belongs to a component (:func:`component_of`): ``engine`` (chat, agentic tasks),
``embedder`` (memories), ``bus`` (voice), ``http`` otherwise; the probes and metrics routes are
left out (a 503 from ``/ready`` is the engine's health, not a failed request).

Per component, with W = ``anomaly_window_secs``:

- **latency spike**: p95 of the last W seconds > ``latency_spike_multiplier`` x the baseline p95,
  the baseline being the :data:`BASELINE_WINDOWS` windows before it (15 min with the defaults).
  Both need :data:`MIN_SAMPLES` requests (below that a p95 is one or two requests: noise); the
  baseline p95 is floored at :data:`BASELINE_FLOOR_MS` so jitter on a 3 ms route is never a spike.
- **error-rate surge**: the share of 5xx in the last W seconds > ``error_rate_threshold``, with at
  least :data:`MIN_SAMPLES` requests.

An anomaly is **severe** when its value is at least :data:`SEVERE_FACTOR` x its threshold, or (error
rate) when the window before also surged: a sustained surge. A severe anomaly asks the supervisor
(:mod:`assistant.sanitation.supervisor`) to restart the component (backoff, then degraded); the
answer is the anomaly's ``action``. A component whose window is clean again (enough samples, no
anomaly) has its restart record reset, which also lifts ``degraded``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from assistant.config import SanitationSettings
from assistant.sanitation.types import Anomaly

BASELINE_WINDOWS = 3  # the baseline: this many windows before the current one
MIN_SAMPLES = 20  # requests a window needs before its p95 or error share means anything
BASELINE_FLOOR_MS = 50.0  # the baseline p95 never counts as less than this
SEVERE_FACTOR = 2.0  # value >= this x threshold: severe
IGNORED_PATHS = ("/health", "/ready", "/metrics", "/docs", "/redoc", "/openapi", "/swagger-ui")
COMPONENT_PREFIXES: tuple[tuple[str, str], ...] = (
    ("/v1/chat", "engine"),
    ("/v1/agentic", "engine"),
    ("/v1/memories", "embedder"),
    ("/v1/voice", "bus"),
)


def component_of(path: str) -> str | None:
    """The component a request's route exercises (None: not a request to judge)."""
    if path.startswith(IGNORED_PATHS):
        return None
    for prefix, component in COMPONENT_PREFIXES:
        if path == prefix or path.startswith(prefix + "/"):
            return component
    return "http"


def p95(latencies: Sequence[float]) -> float:
    return float(np.percentile(np.asarray(latencies, dtype=float), 95))


def error_share(statuses: Sequence[int]) -> float:
    return sum(1 for s in statuses if s >= 500) / len(statuses) if statuses else 0.0


class AnomalyMonitor:
    def __init__(self, metrics_window: Any, settings: SanitationSettings | None = None, supervisor: Any = None,
                 clock: Callable[[], float] | None = None):
        self.window = metrics_window
        self.settings = settings or SanitationSettings()
        self.supervisor = supervisor
        self._clock = clock or metrics_window.now
        span = self.settings.anomaly_window_secs * (BASELINE_WINDOWS + 1)
        if getattr(metrics_window, "horizon_secs", span) < span:  # keep what the baseline needs
            metrics_window.horizon_secs = float(span)

    def check(self) -> list[Anomaly]:
        """The anomalies of the current window, each with what the supervisor did about it."""
        now = self._clock()
        width = float(self.settings.anomaly_window_secs)
        start = now - width * (BASELINE_WINDOWS + 1)
        by_component: dict[str, list] = {}
        for sample in self.window.since(start):
            component = component_of(sample.path)
            if component is not None and sample.ts <= now:
                by_component.setdefault(component, []).append(sample)
        found: list[Anomaly] = []
        for component, samples in sorted(by_component.items()):
            current = [s for s in samples if s.ts > now - width]
            baseline = [s for s in samples if s.ts <= now - width]
            previous = [s for s in baseline if s.ts > now - 2 * width]
            anomalies = [a for a in (self._latency(component, current, baseline),
                                     self._errors(component, current, previous)) if a is not None]
            if anomalies:
                found.extend(self._act(component, anomalies))
            elif len(current) >= MIN_SAMPLES and self.supervisor is not None:
                self.supervisor.reset(component)  # healthy again: a later failure starts a fresh backoff
        return found

    def _latency(self, component: str, current: list, baseline: list) -> Anomaly | None:
        if len(current) < MIN_SAMPLES or len(baseline) < MIN_SAMPLES:
            return None
        now_p95 = p95([s.latency_ms for s in current])
        base_p95 = p95([s.latency_ms for s in baseline])
        threshold = self.settings.latency_spike_multiplier * max(base_p95, BASELINE_FLOOR_MS)
        if now_p95 <= threshold:
            return None
        severe = now_p95 >= SEVERE_FACTOR * threshold
        return Anomaly("latency_spike", component, "severe" if severe else "warning", round(now_p95, 1),
                       round(threshold, 1),
                       f"p95 {now_p95:.0f} ms over the last {self.settings.anomaly_window_secs} s "
                       f"({len(current)} requests) against a baseline p95 of {base_p95:.0f} ms "
                       f"({len(baseline)} requests)")

    def _errors(self, component: str, current: list, previous: list) -> Anomaly | None:
        if len(current) < MIN_SAMPLES:
            return None
        threshold = self.settings.error_rate_threshold
        share = error_share([s.status for s in current])
        if share <= threshold:
            return None
        sustained = len(previous) >= MIN_SAMPLES and error_share([s.status for s in previous]) > threshold
        severe = sustained or share >= min(1.0, SEVERE_FACTOR * threshold)
        return Anomaly("error_rate_surge", component, "severe" if severe else "warning", round(share, 4),
                       threshold,
                       f"{share:.0%} of {len(current)} requests answered 5xx over the last "
                       f"{self.settings.anomaly_window_secs} s" + (" (and in the window before)" if sustained else ""))

    def _act(self, component: str, anomalies: list[Anomaly]) -> list[Anomaly]:
        """One restart request per component and check, however many of its anomalies are severe."""
        if self.supervisor is None or not any(a.severity == "severe" for a in anomalies):
            return anomalies
        action = self.supervisor.restart(component)
        return [Anomaly(**{**a.as_dict(), "action": action}) if a.severity == "severe" else a for a in anomalies]
