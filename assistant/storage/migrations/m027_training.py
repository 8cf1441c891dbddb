"""Migration m027_training: feedback samples, training runs and adapters (assistant/learning/feedback.py, runs.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m027_training(db: Connection) -> None:
    """TODO(helper): the tables of feedback samples, training runs and adapters (assistant/learning/feedback.py, runs.py)."""
    db.executescript("")
