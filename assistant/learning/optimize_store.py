"""Where optimisation keeps its runs, trials and each user's applied parameters (m028).

:meth:`OptimizationStore.tuned` is asked on every search of the user's memories (through
:class:`assistant.memory.tuning.RetrievalTuning`), so the applied parameters are cached in memory and
the cache is replaced whenever parameters are applied or reset.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from assistant.clock import iso_at
from assistant.storage.db import Database


@dataclass(frozen=True)
class Applied:
    values: dict[str, float | int]
    source: str
    run_id: str
    study: str
    trial_number: int
    score: float | None
    validation_score: float | None
    applied_at: str


class OptimizationStore:
    def __init__(self, db: Database, clock: Any = time.time):
        self.db = db
        self.clock = clock
        self._lock = threading.Lock()
        self._applied: dict[str, Applied] | None = None

    # --- applied parameters (RetrievalTuning) ---------------------------------------------------------

    def _load(self) -> dict[str, Applied]:
        with self._lock:
            if self._applied is None:
                rows = self.db.query("SELECT * FROM optimization_params")
                self._applied = {r["user_id"]: Applied(json.loads(r["params"]), r["source"], r["run_id"], r["study"],
                                                       r["trial_number"], r["score"], r["validation_score"],
                                                       r["applied_at"]) for r in rows}
            return self._applied

    def applied(self, user_id: str) -> Applied | None:
        return self._load().get(str(user_id))

    def tuned(self, user_id: str) -> Mapping[str, float | int] | None:
        found = self.applied(user_id)
        return found.values if found is not None else None

    def tuned_decay_factors(self) -> Mapping[str, float]:
        return {u: float(a.values["decay_factor"]) for u, a in self._load().items() if "decay_factor" in a.values}

    def apply(self, user_id: str, values: Mapping[str, float | int], *, source: str, run_id: str, study: str,
              trial_number: int, score: float | None, validation_score: float | None) -> Applied:
        now = iso_at(self.clock())
        self.db.execute(
            "INSERT OR REPLACE INTO optimization_params (user_id, params, source, run_id, study, trial_number, score, "
            "validation_score, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(user_id), json.dumps(dict(values)), source, run_id, study, trial_number, score, validation_score, now))
        with self._lock:
            self._applied = None
        return self.applied(user_id)  # type: ignore[return-value]

    def reset(self, user_id: str) -> bool:
        """Forget the user's applied parameters (the configured ones apply again)."""
        with self.db.transaction() as db:
            db.execute("DELETE FROM optimization_params WHERE user_id = ?", (str(user_id),))
            gone = int(db.scalar("SELECT changes()"))
        with self._lock:
            self._applied = None
        return gone > 0

    # --- runs and trials ----------------------------------------------------------------------------

    def create_run(self, run_id: str, user_id: str, study: str, source: str, total: int) -> None:
        self.db.execute(
            "INSERT INTO optimization_runs (id, user_id, study, source, state, trials_total, started_at) "
            "VALUES (?, ?, ?, ?, 'running', ?, ?)", (run_id, str(user_id), study, source, total, iso_at(self.clock())))

    def update_run(self, run_id: str, **fields: Any) -> None:
        if fields.pop("finished", False):
            fields["finished_at"] = iso_at(self.clock())
        names = ", ".join(f"{name} = ?" for name in fields)
        self.db.execute(f"UPDATE optimization_runs SET {names} WHERE id = ?", (*fields.values(), run_id))

    def run(self, user_id: str, run_id: str) -> dict | None:
        return self.db.one("SELECT * FROM optimization_runs WHERE id = ? AND user_id = ?", (run_id, str(user_id)))

    def latest_run(self, user_id: str) -> dict | None:
        return self.db.one("SELECT * FROM optimization_runs WHERE user_id = ? ORDER BY started_at DESC, rowid DESC "
                           "LIMIT 1", (str(user_id),))

    def interrupted(self) -> None:
        """Runs left 'running' by a process that stopped: failed (called at start-up)."""
        self.db.execute("UPDATE optimization_runs SET state = 'failed', error = 'the server stopped during the run', "
                        "finished_at = ? WHERE state = 'running'", (iso_at(self.clock()),))

    def add_trial(self, user_id: str, run_id: str, study: str, number: int, values: Mapping[str, Any],
                  score: float | None, validation: float | None, state: str, applied: bool) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO optimization_trials (user_id, run_id, study, number, params, score, validation_score, "
            "state, applied, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(user_id), run_id, study, number, json.dumps(dict(values)), score, validation, state, int(applied),
             iso_at(self.clock())))

    def trials(self, user_id: str, limit: int = 100, offset: int = 0, run_id: str | None = None) -> list[dict]:
        """The user's trials, oldest first (every study, every run)."""
        clause, args = ("AND t.run_id = ?", [run_id]) if run_id else ("", [])
        rows = self.db.query(
            "SELECT t.*, r.source FROM optimization_trials t JOIN optimization_runs r ON r.id = t.run_id "
            f"WHERE t.user_id = ? {clause} ORDER BY t.created_at, t.rowid LIMIT ? OFFSET ?",
            (str(user_id), *args, limit, offset))
        return [{**r, "params": json.loads(r["params"]), "applied": bool(r["applied"])} for r in rows]

    def count_trials(self, user_id: str, run_id: str | None = None) -> int:
        clause, args = ("AND run_id = ?", [run_id]) if run_id else ("", [])
        return int(self.db.scalar(f"SELECT count(*) FROM optimization_trials WHERE user_id = ? {clause}",
                                  (str(user_id), *args)))
