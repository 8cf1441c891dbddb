"""Migration m027_training: feedback samples, training runs and adapters (assistant/learning/feedback.py, runs.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m027_training(db: Connection) -> None:
    """``training_feedback``: one row per (user, rated assistant message, kind): ``explicit`` (the user's
    ``POST /api/training/feedback``; a second one on the same message replaces it), ``re_ask`` or
    ``correction`` (captured from sanitation's quality signals). ``rating`` -1/0/+1; ``sample`` 1 when the
    row yields a training sample; the texts (correction, preferred answer, the implicit evidence) sealed in
    ``body_sealed`` (bound to the table, column, row id and owner); ``useful_memory_ids`` a JSON list of
    memory ids (no text). ``training_runs``: a user's run (source, state, phase and progress, the loss
    curve and metrics as JSON, the sample watermark that says which samples it saw). ``training_adapters``:
    the adapters a run produced and which one is the user's active adapter."""
    db.executescript(
        """
        CREATE TABLE training_feedback (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            rating INTEGER NOT NULL,
            sample INTEGER NOT NULL DEFAULT 0,
            body_sealed BLOB NOT NULL,
            useful_memory_ids TEXT NOT NULL DEFAULT '[]',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            UNIQUE (user_id, message_id, kind)
        );
        CREATE INDEX training_feedback_user ON training_feedback (user_id, updated_at);
        CREATE TABLE training_runs (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            source TEXT NOT NULL,
            state TEXT NOT NULL,
            phase TEXT NOT NULL,
            step INTEGER NOT NULL DEFAULT 0,
            total_steps INTEGER NOT NULL DEFAULT 0,
            loss REAL,
            losses TEXT NOT NULL DEFAULT '[]',
            metrics TEXT NOT NULL DEFAULT '{}',
            samples INTEGER NOT NULL DEFAULT 0,
            held_out INTEGER NOT NULL DEFAULT 0,
            watermark TEXT,
            base_model TEXT NOT NULL,
            adapter_id TEXT,
            error TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX training_runs_user ON training_runs (user_id, created_at);
        CREATE TABLE training_adapters (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            run_id TEXT NOT NULL,
            base_model TEXT NOT NULL,
            peft_dir TEXT NOT NULL,
            gguf_path TEXT NOT NULL,
            samples INTEGER NOT NULL,
            metrics TEXT NOT NULL DEFAULT '{}',
            active INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL
        );
        CREATE INDEX training_adapters_user ON training_adapters (user_id, active);
        """
    )
