"""The signal bus: typed signals every extended feature publishes, bounded in memory, kept in DuckDB.

A :class:`Signal` is one observation (``kind``, UTC time, the user it concerns or None for the
server, an optional numeric ``value`` to plot, and a JSON-able ``data`` dict). :class:`SignalBus`
keeps the latest ``sovereign_intelligence.signal_bus_capacity`` (1024) in a ring buffer for live
views and subscribers, and appends every signal to the ``signals`` table of the analytics DuckDB
file (a time series: ``ts``, ``kind``, ``user_id``, ``value``, ``data`` JSON), from which rows older
than ``signal_retention_days`` (90) are deleted at start and then once a day, on the next publish.

The ten kinds (:class:`SignalKind`) are the spec's two named ones, ``ThermalUpdate`` and
``CognitiveLoadEstimate``, and one per feature that reports something over time: privacy budget
spend, red-team results, quality scores, anomalies, precache hits, dream phases, training progress
and sovereignty scores. Publishing never raises into the caller: a failed DuckDB write is logged
and the signal stays in memory.

DuckDB (already the analytics store, see :mod:`assistant.storage.analytics`) was chosen for the
time series because notebooks read it straight into pandas and it aggregates by time bucket in SQL.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

log = logging.getLogger("assistant.signals")

PRUNE_EVERY = timedelta(days=1)
MAX_QUERY = 10_000


class SignalKind(StrEnum):
    THERMAL_UPDATE = "ThermalUpdate"  # a CPU temperature reading (precache pauses above its threshold)
    COGNITIVE_LOAD_ESTIMATE = "CognitiveLoadEstimate"  # a user's estimated load and the answer format chosen
    PRIVACY_SPEND = "PrivacySpend"  # an aggregate query charged to the privacy budget (or refused)
    RED_TEAM_RESULT = "RedTeamResult"  # a red-team run: defence score, per family
    QUALITY_SCORE = "QualityScore"  # sanitation's quality assessment
    ANOMALY = "Anomaly"  # a latency spike or error-rate surge
    PRECACHE_HIT = "PrecacheHit"  # a predicted query answered from the precache (or a miss)
    DREAM_PHASE = "DreamPhase"  # a dream session entering a phase
    TRAINING_PROGRESS = "TrainingProgress"  # adapter training, optimisation or distillation progress
    SOVEREIGNTY_SCORE = "SovereigntyScore"  # the sovereignty score and its four dimensions


@dataclass(frozen=True)
class Signal:
    kind: SignalKind
    ts: datetime
    user_id: str | None = None
    value: float | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "ts": self.ts.isoformat(), "user_id": self.user_id, "value": self.value,
                "data": self.data}


Listener = Callable[[Signal], None]


class SignalBus:
    """Publish typed signals; read them back by kind, time and user. ``analytics`` is the
    :class:`~assistant.storage.analytics.Analytics` whose DuckDB file keeps the time series (None:
    memory only, for unit tests and quick notebooks)."""

    def __init__(self, analytics: Any = None, capacity: int = 1024, retention_days: int = 90,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)):
        self.capacity = capacity
        self.retention_days = retention_days
        self.clock = clock
        self._ring: deque[Signal] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._analytics = analytics
        self._pruned_at: datetime | None = None
        self.published = 0
        self.dropped_writes = 0
        if analytics is not None:
            analytics.execute(
                "CREATE TABLE IF NOT EXISTS signals (ts TIMESTAMPTZ NOT NULL, kind VARCHAR NOT NULL, "
                "user_id VARCHAR, value DOUBLE, data JSON)"
            )
            self.prune()

    def publish(self, kind: SignalKind | str, data: dict[str, Any] | None = None, *, user_id: str | None = None,
                value: float | None = None) -> Signal:
        signal = Signal(SignalKind(kind), self.clock(), None if user_id is None else str(user_id),
                        None if value is None else float(value), dict(data or {}))
        with self._lock:
            self._ring.append(signal)
            self.published += 1
            listeners = list(self._listeners)
        if self._analytics is not None:
            try:
                self._analytics.execute("INSERT INTO signals VALUES (?, ?, ?, ?, ?)",
                                        [signal.ts, signal.kind.value, signal.user_id, signal.value,
                                         json.dumps(signal.data, default=str)])
                if self._pruned_at is None or signal.ts - self._pruned_at >= PRUNE_EVERY:
                    self.prune()
            except Exception as exc:  # the signal stays in memory; the feature that published it goes on
                self.dropped_writes += 1
                log.warning("signal %s not persisted: %s", signal.kind.value, exc)
        for listener in listeners:
            try:
                listener(signal)
            except Exception:
                log.exception("a signal listener failed")
        return signal

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def prune(self) -> int:
        """Delete persisted signals older than the retention; returns how many."""
        if self._analytics is None:
            return 0
        now = self.clock()
        cutoff = now - timedelta(days=self.retention_days)
        removed = self._analytics.execute("DELETE FROM signals WHERE ts < ? RETURNING 1", [cutoff])
        self._pruned_at = now
        return len(removed)

    def recent(self, kind: SignalKind | str | None = None, *, user_id: str | None = None) -> list[Signal]:
        """The in-memory signals (at most ``capacity``), oldest first."""
        with self._lock:
            found = list(self._ring)
        return [s for s in found if (kind is None or s.kind == SignalKind(kind))
                and (user_id is None or s.user_id == str(user_id))]

    def query(self, kind: SignalKind | str | None = None, *, since: datetime | None = None,
              user_id: str | None = None, include_server: bool = True, limit: int = 1000) -> list[Signal]:
        """Signals of ``kind`` since ``since``, newest last: the caller's (``user_id``) and, with
        ``include_server``, the server-wide ones (no user). From DuckDB when it is there (the whole
        retention), else from memory."""
        limit = max(1, min(int(limit), MAX_QUERY))
        if self._analytics is None:
            found = [s for s in self.recent(kind) if since is None or s.ts >= since]
            found = [s for s in found if user_id is None or s.user_id == str(user_id)
                     or (include_server and s.user_id is None)]
            return found[-limit:]
        sql = "SELECT ts, kind, user_id, value, data FROM signals WHERE true"
        params: list[Any] = []
        if kind is not None:
            sql += " AND kind = ?"
            params.append(SignalKind(kind).value)
        if since is not None:
            sql += " AND ts >= ?"
            params.append(since)
        if user_id is not None:
            sql += " AND (user_id = ?" + (" OR user_id IS NULL)" if include_server else ")")
            params.append(str(user_id))
        sql += " ORDER BY ts DESC, rowid DESC LIMIT ?"
        params.append(limit)
        rows = self._analytics.execute(sql, params)
        return [Signal(SignalKind(k), ts if ts.tzinfo else ts.replace(tzinfo=UTC), u, v,
                       json.loads(d) if d else {}) for ts, k, u, v, d in reversed(rows)]

    def frame(self, kind: SignalKind | str | None = None, *, since: datetime | None = None,
              user_id: str | None = None):
        """The signals as a pandas DataFrame (``ts``, ``kind``, ``user_id``, ``value``, ``data``) for notebooks."""
        import pandas as pd

        rows = [s.as_dict() for s in self.query(kind, since=since, user_id=user_id, limit=MAX_QUERY)]
        frame = pd.DataFrame(rows, columns=["kind", "ts", "user_id", "value", "data"])
        frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
        return frame

    def __iter__(self) -> Iterator[Signal]:
        return iter(self.recent())
