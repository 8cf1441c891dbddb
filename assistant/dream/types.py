"""Dream sessions, journal entries and insights: their states, operations and values.

The session machine (spec "Dream session", with what it leaves open decided here)::

    Pending --start (idle gate passed, or trigger)--> Running
    Running --pause (user returned, or POST pause)--> Paused
    Paused  --resume (re_idle_secs of new idleness, or POST resume)--> Running
    Running --all cycles finished--> Completed
    Running --failure, cancel, or max_duration_hours--> Failed
    Paused  --cancel, or max_duration_hours--> Failed          (not shown by the spec: allowed here)
    Pending --never idle within max_duration_hours, or cancel--> Failed

Insights (spec "Hypothesis insight"): ``active`` -> ``confirmed`` (user confirms; a hypothesis needs
confidence past the confirmation threshold) | ``dismissed`` (user) | ``expired`` (a hypothesis without
evidence for ``hypothesis_ttl_days``). Confirmed and dismissed are final; merging a confirmed insight
into memory records the memory's id.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class SessionStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def active(self) -> bool:
        return self in (SessionStatus.PENDING, SessionStatus.RUNNING, SessionStatus.PAUSED)


ACTIVE_STATUSES = tuple(s for s in SessionStatus if s.active)


class Phase(StrEnum):
    NREM = "nrem"
    REM = "rem"


class Operation(StrEnum):
    """The 12 journal operations (spec "Dream journal entry")."""

    MEMORY_CONSOLIDATED = "MemoryConsolidated"
    MEMORY_ARCHIVED = "MemoryArchived"
    MEMORY_DEDUPLICATED = "MemoryDeduplicated"
    EDGE_PRUNED = "EdgePruned"
    EDGE_CREATED = "EdgeCreated"
    EDGE_WEIGHT_UPDATED = "EdgeWeightUpdated"
    NODE_MERGED = "NodeMerged"
    DECAY_APPLIED = "DecayApplied"
    PATTERN_DETECTED = "PatternDetected"
    HYPOTHESIS_GENERATED = "HypothesisGenerated"
    SUGGESTION_CREATED = "SuggestionCreated"
    INSIGHT_CONFIRMED = "InsightConfirmed"


class EntryStatus(StrEnum):
    """Where a journal entry is: written before the change (``pending``), then ``applied``, or
    ``failed`` (the change raised; nothing of it stays), or ``skipped`` (already done: a replay)."""

    PENDING = "pending"
    APPLIED = "applied"
    FAILED = "failed"
    SKIPPED = "skipped"


class InsightType(StrEnum):
    PATTERN = "pattern"
    CONNECTION = "connection"
    SUGGESTION = "suggestion"
    HYPOTHESIS = "hypothesis"


class InsightStatus(StrEnum):
    ACTIVE = "active"
    CONFIRMED = "confirmed"
    DISMISSED = "dismissed"
    EXPIRED = "expired"


# Status changes a user may make (PUT status, confirm, dismiss); expiry is the service's.
USER_TRANSITIONS: dict[InsightStatus, tuple[InsightStatus, ...]] = {
    InsightStatus.ACTIVE: (InsightStatus.CONFIRMED, InsightStatus.DISMISSED),
    InsightStatus.CONFIRMED: (),
    InsightStatus.DISMISSED: (),
    InsightStatus.EXPIRED: (InsightStatus.DISMISSED,),
}


@dataclass
class DreamSession:
    id: str
    user_id: str
    status: SessionStatus
    current_cycle: int
    total_cycles: int
    phase: Phase
    created_at: str
    started_at: str | None = None
    completed_at: str | None = None
    trigger: str = "schedule"  # "schedule" (cron + idle gate) or "manual" (POST trigger)
    paused_reason: str | None = None  # "user_returned" (resumes by itself) or "requested"
    reason: str | None = None  # why it failed (or what stopped it early)
    counts: dict[str, int] = field(default_factory=dict)  # operations applied, by journal operation
    updated_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "user_id": self.user_id, "status": self.status.value,
            "current_cycle": self.current_cycle, "total_cycles": self.total_cycles, "phase": self.phase.value,
            "created_at": self.created_at, "started_at": self.started_at, "completed_at": self.completed_at,
            "trigger": self.trigger, "paused_reason": self.paused_reason, "reason": self.reason,
            "counts": dict(self.counts), "updated_at": self.updated_at,
        }


@dataclass
class JournalEntry:
    id: str
    session_id: str
    user_id: str
    seq: int
    cycle_number: int
    phase: Phase
    operation: Operation
    status: EntryStatus
    details: dict[str, Any]
    affected_memory_ids: list[str] = field(default_factory=list)
    affected_node_ids: list[str] = field(default_factory=list)
    affected_edge_ids: list[str] = field(default_factory=list)
    before_snapshot: dict[str, Any] | None = None
    after_snapshot: dict[str, Any] | None = None
    error: str | None = None
    created_at: str = ""
    key: str = ""  # idempotency key: the same planned change is applied once per user

    def to_json(self, *, snapshots: bool = True) -> dict[str, Any]:
        out = {
            "id": self.id, "session_id": self.session_id, "seq": self.seq, "cycle_number": self.cycle_number,
            "phase": self.phase.value.upper(), "operation": self.operation.value, "status": self.status.value,
            "details": self.details, "affected_memory_ids": self.affected_memory_ids,
            "affected_node_ids": self.affected_node_ids, "affected_edge_ids": self.affected_edge_ids,
            "error": self.error, "created_at": self.created_at,
        }
        if snapshots:
            out["before_snapshot"] = self.before_snapshot
            out["after_snapshot"] = self.after_snapshot
        return out


@dataclass
class Insight:
    id: str
    user_id: str
    insight_type: InsightType
    title: str
    content: str
    confidence: float
    status: InsightStatus
    evidence_count: int
    source_memory_ids: list[str]
    created_at: str
    session_id: str | None = None
    updated_at: str | None = None
    last_evidence_at: str | None = None
    memory_id: str | None = None  # the DreamInsight memory it was merged into
    key: str = ""  # what makes two insights the same (type + sources), so a replay adds none

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "insight_type": self.insight_type.value, "title": self.title, "content": self.content,
            "confidence": round(self.confidence, 6), "status": self.status.value,
            "evidence_count": self.evidence_count, "source_memory_ids": self.source_memory_ids,
            "created_at": self.created_at, "session_id": self.session_id, "updated_at": self.updated_at,
            "last_evidence_at": self.last_evidence_at, "memory_id": self.memory_id,
        }


@dataclass(frozen=True)
class DreamEvent:
    """What a running session reports (notebooks show a progress bar per cycle, the metrics count)."""

    kind: str  # session_started | phase_started | operation | phase_finished | session_paused | session_resumed
    #            | session_finished | step_failed
    session_id: str
    user_id: str
    cycle: int = 0
    phase: Phase | None = None
    operation: Operation | None = None
    data: dict[str, Any] = field(default_factory=dict)
