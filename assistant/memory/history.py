"""A memory's life as a time-ordered list of events, and where its decay is heading (the memory explorer).

What is recorded is read; nothing is guessed:

- **created**: ``created_at``, with the type it was stored as (``original_memory_type`` once it was
  archived or quarantined) and its importance when that is still the stored one (never decayed, never
  merged: the store keeps no earlier importance);
- **merged**: ``updated_at`` later than ``created_at``: its text was merged (learning merges a
  near-identical message into it, :meth:`MemoryStore.learn`; dream consolidation writes a merged memory);
- **dream** operations: every dream journal entry that names it among its affected memories
  (:meth:`DreamStore.memory_journal`): consolidated, deduplicated, archived, decayed..., with the
  entry's details and before/after snapshots (``kind`` ``merged`` for consolidation and deduplication,
  ``archived``, ``decayed``, else ``dream``);
- **archived**: ``archived_at`` (by a dream session, or by the decay clean-up when no session is named),
  unless a journal entry of that session already says so;
- **decayed**: the last decay run that reached it (the store keeps the last one, ``decay_ts``) with its
  importance now; **low**: since when it has been at or below ``memory.min_importance`` (the clean-up clock);
- **quarantined** (with the reason, sealed at rest and opened for its owner) and **restored** (``memory_restores``);
- **accessed**: the last time it reached a prompt, and how many times in all (only the last access is kept).

:class:`DecayOutlook` is the decay formula (:mod:`assistant.memory.decay`) applied to the memory as it is
now: its type's modifier and floor, stability, effective rate, reinforcement, the freshness term of
relevance, and the importance day by day if the daily job runs and nothing touches it (a Context memory
at 0.5 never used: 0.475 after a day, 0.102 on day 31, its floor 0.10 on day 32, archived on day 62).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from assistant.clock import epoch_of, iso_at
from assistant.memory import decay as D
from assistant.memory.scoring import freshness
from assistant.memory.store import MemoryStore
from assistant.memory.types import Memory, MemoryType

PROJECTION_DAYS = 90
MERGES = {"MemoryConsolidated": "merged", "MemoryDeduplicated": "merged", "MemoryArchived": "archived",
          "DecayApplied": "decayed"}
ORDER = ("created", "merged", "dream", "decayed", "low", "archived", "quarantined", "restored", "accessed")


@dataclass(frozen=True)
class HistoryEvent:
    at: str  # ISO 8601 UTC
    kind: str  # one of ORDER
    title: str
    importance: float | None = None  # the importance the event left, when known
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DecayOutlook:
    decay_type: str  # whose parameters apply (an Archived memory's original type)
    importance: float
    floor: float
    modifier: float
    access_count: int
    stability: float  # 1 + ln(1 + access_count)
    effective_rate: float  # per day: base_decay_rate x modifier / stability
    reinforcement: float  # min(access_count x 0.005, 0.08), added each run
    hours_since_access: float
    freshness: float  # e^(-0.01 x hours since last access): relevance's freshness term
    last_decay_at: str | None
    low_since: str | None  # at or below memory.min_importance since (the clean-up clock)
    archive_in_days: int | None  # days of daily runs until the clean-up archives it, left alone (None: never)
    projection: list[dict[str, float]]  # [{"day", "importance"}], day 0 = now


@dataclass(frozen=True)
class MemoryHistory:
    memory: Memory
    events: list[HistoryEvent]
    decay: DecayOutlook | None  # None for types that do not decay (Hypothesis, Quarantined)

    def as_dict(self) -> dict[str, Any]:
        return {"events": [asdict(e) for e in self.events], "decay": None if self.decay is None else asdict(self.decay)}


def outlook(row: dict, memory: Memory, *, decay_factor: float, min_importance: float, cleanup_after_days: float,
            now: float, low: float | None = None, days: int = PROJECTION_DAYS) -> DecayOutlook | None:
    """The decay formula applied to the memory's stored scores (``row``: a ``memory_rows`` row; ``low``:
    its ``low_since``, epoch seconds)."""
    try:
        kind = MemoryType(row["decay_type"])
    except ValueError:
        return None
    if kind in D.NOT_DECAYED or kind not in D.DECAY_PARAMS or memory.memory_type == MemoryType.QUARANTINED:
        return None
    params, count, importance = D.DECAY_PARAMS[kind], int(row["access_count"]), float(row["importance"])
    base = D.base_rate_from_factor(decay_factor)
    hours = max(now - float(row["accessed_ts"]), 0.0) / 3600.0
    curve = D.curve(kind, count, days, base_decay_rate=base, importance=importance)
    archive_in = None
    if memory.memory_type != MemoryType.ARCHIVED:
        archive_in = D.days_until_cleanup(kind, importance, base_decay_rate=base, min_importance=min_importance,
                                          after_days=cleanup_after_days, access_count=count)
    return DecayOutlook(
        decay_type=kind.value, importance=importance, floor=params.floor, modifier=params.modifier, access_count=count,
        stability=float(D.stability(count)), effective_rate=float(D.effective_rate(base, params.modifier, count)),
        reinforcement=float(D.reinforcement(count)), hours_since_access=round(hours, 3),
        freshness=round(float(freshness(hours)), 6), last_decay_at=memory.decayed_at,
        low_since=iso_at(low) if low is not None and math.isfinite(low) else None, archive_in_days=archive_in,
        projection=[{"day": float(d), "importance": round(float(v), 6)} for d, v in enumerate(curve)])


def _journal_events(entries: Sequence[Any], memory_id: str) -> list[HistoryEvent]:
    out = []
    for e in entries:
        operation = getattr(e.operation, "value", e.operation)
        kind = MERGES.get(operation, "dream")
        title = f"dream {operation} ({getattr(e.phase, 'value', e.phase).upper()}, cycle {e.cycle_number}): " \
                f"{getattr(e.status, 'value', e.status)}"
        out.append(HistoryEvent(e.created_at, kind, title, details={
            "operation": operation, "session_id": e.session_id, "entry_id": e.id, "status": getattr(e.status, "value",
                                                                                                      e.status),
            "affected_memory_ids": list(e.affected_memory_ids), "details": e.details,
            "before_snapshot": e.before_snapshot, "after_snapshot": e.after_snapshot, "error": e.error}))
    return out


def memory_history(store: MemoryStore, user_id: str, memory_id: str, *,
                   journal: Callable[[str, str], Sequence[Any]] | None = None, now: float | None = None,
                   days: int = PROJECTION_DAYS) -> MemoryHistory:
    """The history of the user's memory (NotFoundError for another user's, or an unknown one);
    ``journal(user_id, memory_id)`` gives the dream journal entries naming it (None: dream mode off)."""
    user = str(user_id)
    row = store._row(user, memory_id)
    memory = store._memory(row)
    now = store.clock() if now is None else now
    created_ts = epoch_of(memory.created_at)
    merged = memory.updated_at and memory.updated_at != memory.created_at
    decayed = float(row["decay_ts"]) > created_ts + 0.002  # created_at is kept to the millisecond
    first_type = (memory.original_memory_type or memory.memory_type).value
    events = [HistoryEvent(memory.created_at, "created", f"created as {first_type}",
                           None if merged or decayed else memory.importance,
                           {"memory_type": first_type, "conversation_id": memory.conversation_id,
                            "importance_recorded": not (merged or decayed)})]
    if merged:
        events.append(HistoryEvent(memory.updated_at, "merged", "text merged (a near-identical message, or a "
                                   "dream consolidation)", details={"updated_at": memory.updated_at}))
    entries = list(journal(user, str(memory.id))) if journal is not None else []
    events += _journal_events(entries, memory.id)
    if decayed:
        events.append(HistoryEvent(memory.decayed_at or iso_at(row["decay_ts"]), "decayed",
                                   f"last decay run: importance {memory.importance:.3f}", memory.importance))
    low = store.db.scalar("SELECT low_since FROM memory_scores WHERE memory_rowid = ?", (row["rowid"],))
    if low is not None and math.isfinite(low):
        events.append(HistoryEvent(iso_at(low), "low", "at or below memory.min_importance from here (the clean-up "
                                   "clock)", details={"low_since": iso_at(low)}))
    if memory.archived_at:
        session = memory.archived_by_session
        told = any(e.session_id == session and MERGES.get(getattr(e.operation, "value", e.operation)) in
                   ("archived", "merged") for e in entries) if session else False
        if not told:
            by = f"dream session {session}" if session else "the decay clean-up"
            events.append(HistoryEvent(memory.archived_at, "archived", f"archived by {by}",
                                       details={"archived_by_session": session}))
    if memory.quarantined_at:
        events.append(HistoryEvent(memory.quarantined_at, "quarantined", "quarantined by sanitation",
                                   details={"reason": memory.quarantine_reason,
                                            "original_memory_type": first_type}))
    restored = store.db.one("SELECT restored_at FROM memory_restores WHERE memory_id = ? AND user_id = ?",
                            (memory.id, user))
    if restored is not None:
        events.append(HistoryEvent(restored["restored_at"], "restored", "restored from quarantine by its owner"))
    if memory.access_count > 0:
        events.append(HistoryEvent(memory.accessed_at, "accessed",
                                   f"last recalled into a prompt ({memory.access_count} time(s) in all)",
                                   details={"access_count": memory.access_count}))
    events.sort(key=lambda e: (epoch_of(e.at), ORDER.index(e.kind)))
    s = store.settings
    decay = outlook(row, memory, decay_factor=s.decay_factor, min_importance=s.min_importance,
                    cleanup_after_days=s.cleanup_after_days, now=now, low=low, days=days)
    return MemoryHistory(memory, events, decay)
