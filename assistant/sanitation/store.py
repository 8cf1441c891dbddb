"""Sanitation rows in SQLite: result records (body sealed), dynamic defence patterns, purge tombstones.

Every read takes the user: another user's rows are never returned (the API answers 404). Patterns
are plain (they are generalised from attack texts, not the user's words) so the defence can load
them quickly; they are cached per user and the cache is dropped on every change.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from uuid import uuid4

from assistant.clock import epoch_of, iso_at
from assistant.crypto import SealContext, Sealer
from assistant.defence.types import DefencePattern
from assistant.errors import NotFoundError
from assistant.sanitation.types import SanitationResult
from assistant.storage.db import Database


def pattern_hash(pattern: str) -> str:
    """The dedup key of a normalised pattern (sha256 of its text)."""
    return hashlib.sha256(pattern.encode()).hexdigest()


class SanitationStore:
    def __init__(self, db: Database, sealer: Sealer, clock: Callable[[], float] = time.time):
        self.db = db
        self.sealer = sealer
        self.clock = clock
        self._cache: dict[str | None, list[DefencePattern]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()  # per thread: hits not counted (a sanitation run's own inspections)

    # --- results ------------------------------------------------------------------------------------

    def save_result(self, result: SanitationResult, db: Database | None = None) -> None:
        """Insert or replace ``result`` (inside ``db``'s transaction when given)."""
        body = self.sealer.seal(json.dumps(result.as_dict()),
                                SealContext("sanitation_results", "body_sealed", result.id, result.user_id))
        quality = (result.quality or {}).get("score")
        started = epoch_of(result.started_at) if result.started_at else self.clock()
        completed = epoch_of(result.completed_at) if result.completed_at else None
        (db or self.db).execute(
            "INSERT OR REPLACE INTO sanitation_results (id, user_id, session_id, cycle, trigger, status, quality_score, "
            "body_sealed, started_ts, completed_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (result.id, result.user_id, result.session_id, result.cycle, result.trigger, result.status, quality,
             body, started, completed))

    def _result(self, row: dict) -> SanitationResult:
        body = json.loads(self.sealer.open(bytes(row["body_sealed"]),
                                           SealContext("sanitation_results", "body_sealed", row["id"], row["user_id"])))
        return SanitationResult(**body)

    def result(self, user_id: str, result_id: str) -> SanitationResult:
        row = self.db.one("SELECT * FROM sanitation_results WHERE id = ? AND user_id = ?", (str(result_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"sanitation result {result_id} not found")
        return self._result(row)

    def latest(self, user_id: str) -> SanitationResult | None:
        row = self.db.one("SELECT * FROM sanitation_results WHERE user_id = ? ORDER BY started_ts DESC, rowid DESC "
                          "LIMIT 1", (str(user_id),))
        return None if row is None else self._result(row)

    def results(self, user_id: str, session_id: str) -> list[SanitationResult]:
        rows = self.db.query("SELECT * FROM sanitation_results WHERE user_id = ? AND session_id = ? "
                             "ORDER BY started_ts, rowid", (str(user_id), str(session_id)))
        return [self._result(r) for r in rows]

    def history(self, user_id: str, limit: int = 100) -> list[SanitationResult]:
        """The user's runs, oldest first (the quality trend, the dashboard's curves)."""
        rows = self.db.query("SELECT * FROM (SELECT *, rowid AS r FROM sanitation_results WHERE user_id = ? "
                             "ORDER BY started_ts DESC, rowid DESC LIMIT ?) ORDER BY started_ts, r",
                             (str(user_id), int(limit)))
        return [self._result(r) for r in rows]

    def last_run_ts(self, user_id: str) -> float | None:
        """When the user's last completed run started (the quality window begins there)."""
        return self.db.scalar("SELECT max(started_ts) FROM sanitation_results WHERE user_id = ? AND status = "
                              "'completed'", (str(user_id),))

    # --- dynamic defence patterns -----------------------------------------------------------------

    def _pattern(self, row: dict) -> DefencePattern:
        return DefencePattern(
            id=row["id"], user_id=row["user_id"], pattern=row["pattern"], hash=row["hash"], active=bool(row["active"]),
            source=row["source"], family=row["family"], hits=row["hits"], created_at=iso_at(row["created_ts"]),
            deactivated_at=None if row["deactivated_ts"] is None else iso_at(row["deactivated_ts"]),
            session_id=row["session_id"])

    def add_pattern(self, user_id: str, pattern: str, *, source: str, family: str = "",
                    session_id: str | None = None, db: Database | None = None) -> DefencePattern | None:
        """Store a validated pattern; None when the user already has one with the same hash (active or
        deactivated: a pattern the user switched off is not brought back by the next run)."""
        digest = pattern_hash(pattern)
        target = db or self.db
        if target.one("SELECT 1 FROM defense_patterns WHERE user_id = ? AND hash = ?", (str(user_id), digest)):
            return None
        pid = str(uuid4())
        target.execute("INSERT INTO defense_patterns (id, user_id, pattern, hash, active, source, family, session_id, "
                       "created_ts) VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
                       (pid, str(user_id), pattern, digest, source, family, session_id, self.clock()))
        self.forget(user_id)
        row = target.one("SELECT * FROM defense_patterns WHERE id = ?", (pid,))
        return self._pattern(row)

    def patterns(self, user_id: str, *, active_only: bool = True) -> list[DefencePattern]:
        where = " AND active = 1" if active_only else ""
        rows = self.db.query(f"SELECT * FROM defense_patterns WHERE user_id = ?{where} ORDER BY created_ts, rowid",
                             (str(user_id),))
        return [self._pattern(r) for r in rows]

    def known_hashes(self, user_id: str) -> set[str]:
        return {r["hash"] for r in self.db.query("SELECT hash FROM defense_patterns WHERE user_id = ?", (str(user_id),))}

    def deactivate(self, user_id: str, pattern_id: str) -> DefencePattern:
        """Deactivate one of the user's active patterns; 404 when it is not theirs or not active."""
        row = self.db.one("SELECT * FROM defense_patterns WHERE id = ? AND user_id = ? AND active = 1",
                          (str(pattern_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"active defence pattern {pattern_id} not found")
        with self.db.transaction() as db:
            db.execute("UPDATE defense_patterns SET active = 0, deactivated_ts = ? WHERE id = ?",
                       (self.clock(), row["id"]))
        self.forget(user_id)
        return self._pattern(self.db.one("SELECT * FROM defense_patterns WHERE id = ?", (row["id"],)))

    def forget(self, user_id: str | None = None) -> None:
        """Drop the pattern cache (of one user, or all after a rollback)."""
        with self._lock:
            if user_id is None:
                self._cache.clear()
            else:
                self._cache.pop(str(user_id), None)

    # PatternProvider (assistant.defence.types)
    def active_patterns(self, user_id: str | None) -> Sequence[DefencePattern]:
        if user_id is None:
            return ()
        key = str(user_id)
        with self._lock:
            cached = self._cache.get(key)
        if cached is None:
            cached = self.patterns(key)
            with self._lock:
                self._cache[key] = cached
        return cached

    @contextmanager
    def quiet_hits(self) -> Iterator[None]:
        """Inside, this thread's matches are not counted: a sanitation run's own inspections are not
        traffic, and a rolled-back run must leave every table as it was."""
        self._local.quiet = True
        try:
            yield
        finally:
            self._local.quiet = False

    def patterns_version(self, user_id: str) -> str:
        """Changes whenever the user's active patterns change (a key of cached verdicts)."""
        return pattern_hash(",".join(p.id for p in self.active_patterns(user_id)))[:16]

    def count_hits(self, pattern_ids: Sequence[str]) -> None:
        if getattr(self._local, "quiet", False):
            return
        if pattern_ids:
            marks = ",".join("?" * len(pattern_ids))
            self.db.execute(f"UPDATE defense_patterns SET hits = hits + 1 WHERE id IN ({marks})", list(pattern_ids))

    # --- purge tombstones ---------------------------------------------------------------------------

    def record_purges(self, db: Database, user_id: str, rows: Sequence[dict]) -> None:
        """Tombstones for purged memories (``rows``: id, quarantined_at, the opened quarantine_reason,
        sealed again here for the tombstone's row)."""
        now = self.clock()
        for r in rows:
            reason = r.get("quarantine_reason")
            sealed = None if reason is None else self.sealer.seal(
                reason, SealContext("memory_purges", "quarantine_reason", r["id"], str(user_id)))
            db.execute("INSERT OR REPLACE INTO memory_purges (memory_id, user_id, quarantined_at, quarantine_reason, "
                       "purged_ts) VALUES (?, ?, ?, ?, ?)", (r["id"], str(user_id), r.get("quarantined_at"), sealed, now))

    def purged(self, user_id: str, memory_id: str) -> dict | None:
        """The tombstone of a purged memory (when, and the reason it had been quarantined), or None."""
        row = self.db.one("SELECT * FROM memory_purges WHERE memory_id = ? AND user_id = ?",
                          (str(memory_id), str(user_id)))
        if row is None:
            return None
        reason = row["quarantine_reason"]
        if isinstance(reason, bytes | memoryview):
            reason = self.sealer.open(bytes(reason), SealContext("memory_purges", "quarantine_reason",
                                                                 row["memory_id"], row["user_id"]))
        return {**row, "quarantine_reason": reason, "purged_at": iso_at(row["purged_ts"])}


def new_result_id() -> str:
    return str(uuid4())
