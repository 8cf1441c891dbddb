"""Migration m028_optimization: optimisation trials and applied retrieval parameters (assistant/learning/optimize*.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m028_optimization(db: Connection) -> None:
    """TODO(helper): the tables of optimisation trials and applied retrieval parameters (assistant/learning/optimize*.py)."""
    db.executescript("")
