"""Migration m024_privacy_ledger: the privacy budget's ledger (assistant/extended/privacy.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m024_privacy_ledger(db: Connection) -> None:
    """TODO(m024_privacy_ledger): create the tables of the privacy budget's ledger (assistant/extended/privacy.py)."""
