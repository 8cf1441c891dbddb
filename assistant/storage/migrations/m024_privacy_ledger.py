"""Migration m024_privacy_ledger: the privacy budget's ledger (assistant/extended/privacy.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m024_privacy_ledger(db: Connection) -> None:
    """One row per charge to a user's differential-privacy budget: the budget period it falls in
    (``period_start``, epoch seconds of the period's first instant, UTC), the aggregate query's
    name, its mechanism (``laplace`` or ``gaussian``) with its ``parameters`` (JSON: the requested
    epsilon, the sensitivity, the noise multiplier and scale or sigma; enough to rebuild the
    dp-accounting event), the epsilon the accountant charged (its composed epsilon after minus
    before) and the composed epsilon after. Nothing of the user's data is stored (query names and
    mechanism parameters are the code's), so nothing here is sealed."""
    db.executescript(
        """
        CREATE TABLE privacy_ledger (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            period_start REAL NOT NULL,
            query TEXT NOT NULL,
            mechanism TEXT NOT NULL,
            parameters TEXT NOT NULL,
            epsilon_spent REAL NOT NULL,
            composed_epsilon REAL NOT NULL,
            created_ts REAL NOT NULL
        );
        CREATE INDEX privacy_ledger_user ON privacy_ledger (user_id, period_start, created_ts);
        """
    )
