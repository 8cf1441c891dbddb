"""Migration m026_precache: precache predictions and hits (assistant/extended/precache.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m026_precache(db: Connection) -> None:
    """TODO(m026_precache): create the tables of precache predictions and hits (assistant/extended/precache.py)."""
