"""Training runs and adapters, persisted (``training_runs``, ``training_adapters``; migration m027).

A run (:class:`Run`) goes ``preparing`` -> ``training`` -> ``evaluating`` -> ``active`` | ``rejected``,
or ends ``failed`` / ``cancelled`` from any running state (:class:`assistant.learning.types.RunState`).
``phase`` says more than the state while it runs: ``queued`` (waiting for the worker), ``preparing``,
``training``, ``converting``, ``evaluating``, ``smoke_check``, then the final state. A run's rows hold
no user text: the loss curve, metrics and counts only (the samples stay in the feedback table).

An adapter row (:class:`~assistant.learning.types.AdapterRecord`) is written when a run is activated;
exactly one adapter per user is ``active`` (the newest activated), the others stay listed until their
files are pruned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.clock import iso
from assistant.learning.types import RUNNING_STATES, AdapterRecord, RunState
from assistant.storage.db import Database

SETTLED = (RunState.ACTIVE, RunState.REJECTED)  # runs that were evaluated: their samples are no longer new


@dataclass
class Run:
    id: str
    user_id: str
    source: str  # feedback | distillation | federated | ...
    base_model: str
    state: RunState = RunState.PREPARING
    phase: str = "queued"
    step: int = 0
    total_steps: int = 0
    loss: float | None = None
    losses: list[float] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    samples: int = 0  # samples trained on (or, for a submitted adapter, the samples it was made from)
    held_out: int = 0  # samples kept back for the evaluation
    watermark: str | None = None  # the newest feedback change this run saw
    adapter_id: str | None = None
    error: str | None = None
    created_at: str = field(default_factory=iso)
    updated_at: str = field(default_factory=iso)
    finished_at: str | None = None

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    @property
    def fraction(self) -> float:
        """Training steps done, 0..1; a run that got to a decision (active or rejected) is done: 1.0."""
        if self.state in (RunState.ACTIVE, RunState.REJECTED):
            return 1.0
        return round(self.step / self.total_steps, 4) if self.total_steps else 0.0

    def progress(self) -> dict[str, Any]:
        return {"phase": self.phase, "step": self.step, "total_steps": self.total_steps, "fraction": self.fraction,
                "loss": self.loss}

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "state": self.state.value, "phase": self.phase,
                "progress": self.progress(), "losses": list(self.losses), "metrics": dict(self.metrics),
                "samples": self.samples, "held_out": self.held_out, "base_model": self.base_model,
                "adapter_id": self.adapter_id, "error": self.error, "created_at": self.created_at,
                "updated_at": self.updated_at, "finished_at": self.finished_at}

    def copy(self) -> Run:
        return Run(**{**self.__dict__, "losses": list(self.losses), "metrics": dict(self.metrics)})


COLUMNS = ("id", "user_id", "source", "state", "phase", "step", "total_steps", "loss", "losses", "metrics", "samples",
           "held_out", "watermark", "base_model", "adapter_id", "error", "created_at", "updated_at", "finished_at")


def _run(row: dict[str, Any]) -> Run:
    values = {k: row[k] for k in COLUMNS}
    values.update(state=RunState(row["state"]), losses=json.loads(row["losses"]), metrics=json.loads(row["metrics"]))
    return Run(**values)


def _adapter(row: dict[str, Any]) -> AdapterRecord:
    return AdapterRecord(id=row["id"], user_id=row["user_id"], run_id=row["run_id"], base_model=row["base_model"],
                         peft_dir=Path(row["peft_dir"]), gguf_path=Path(row["gguf_path"]), samples=int(row["samples"]),
                         created_at=row["created_at"], metrics=json.loads(row["metrics"]))


class RunStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, run: Run) -> None:
        """Insert or update ``run`` (every column)."""
        run.updated_at = iso()
        values = [getattr(run, c) for c in COLUMNS]
        values[COLUMNS.index("state")] = run.state.value
        values[COLUMNS.index("losses")] = json.dumps([round(x, 6) for x in run.losses])
        values[COLUMNS.index("metrics")] = json.dumps(run.metrics, default=str)
        marks = ", ".join("?" * len(COLUMNS))
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c != "id")
        self.db.execute(f"INSERT INTO training_runs ({', '.join(COLUMNS)}) VALUES ({marks}) "  # noqa: S608
                        f"ON CONFLICT(id) DO UPDATE SET {updates}", values)

    def get(self, user_id: str, run_id: str) -> Run | None:
        row = self.db.one("SELECT * FROM training_runs WHERE id = ? AND user_id = ?", (str(run_id), str(user_id)))
        return None if row is None else _run(row)

    def list(self, user_id: str, limit: int = 20, offset: int = 0) -> list[Run]:
        rows = self.db.query("SELECT * FROM training_runs WHERE user_id = ? ORDER BY created_at DESC, rowid DESC "
                             "LIMIT ? OFFSET ?", (str(user_id), limit, offset))
        return [_run(r) for r in rows]

    def count(self, user_id: str) -> int:
        return int(self.db.scalar("SELECT COUNT(*) FROM training_runs WHERE user_id = ?", (str(user_id),)) or 0)

    def last_settled(self, user_id: str, source: str | None = None) -> Run | None:
        """The user's newest evaluated run (active or rejected), of ``source`` when given."""
        marks = ", ".join("?" * len(SETTLED))
        where, params = f"user_id = ? AND state IN ({marks})", [str(user_id), *[s.value for s in SETTLED]]
        if source is not None:
            where, params = where + " AND source = ?", [*params, source]
        row = self.db.one(f"SELECT * FROM training_runs WHERE {where} "  # noqa: S608 (fixed clauses)
                          "ORDER BY created_at DESC, rowid DESC LIMIT 1", params)
        return None if row is None else _run(row)

    def unfinished(self) -> list[Run]:
        """Runs of any user still in a running state (a previous process stopped during them)."""
        marks = ", ".join("?" * len(RUNNING_STATES))
        rows = self.db.query(f"SELECT * FROM training_runs WHERE state IN ({marks})",  # noqa: S608
                             [s.value for s in RUNNING_STATES])
        return [_run(r) for r in rows]

    # --- adapters -------------------------------------------------------------------------------------

    def activate(self, record: AdapterRecord) -> None:
        """Store ``record`` as the user's active adapter (the previous one stays, inactive)."""
        with self.db.transaction() as db:
            db.execute("UPDATE training_adapters SET active = 0 WHERE user_id = ?", (record.user_id,))
            db.execute("INSERT INTO training_adapters (id, user_id, run_id, base_model, peft_dir, gguf_path, samples, "
                       "metrics, active, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?)",
                       (record.id, record.user_id, record.run_id, record.base_model, str(record.peft_dir),
                        str(record.gguf_path), record.samples, json.dumps(record.metrics, default=str),
                        record.created_at))

    def active_adapter(self, user_id: str) -> AdapterRecord | None:
        row = self.db.one("SELECT * FROM training_adapters WHERE user_id = ? AND active = 1", (str(user_id),))
        return None if row is None else _adapter(row)

    def adapters(self, user_id: str) -> list[AdapterRecord]:
        rows = self.db.query("SELECT * FROM training_adapters WHERE user_id = ? ORDER BY created_at DESC, rowid DESC",
                             (str(user_id),))
        return [_adapter(r) for r in rows]

    def forget_adapter(self, adapter_id: str) -> None:
        self.db.execute("DELETE FROM training_adapters WHERE id = ? AND active = 0", (adapter_id,))
