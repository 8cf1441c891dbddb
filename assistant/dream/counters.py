"""The dream metrics of the spec (prefix ``<svc>_dream_``), counted from a run's events.

``sessions_total{status}`` counts sessions entering each status (running, paused, completed, failed);
``cycles_total{phase}`` phases finished; ``memories_consolidated_total`` merged memories written;
``memories_archived_total`` memories archived by any operation (consolidated originals, duplicates,
memories at their floor); ``insights_total{type}`` insights created; ``graph_edges_modified_total{operation}``
(pruned, reweighted, created); ``graph_nodes_merged_total``; ``llm_calls_total`` (REM's engine calls);
``duration_seconds_total`` (wall time of finished sessions, pauses included).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from assistant.dream.types import DreamEvent, Operation

EDGE_OPERATIONS = {Operation.EDGE_PRUNED: "pruned", Operation.EDGE_WEIGHT_UPDATED: "reweighted",
                   Operation.EDGE_CREATED: "created"}
INSIGHT_OPERATIONS = (Operation.PATTERN_DETECTED, Operation.HYPOTHESIS_GENERATED, Operation.SUGGESTION_CREATED)


@dataclass
class DreamCounters:
    sessions: Counter = field(default_factory=Counter)
    cycles: Counter = field(default_factory=Counter)
    memories_consolidated: int = 0
    memories_archived: int = 0
    insights: Counter = field(default_factory=Counter)
    graph_edges_modified: Counter = field(default_factory=Counter)
    graph_nodes_merged: int = 0
    llm_calls: int = 0
    duration_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, event: DreamEvent) -> None:
        with self._lock:
            self._count(event)

    def _count(self, event: DreamEvent) -> None:
        kind, data = event.kind, event.data
        if kind == "session_started":
            self.sessions["running"] += 1
        elif kind == "session_paused":
            self.sessions["paused"] += 1
        elif kind == "session_finished":
            self.sessions[data.get("status", "failed")] += 1
            self.duration_seconds += float(data.get("seconds", 0.0))
        elif kind == "phase_finished" and event.phase is not None:
            self.cycles[event.phase.value] += 1
        elif kind == "llm_call":
            self.llm_calls += int(data.get("calls", 1))
        elif kind == "operation" and data.get("status") == "applied":
            op, n = event.operation, int(data.get("count", 1))
            self.memories_archived += int(data.get("archived", 0))
            if op is Operation.MEMORY_CONSOLIDATED:
                self.memories_consolidated += n
            elif op is Operation.MEMORY_ARCHIVED:
                self.memories_archived += n
            elif op in EDGE_OPERATIONS:
                self.graph_edges_modified[EDGE_OPERATIONS[op]] += n
            elif op is Operation.NODE_MERGED:
                self.graph_nodes_merged += n
            elif op in INSIGHT_OPERATIONS:
                self.insights[str(data.get("insight_type", op.value))] += n

    def snapshot(self) -> dict:
        with self._lock:
            return {
                "sessions": dict(self.sessions), "cycles": dict(self.cycles),
                "memories_consolidated": self.memories_consolidated, "memories_archived": self.memories_archived,
                "insights": dict(self.insights), "graph_edges_modified": dict(self.graph_edges_modified),
                "graph_nodes_merged": self.graph_nodes_merged, "llm_calls": self.llm_calls,
                "duration_seconds": self.duration_seconds,
            }
