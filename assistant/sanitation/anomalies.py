"""Anomaly detection and component restarts (placeholder of the core commit: the quality helper writes it).

Contract: ``AnomalyMonitor.check() -> list[Anomaly]`` looks at the service's own request metrics over
``anomaly_window_secs``, acts on severe anomalies (restart with backoff, then degraded) and returns
what it found and did."""

from __future__ import annotations

from assistant.sanitation.types import Anomaly


class AnomalyMonitor:
    def check(self) -> list[Anomaly]:
        return []
