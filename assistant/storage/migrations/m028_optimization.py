"""Migration m028_optimization: optimisation trials and applied retrieval parameters (assistant/learning/optimize*.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m028_optimization(db: Connection) -> None:
    """Runs of retrieval-parameter optimisation, every trial, and the parameters applied per user.

    Only numbers and names: no user text (the questions and memories the objective reads stay sealed
    where they are). The optuna study itself lives in its own SQLite file (``data_dir/optuna.db``)."""
    db.executescript(
        """
        CREATE TABLE optimization_runs (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            study TEXT NOT NULL,
            source TEXT NOT NULL,
            state TEXT NOT NULL,
            trials_total INTEGER NOT NULL,
            trials_done INTEGER NOT NULL DEFAULT 0,
            cases_tuning INTEGER NOT NULL DEFAULT 0,
            cases_validation INTEGER NOT NULL DEFAULT 0,
            baseline_score REAL,
            baseline_validation REAL,
            best_score REAL,
            best_validation REAL,
            applied_trials INTEGER NOT NULL DEFAULT 0,
            error TEXT,
            started_at TEXT NOT NULL,
            finished_at TEXT
        );
        CREATE INDEX optimization_runs_user ON optimization_runs(user_id, started_at);
        CREATE TABLE optimization_trials (
            user_id TEXT NOT NULL,
            run_id TEXT NOT NULL REFERENCES optimization_runs(id) ON DELETE CASCADE,
            study TEXT NOT NULL,
            number INTEGER NOT NULL,
            params TEXT NOT NULL,
            score REAL,
            validation_score REAL,
            state TEXT NOT NULL,
            applied INTEGER NOT NULL DEFAULT 0,
            created_at TEXT NOT NULL,
            PRIMARY KEY (user_id, study, number)
        );
        CREATE INDEX optimization_trials_run ON optimization_trials(run_id);
        CREATE TABLE optimization_params (
            user_id TEXT PRIMARY KEY,
            params TEXT NOT NULL,
            source TEXT NOT NULL,
            run_id TEXT NOT NULL,
            study TEXT NOT NULL,
            trial_number INTEGER NOT NULL,
            score REAL,
            validation_score REAL,
            applied_at TEXT NOT NULL
        );
        """
    )
