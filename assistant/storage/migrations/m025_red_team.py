"""Migration m025_red_team: red-team runs and their attacks (assistant/extended/red_team.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m025_red_team(db: Connection) -> None:
    """``red_team_runs``: one row per red-team run of a user: its status (``running``, ``completed``,
    ``failed``, ``cancelled``), mode (``chat`` or ``defence``), seed, how many attacks were asked for,
    how many were tested and blocked, the defence score (0..100), the engine and model, why it failed,
    and the whole report (per family, bypasses, every attack with the model's answer) sealed in
    ``body_sealed`` (bound to the table, column, run id and owner; assistant/extended/red_team_report.py)."""
    db.executescript(
        """
        CREATE TABLE red_team_runs (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            status TEXT NOT NULL,
            mode TEXT NOT NULL,
            seed INTEGER NOT NULL,
            requested INTEGER NOT NULL,
            attacks_tested INTEGER NOT NULL DEFAULT 0,
            attacks_blocked INTEGER NOT NULL DEFAULT 0,
            defense_score REAL,
            engine TEXT,
            model TEXT,
            error TEXT,
            body_sealed BLOB NOT NULL,
            started_ts REAL NOT NULL,
            finished_ts REAL
        );
        CREATE INDEX red_team_runs_user ON red_team_runs (user_id, status, started_ts);
        """
    )
