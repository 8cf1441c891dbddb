"""Migration m025_red_team: red-team runs and their attacks (assistant/extended/red_team.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m025_red_team(db: Connection) -> None:
    """TODO(m025_red_team): create the tables of red-team runs and their attacks (assistant/extended/red_team.py)."""
