"""The SQLite database: one file, WAL mode, sqlite-vec loaded, migrations applied on open.

apsw is the driver because Python's built-in ``sqlite3`` on this platform cannot load extensions,
and apsw ships a current SQLite (3.5x) with extension loading enabled. One connection is shared;
a re-entrant lock serialises transactions so threads never interleave statements of one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from assistant.errors import StorageError
from assistant.storage.migrations import migrate as run_migrations

Params = Sequence[Any] | dict[str, Any]


class Database:
    """A thin, thread-safe wrapper over one apsw connection."""

    def __init__(self, path: Path | str, *, load_vec: bool = True, migrate: bool = True):
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = apsw.Connection(str(path))
        except apsw.Error as exc:  # pragma: no cover - depends on the file system
            raise StorageError(f"cannot open database {path}: {exc}") from exc
        self._lock = threading.RLock()
        self._conn.set_busy_timeout(5000)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self.vec_version: str | None = None
        if load_vec:
            self._load_vec()
        if migrate:
            run_migrations(self)

    def _load_vec(self) -> None:
        import sqlite_vec

        self._conn.enable_load_extension(True)
        self._conn.load_extension(sqlite_vec.loadable_path())
        self._conn.enable_load_extension(False)
        self.vec_version = self.scalar("SELECT vec_version()")

    # --- queries ---------------------------------------------------------------------------------

    def execute(self, sql: str, params: Params = ()) -> None:
        with self._lock:
            self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(sql, rows)

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        with self._lock:
            cursor = self._conn.execute(sql, params)
            try:
                names = [d[0] for d in cursor.get_description()]
            except apsw.ExecutionCompleteError:  # a statement that returns no columns
                return []
            rows = cursor.fetchall()
        return [dict(zip(names, row, strict=True)) for row in rows]

    def one(self, sql: str, params: Params = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        with self._lock:
            row = self._conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """All statements inside run atomically; an exception rolls them back."""
        with self._lock, self._conn:
            yield self

    def executescript(self, sql: str) -> None:
        with self._lock:
            self._conn.execute(sql)

    # --- introspection ---------------------------------------------------------------------------

    def columns(self, table: str) -> list[str]:
        return [row["name"] for row in self.query(f"PRAGMA table_info({table})")]

    def tables(self) -> list[str]:
        return [
            r["name"]
            for r in self.query("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]

    def size_bytes(self) -> int:
        """Size on disk: the database file plus its WAL and shared-memory files."""
        if self.path is None:
            return int(self.scalar("PRAGMA page_count") * self.scalar("PRAGMA page_size"))
        total = 0
        for suffix in ("", "-wal", "-shm"):
            candidate = self.path.with_name(self.path.name + suffix)
            if candidate.exists():
                total += candidate.stat().st_size
        return total

    def ping(self) -> bool:
        return self.scalar("SELECT 1") == 1

    def close(self) -> None:
        with self._lock:
            self._conn.close()
