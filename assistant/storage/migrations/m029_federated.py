"""Migration m029_federated: federated rounds, peers' seen rounds and the rejection log (assistant/learning/federated*.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m029_federated(db: Connection) -> None:
    """TODO(helper): the tables of federated rounds, peers' seen rounds and the rejection log (assistant/learning/federated*.py)."""
    db.executescript("")
