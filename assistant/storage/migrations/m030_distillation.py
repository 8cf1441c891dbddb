"""Migration m030_distillation: distillation runs (assistant/learning/distill_store.py).

Only the run's bookkeeping: phase, counts, the teacher's identity (engine, model, host; never its key) and the
training run it handed its dataset to. No user text is stored here: the prompts and the teacher's answers live
in memory while the run collects them, then as the training run's samples (sealed by the training store).
"""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m030_distillation(db: Connection) -> None:
    """``distillation_runs``: one row per run of a user, updated as it moves through its phases."""
    db.executescript(
        """
        CREATE TABLE distillation_runs (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            phase TEXT NOT NULL,
            prompt_source TEXT NOT NULL,
            prompts INTEGER NOT NULL,
            answered INTEGER NOT NULL DEFAULT 0,
            failed INTEGER NOT NULL DEFAULT 0,
            flagged INTEGER NOT NULL DEFAULT 0,
            truncated INTEGER NOT NULL DEFAULT 0,
            teacher_engine TEXT NOT NULL,
            teacher_model TEXT NOT NULL,
            teacher_host TEXT NOT NULL,
            dataset_size INTEGER NOT NULL DEFAULT 0,
            training_run_id TEXT,
            training_progress REAL,
            error TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX distillation_runs_user ON distillation_runs(user_id, created_at);
        """
    )
