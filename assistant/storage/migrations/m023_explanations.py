"""Migration m023_explanations: the explanation recorded with each answer (assistant/extended/explain.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m023_explanations(db: Connection) -> None:
    """TODO(m023_explanations): create the tables of the explanation recorded with each answer (assistant/extended/explain.py)."""
