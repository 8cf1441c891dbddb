"""Migration m023_explanations: the explanation recorded with each answer (assistant/extended/explain.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m023_explanations(db: Connection) -> None:
    """One explanation per answer, keyed by the answer's message id (deleted with the message), its
    body sealed (it quotes memories, tool arguments and results). Answers stored before this migration
    ran have none: its ``_migrations.applied_at`` is when recording began (the 404's reason)."""
    db.executescript(
        """
        CREATE TABLE explanations (
            message_id TEXT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
            user_id TEXT NOT NULL,
            conversation_id TEXT NOT NULL,
            created_ts REAL NOT NULL,
            body_sealed BLOB NOT NULL
        );
        CREATE INDEX explanations_user ON explanations (user_id, created_ts);
        """
    )
