"""A checksum of every table: what "a failed run leaves the database byte-for-byte unchanged" is
checked with (notebook 05's rollback drill, the sanitation tests)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from assistant.storage.db import Database


def table_checksums(db: Database, skip: Iterable[str] = ()) -> dict[str, str]:
    """sha256 of each table's rows, in rowid order (every column, values as stored), by table name;
    ``skip``: tables left out (e.g. ``sanitation_results``, the audit table a failed run appends to)."""
    skipped = set(skip)
    out: dict[str, str] = {}
    for row in db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
                        "ORDER BY name"):
        name = row["name"]
        if name in skipped:
            continue
        digest = hashlib.sha256()
        try:
            rows = db.query(f'SELECT * FROM "{name}" ORDER BY rowid')
        except Exception:  # virtual or WITHOUT ROWID tables: their natural order
            rows = db.query(f'SELECT * FROM "{name}"')
        for r in rows:
            digest.update(repr(sorted(r.items())).encode())
        out[name] = digest.hexdigest()
    return out
