"""A distillation run's record (its phase, counts, teacher and training run) and its table (m030).

No user text is kept here: the prompts and the teacher's answers stay in memory while the run collects them,
then go to the training run as its samples (which the training store seals).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

from assistant.clock import iso
from assistant.learning.distill_teacher import TeacherIdentity
from assistant.storage.db import Database


class DistillPhase(StrEnum):
    """``collecting`` (the teacher answers the prompts), then the training run's ``training`` and
    ``evaluating``, then one end: ``active`` (the student adapter beat the active one and is used),
    ``rejected`` (it did not: nothing changed), ``failed`` (with ``error``), ``cancelled`` (by its user)."""

    COLLECTING = "collecting"
    TRAINING = "training"
    EVALUATING = "evaluating"
    ACTIVE = "active"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"


RUNNING_PHASES = frozenset({DistillPhase.COLLECTING, DistillPhase.TRAINING, DistillPhase.EVALUATING})
COLUMNS = ("id", "user_id", "phase", "prompt_source", "prompts", "answered", "failed", "flagged", "truncated",
           "teacher_engine", "teacher_model", "teacher_host", "dataset_size", "training_run_id", "training_progress",
           "error", "created_at", "updated_at", "finished_at")


@dataclass(frozen=True)
class DistillationRun:
    id: str
    user_id: str
    phase: DistillPhase
    prompt_source: str  # "history" (the user's past questions) | "given"
    prompts: int
    teacher: TeacherIdentity
    answered: int = 0  # usable answers (truncated ones included)
    failed: int = 0  # the teacher failed, answered nothing or asked for a tool
    flagged: int = 0  # answers the defence flagged: dropped
    truncated: int = 0  # answers cut at distillation.max_tokens (kept)
    dataset_size: int = 0  # samples handed to the training run
    training_run_id: str | None = None
    training_progress: float | None = None  # the training run's progress, 0..1
    error: str | None = None
    created_at: str = field(default_factory=iso)
    updated_at: str = field(default_factory=iso)
    finished_at: str | None = None

    @property
    def done(self) -> int:
        """Prompts the teacher has been asked so far (answered, failed or flagged)."""
        return self.answered + self.failed + self.flagged

    @property
    def running(self) -> bool:
        return self.phase in RUNNING_PHASES

    @property
    def progress(self) -> float:
        """The current phase's progress, 0..1: answers collected of the prompts, then the training run's."""
        if self.phase is DistillPhase.COLLECTING:
            return round(self.done / self.prompts, 4) if self.prompts else 0.0
        if self.phase in (DistillPhase.TRAINING, DistillPhase.EVALUATING):
            return round(self.training_progress or 0.0, 4)
        return 1.0

    def moved(self, **changes: Any) -> DistillationRun:
        return replace(self, **changes, updated_at=iso())

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out |= {"phase": self.phase.value, "teacher": self.teacher.as_dict(), "done": self.done,
                "progress": self.progress}
        return out

    def row(self) -> tuple[Any, ...]:
        return (self.id, self.user_id, self.phase.value, self.prompt_source, self.prompts, self.answered, self.failed,
                self.flagged, self.truncated, self.teacher.engine, self.teacher.model, self.teacher.host,
                self.dataset_size, self.training_run_id, self.training_progress, self.error, self.created_at,
                self.updated_at, self.finished_at)

    @classmethod
    def of_row(cls, r: dict[str, Any]) -> DistillationRun:
        teacher = TeacherIdentity(r["teacher_engine"], r["teacher_model"], r["teacher_host"])
        values = {k: r[k] for k in COLUMNS if not k.startswith("teacher_")}
        return cls(**values | {"phase": DistillPhase(r["phase"]), "teacher": teacher})


class DistillationStore:
    def __init__(self, db: Database):
        self.db = db

    def save(self, run: DistillationRun) -> None:
        marks = ", ".join("?" * len(COLUMNS))
        updates = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in ("id", "user_id", "created_at"))
        self.db.execute(f"INSERT INTO distillation_runs ({', '.join(COLUMNS)}) VALUES ({marks}) "
                        f"ON CONFLICT (id) DO UPDATE SET {updates}", run.row())

    def get(self, user_id: str, run_id: str) -> DistillationRun | None:
        row = self.db.one("SELECT * FROM distillation_runs WHERE id = ? AND user_id = ?", (str(run_id), str(user_id)))
        return None if row is None else DistillationRun.of_row(row)

    def latest(self, user_id: str) -> DistillationRun | None:
        row = self.db.one("SELECT * FROM distillation_runs WHERE user_id = ? ORDER BY created_at DESC, rowid DESC "
                          "LIMIT 1", (str(user_id),))
        return None if row is None else DistillationRun.of_row(row)

    def history(self, user_id: str, limit: int = 20) -> list[DistillationRun]:
        rows = self.db.query("SELECT * FROM distillation_runs WHERE user_id = ? ORDER BY created_at DESC, rowid DESC "
                             "LIMIT ?", (str(user_id), limit))
        return [DistillationRun.of_row(r) for r in rows]

    def interrupted(self) -> int:
        """Runs left collecting by a stopped process: failed (their answers were in memory only).
        Runs in training follow their training run, which the training service recovers."""
        now = iso()
        rows = self.db.query(
            "UPDATE distillation_runs SET phase = 'failed', error = ?, updated_at = ?, finished_at = ? "
            "WHERE phase = 'collecting' RETURNING id",
            ("interrupted: the server stopped while the teacher answered (the answers were held in memory only)",
             now, now))
        return len(rows)
