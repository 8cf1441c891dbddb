"""Dream rows in SQLite: sessions, journal entries, insights.

Journal details and snapshots, and insight titles and contents, are sealed with their table, column,
row and user as associated data (like memory text); everything a query filters on (states, types,
cycle, phase, ids, confidence) is plain. Ids of another user's rows are never returned: every read
takes the user.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any
from uuid import uuid4

import numpy as np

from assistant.clock import iso_at
from assistant.crypto import SealContext, Sealer
from assistant.dream.types import (
    ACTIVE_STATUSES,
    DreamSession,
    EntryStatus,
    Insight,
    InsightStatus,
    InsightType,
    JournalEntry,
    Operation,
    Phase,
    SessionStatus,
)
from assistant.errors import NotFoundError
from assistant.storage.db import Database

SECONDS_PER_DAY = 86_400.0


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso_at(ts)


class DreamStore:
    def __init__(self, db: Database, sealer: Sealer, clock: Callable[[], float] = time.time):
        self.db = db
        self.sealer = sealer
        self.clock = clock

    # --- sealing ----------------------------------------------------------------------------------

    def _seal(self, table: str, column: str, row_id: str, user_id: str, value: Any) -> bytes:
        return self.sealer.seal(json.dumps(value), SealContext(table, column, row_id, user_id))

    def _open(self, table: str, column: str, row: dict, value: bytes | None) -> Any:
        if value is None:
            return None
        return json.loads(self.sealer.open(bytes(value), SealContext(table, column, row["id"], row["user_id"])))

    # --- sessions ---------------------------------------------------------------------------------

    def _session(self, row: dict) -> DreamSession:
        return DreamSession(
            id=row["id"], user_id=row["user_id"], status=SessionStatus(row["status"]),
            current_cycle=row["current_cycle"], total_cycles=row["total_cycles"], phase=Phase(row["phase"]),
            created_at=iso_at(row["created_ts"]), started_at=_iso(row["started_ts"]),
            completed_at=_iso(row["completed_ts"]), trigger=row["trigger"], paused_reason=row["paused_reason"],
            reason=row["reason"], counts=json.loads(row["counts"]), updated_at=iso_at(row["updated_ts"]),
        )

    def create_session(self, user_id: str, total_cycles: int, trigger: str) -> DreamSession:
        now, sid = self.clock(), str(uuid4())
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO dream_sessions (id, user_id, status, total_cycles, trigger, created_ts, updated_ts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (sid, str(user_id), SessionStatus.PENDING.value, total_cycles, trigger, now, now))
        return self.session(user_id, sid)

    def session(self, user_id: str, session_id: str) -> DreamSession:
        row = self.db.one("SELECT * FROM dream_sessions WHERE id = ? AND user_id = ?", (str(session_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"dream session {session_id} not found")
        return self._session(row)

    def sessions(self, user_id: str, limit: int = 20, offset: int = 0) -> tuple[list[DreamSession], int]:
        """Newest first, and how many the user has."""
        rows = self.db.query("SELECT * FROM dream_sessions WHERE user_id = ? ORDER BY created_ts DESC, rowid DESC "
                             "LIMIT ? OFFSET ?", (str(user_id), limit, offset))
        total = self.db.scalar("SELECT count(*) FROM dream_sessions WHERE user_id = ?", (str(user_id),))
        return [self._session(r) for r in rows], int(total)

    def latest(self, user_id: str) -> DreamSession | None:
        rows, _ = self.sessions(user_id, limit=1)
        return rows[0] if rows else None

    def active(self, user_id: str | None = None) -> list[DreamSession]:
        """Pending, running and paused sessions (of one user, or all)."""
        marks = ",".join("?" * len(ACTIVE_STATUSES))
        clause, args = ("AND user_id = ?", [str(user_id)]) if user_id is not None else ("", [])
        rows = self.db.query(f"SELECT * FROM dream_sessions WHERE status IN ({marks}) {clause} ORDER BY created_ts",
                             [s.value for s in ACTIVE_STATUSES] + args)
        return [self._session(r) for r in rows]

    def update_session(self, session: DreamSession, **changes: Any) -> DreamSession:
        """Set fields of a session (status, current_cycle, phase, paused_reason, reason, counts,
        started/completed: pass ``started=True`` / ``completed=True`` to stamp them now)."""
        now = self.clock()
        sets, args = ["updated_ts = ?"], [now]
        for name in ("status", "current_cycle", "phase", "paused_reason", "reason"):
            if name in changes:
                value = changes[name]
                sets.append(f"{name} = ?")
                args.append(value.value if hasattr(value, "value") else value)
        if "counts" in changes:
            sets.append("counts = ?")
            args.append(json.dumps(changes["counts"]))
        if changes.get("started"):
            sets.append("started_ts = coalesce(started_ts, ?)")
            args.append(now)
        if changes.get("completed"):
            sets.append("completed_ts = ?")
            args.append(now)
        with self.db.transaction() as db:
            db.execute(f"UPDATE dream_sessions SET {', '.join(sets)} WHERE id = ?", (*args, session.id))
        return self.session(session.user_id, session.id)

    def users_with_memories(self) -> list[str]:
        return [r["user_id"] for r in self.db.query("SELECT DISTINCT user_id FROM memories")]

    # --- journal ----------------------------------------------------------------------------------

    def _entry(self, row: dict) -> JournalEntry:
        t = "dream_journal"
        return JournalEntry(
            id=row["id"], session_id=row["session_id"], user_id=row["user_id"], seq=row["seq"],
            cycle_number=row["cycle_number"], phase=Phase(row["phase"]), operation=Operation(row["operation"]),
            status=EntryStatus(row["status"]), details=self._open(t, "details_sealed", row, row["details_sealed"]),
            affected_memory_ids=json.loads(row["memory_ids"]), affected_node_ids=json.loads(row["node_ids"]),
            affected_edge_ids=json.loads(row["edge_ids"]),
            before_snapshot=self._open(t, "before_sealed", row, row["before_sealed"]),
            after_snapshot=self._open(t, "after_sealed", row, row["after_sealed"]),
            error=row["error"], created_at=iso_at(row["created_ts"]), key=row["op_key"],
        )

    def begin_entry(self, session: DreamSession, cycle: int, phase: Phase, operation: Operation, key: str,
                    details: dict, *, memories: Sequence[str] = (), nodes: Sequence[str] = (),
                    edges: Sequence[str] = (), before: dict | None = None) -> JournalEntry:
        """Write a planned operation (``pending``) and commit it, before the change it describes."""
        eid, user = str(uuid4()), session.user_id
        t = "dream_journal"
        with self.db.transaction() as db:
            seq = int(db.scalar("SELECT coalesce(max(seq), 0) + 1 FROM dream_journal WHERE session_id = ?",
                                (session.id,)))
            db.execute(
                "INSERT INTO dream_journal (id, session_id, user_id, seq, cycle_number, phase, operation, status, "
                "op_key, details_sealed, memory_ids, node_ids, edge_ids, before_sealed, created_ts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (eid, session.id, user, seq, cycle, phase.value, operation.value, EntryStatus.PENDING.value, key,
                 self._seal(t, "details_sealed", eid, user, details), json.dumps(list(memories)),
                 json.dumps(list(nodes)), json.dumps(list(edges)),
                 None if before is None else self._seal(t, "before_sealed", eid, user, before), self.clock()))
        return self.entry(user, eid)

    def finish_entry(self, entry: JournalEntry, status: EntryStatus, *, after: dict | None = None,
                     error: str | None = None, details: dict | None = None,
                     memories: Sequence[str] | None = None, nodes: Sequence[str] | None = None,
                     edges: Sequence[str] | None = None) -> JournalEntry:
        t, user = "dream_journal", entry.user_id
        sets, args = ["status = ?", "error = ?"], [status.value, error]
        if after is not None:
            sets.append("after_sealed = ?")
            args.append(self._seal(t, "after_sealed", entry.id, user, after))
        if details is not None:
            sets.append("details_sealed = ?")
            args.append(self._seal(t, "details_sealed", entry.id, user, details))
        for column, ids in (("memory_ids", memories), ("node_ids", nodes), ("edge_ids", edges)):
            if ids is not None:
                sets.append(f"{column} = ?")
                args.append(json.dumps(list(ids)))
        with self.db.transaction() as db:
            db.execute(f"UPDATE dream_journal SET {', '.join(sets)} WHERE id = ?", (*args, entry.id))
        return self.entry(user, entry.id)

    def entry(self, user_id: str, entry_id: str) -> JournalEntry:
        row = self.db.one("SELECT * FROM dream_journal WHERE id = ? AND user_id = ?", (entry_id, str(user_id)))
        if row is None:
            raise NotFoundError(f"journal entry {entry_id} not found")
        return self._entry(row)

    def applied(self, user_id: str, key: str) -> bool:
        """Whether an operation with this idempotency key was already applied for the user."""
        return self.db.one("SELECT 1 FROM dream_journal WHERE user_id = ? AND op_key = ? AND status = ?",
                           (str(user_id), key, EntryStatus.APPLIED.value)) is not None

    def journal(self, user_id: str, session_id: str, *, cycle: int | None = None, phase: Phase | None = None,
                operation: Operation | None = None, status: EntryStatus | None = None,
                limit: int = 100, offset: int = 0) -> tuple[list[JournalEntry], int]:
        """A session's entries in the order they were written, filtered; and how many match."""
        self.session(user_id, session_id)  # 404 for an unknown or another user's session
        where, args = ["session_id = ?", "user_id = ?"], [str(session_id), str(user_id)]
        for column, value in (("cycle_number", cycle), ("phase", phase), ("operation", operation),
                              ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value.value if hasattr(value, "value") else value)
        clause = " AND ".join(where)
        rows = self.db.query(f"SELECT * FROM dream_journal WHERE {clause} ORDER BY seq LIMIT ? OFFSET ?",
                             (*args, limit, offset))
        total = self.db.scalar(f"SELECT count(*) FROM dream_journal WHERE {clause}", args)
        return [self._entry(r) for r in rows], int(total)

    def memory_journal(self, user_id: str, memory_id: str, limit: int = 200) -> list[JournalEntry]:
        """The user's journal entries (every session) that name ``memory_id`` among their affected
        memories, oldest first: what dream mode did to that memory (a memory's history)."""
        rows = self.db.query(
            "SELECT * FROM dream_journal WHERE user_id = ? AND EXISTS (SELECT 1 FROM json_each(memory_ids) "
            "WHERE value = ?) ORDER BY created_ts, seq LIMIT ?", (str(user_id), str(memory_id), limit))
        return [self._entry(r) for r in rows]

    def pending_entries(self, session_id: str) -> list[JournalEntry]:
        rows = self.db.query("SELECT * FROM dream_journal WHERE session_id = ? AND status = ? ORDER BY seq",
                             (session_id, EntryStatus.PENDING.value))
        return [self._entry(r) for r in rows]

    def sessions_with_pending(self) -> list[str]:
        """Sessions with a journal entry left pending (a crash between the journal and the change)."""
        return [r["session_id"] for r in self.db.query(
            "SELECT DISTINCT session_id FROM dream_journal WHERE status = ?", (EntryStatus.PENDING.value,))]

    def purge_journal(self, older_than_days: float) -> int:
        """Entries older than ``journal.retention_days`` go (sessions stay, with their counts)."""
        cutoff = self.clock() - older_than_days * SECONDS_PER_DAY
        with self.db.transaction() as db:
            db.execute("DELETE FROM dream_journal WHERE created_ts < ? AND status != ?",
                       (cutoff, EntryStatus.PENDING.value))
            return int(db.scalar("SELECT changes()"))

    # --- insights ---------------------------------------------------------------------------------

    def _insight(self, row: dict) -> Insight:
        t = "dream_insights"
        return Insight(
            id=row["id"], user_id=row["user_id"], insight_type=InsightType(row["insight_type"]),
            title=self._open(t, "title_sealed", row, row["title_sealed"]),
            content=self._open(t, "content_sealed", row, row["content_sealed"]),
            confidence=row["confidence"], status=InsightStatus(row["status"]), evidence_count=row["evidence_count"],
            source_memory_ids=json.loads(row["source_memory_ids"]), created_at=iso_at(row["created_ts"]),
            session_id=row["session_id"], updated_at=iso_at(row["updated_ts"]),
            last_evidence_at=_iso(row["last_evidence_ts"]), memory_id=row["memory_id"], key=row["insight_key"],
        )

    def add_insight(self, user_id: str, insight_type: InsightType, title: str, content: str, confidence: float,
                    sources: Sequence[str], key: str, *, session_id: str | None = None,
                    embedding: np.ndarray | None = None, insight_id: str | None = None) -> tuple[Insight, bool]:
        """Store an insight unless the user has one with this key; returns it and whether it is new."""
        user = str(user_id)
        existing = self.db.one("SELECT * FROM dream_insights WHERE user_id = ? AND insight_key = ?", (user, key))
        if existing is not None:
            return self._insight(existing), False
        iid, now, t = insight_id or str(uuid4()), self.clock(), "dream_insights"
        with self.db.transaction() as db:
            db.execute(
                "INSERT INTO dream_insights (id, user_id, session_id, insight_type, title_sealed, content_sealed, "
                "confidence, status, source_memory_ids, embedding, insight_key, created_ts, updated_ts) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (iid, user, session_id, insight_type.value, self._seal(t, "title_sealed", iid, user, title),
                 self._seal(t, "content_sealed", iid, user, content), float(confidence),
                 InsightStatus.ACTIVE.value, json.dumps(list(sources)),
                 None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes(), key, now, now))
        return self.insight(user, iid), True

    def insight(self, user_id: str, insight_id: str) -> Insight:
        row = self.db.one("SELECT * FROM dream_insights WHERE id = ? AND user_id = ?", (str(insight_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"insight {insight_id} not found")
        return self._insight(row)

    def insights(self, user_id: str, *, insight_type: InsightType | None = None,
                 status: InsightStatus | None = None, limit: int = 100, offset: int = 0) -> tuple[list[Insight], int]:
        """Newest first, filtered; and how many match."""
        where, args = ["user_id = ?"], [str(user_id)]
        if insight_type is not None:
            where.append("insight_type = ?")
            args.append(insight_type.value)
        if status is not None:
            where.append("status = ?")
            args.append(status.value)
        clause = " AND ".join(where)
        rows = self.db.query(f"SELECT * FROM dream_insights WHERE {clause} ORDER BY created_ts DESC, rowid DESC "
                             "LIMIT ? OFFSET ?", (*args, limit, offset))
        total = self.db.scalar(f"SELECT count(*) FROM dream_insights WHERE {clause}", args)
        return [self._insight(r) for r in rows], int(total)

    def insight_vectors(self, user_id: str, status: InsightStatus) -> tuple[list[str], np.ndarray]:
        """Ids and embeddings of the user's insights in ``status`` that have one (surfacing, evidence)."""
        rows = self.db.query("SELECT id, embedding FROM dream_insights WHERE user_id = ? AND status = ? AND "
                             "embedding IS NOT NULL", (str(user_id), status.value))
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [r["id"] for r in rows], np.stack([np.frombuffer(r["embedding"], dtype=np.float32) for r in rows])

    def update_insight(self, insight: Insight, **changes: Any) -> Insight:
        """Set title, content (sealed again), confidence, status, evidence_count, memory_id,
        embedding; ``evidence=True`` stamps last_evidence now."""
        now, t, user = self.clock(), "dream_insights", insight.user_id
        sets, args = ["updated_ts = ?"], [now]
        for name in ("title", "content"):
            if name in changes:
                sets.append(f"{name}_sealed = ?")
                args.append(self._seal(t, f"{name}_sealed", insight.id, user, changes[name]))
        for name in ("confidence", "status", "evidence_count", "memory_id"):
            if name in changes:
                value = changes[name]
                sets.append(f"{name} = ?")
                args.append(value.value if hasattr(value, "value") else value)
        if "embedding" in changes:
            sets.append("embedding = ?")
            args.append(np.asarray(changes["embedding"], dtype=np.float32).tobytes())
        if changes.get("evidence"):
            sets.append("last_evidence_ts = ?")
            args.append(now)
        with self.db.transaction() as db:
            db.execute(f"UPDATE dream_insights SET {', '.join(sets)} WHERE id = ? AND user_id = ?",
                       (*args, insight.id, user))
        return self.insight(user, insight.id)

    def stale_hypotheses(self, user_id: str, ttl_days: float) -> list[Insight]:
        """Active hypotheses with no evidence (since creation or the last) for ``ttl_days``."""
        cutoff = self.clock() - ttl_days * SECONDS_PER_DAY
        rows = self.db.query(
            "SELECT * FROM dream_insights WHERE user_id = ? AND status = ? AND insight_type = ? AND "
            "coalesce(last_evidence_ts, created_ts) < ?",
            (str(user_id), InsightStatus.ACTIVE.value, InsightType.HYPOTHESIS.value, cutoff))
        return [self._insight(r) for r in rows]
