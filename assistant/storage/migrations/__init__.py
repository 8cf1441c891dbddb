"""Named, append-only schema migrations. Never edit one that has shipped: add the next.

Each migration is a function ``mNNN_name(db)`` registered in order with :func:`migration`.
Applied names are recorded in ``_migrations``; :func:`migrate` applies the rest in a transaction
each, so a failure leaves the database at the last good migration.
"""

from __future__ import annotations

from datetime import UTC, datetime

# Registration order is application order: the modules are imported oldest first. A new migration goes
# at the end of the newest module (start a new module when that one nears 500 lines).
from assistant.storage.migrations import (  # noqa: F401 - registers the migrations, in this order
    m001_m012,
    m013_on,
    m023_explanations,  # the extended features, one module each
    m024_privacy_ledger,
    m025_red_team,
    m026_precache,
    m027_training,  # issue 18: learning and sharing
    m028_optimization,
    m029_federated,
    m030_distillation,
)
from assistant.storage.migrations.registry import MIGRATIONS, Connection, Migration, migration

__all__ = ["MIGRATIONS", "Connection", "Migration", "applied", "migrate", "migration"]


def applied(db: Connection) -> list[str]:
    db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    return [r["name"] for r in db.query("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(db: Connection) -> list[str]:
    """Apply every migration not yet applied; returns the names applied now."""
    done = set(applied(db))
    now_applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with db.transaction():
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                (fn.__name__, datetime.now(UTC).isoformat()),
            )
        now_applied.append(fn.__name__)
    return now_applied
