"""Migration m026_precache: precache predictions and hits (assistant/extended/precache.py).

Only statistics: a predicted query is stored as a keyed digest of its canonical form (``query_hash``,
:meth:`assistant.crypto.Sealer.token`) and its wording sealed (``query_sealed``, bound to the table,
column, row and user); the precached retrievals and tool results themselves live in memory only.
"""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m026_precache(db: Connection) -> None:
    """``precache_predictions``: one row per (user, predicted query) with its latest probability and slot and
    its hits; ``precache_stats``: per user, the lookups answered from the precache or not, and the time saved."""
    db.executescript(
        """
        CREATE TABLE precache_predictions (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            query_hash TEXT NOT NULL,
            query_sealed BLOB NOT NULL,
            probability REAL NOT NULL,
            slot TEXT NOT NULL,
            days_asked INTEGER NOT NULL,
            active_days INTEGER NOT NULL,
            first_predicted_at TEXT NOT NULL,
            predicted_at TEXT NOT NULL,
            times_predicted INTEGER NOT NULL DEFAULT 1,
            refreshed_at TEXT,
            retrieval_ms REAL,
            hits INTEGER NOT NULL DEFAULT 0,
            saved_ms REAL NOT NULL DEFAULT 0,
            UNIQUE (user_id, query_hash)
        );
        CREATE INDEX precache_predictions_user ON precache_predictions(user_id, predicted_at);
        CREATE TABLE precache_stats (
            user_id TEXT PRIMARY KEY,
            hits INTEGER NOT NULL DEFAULT 0,
            misses INTEGER NOT NULL DEFAULT 0,
            retrieval_ms REAL NOT NULL DEFAULT 0,
            lookup_ms REAL NOT NULL DEFAULT 0,
            tool_hits INTEGER NOT NULL DEFAULT 0,
            tool_saved_ms REAL NOT NULL DEFAULT 0,
            updated_at TEXT NOT NULL
        );
        """
    )
