"""The SQLite database: one file, WAL mode, sqlite-vec loaded, migrations applied on open.

apsw is the driver because Python's built-in ``sqlite3`` on this platform cannot load extensions,
and apsw ships a current SQLite (3.5x) with extension loading enabled. One connection writes; a
re-entrant lock serialises its transactions so threads never interleave statements of one.

Reads (``query``, ``one``, ``scalar``) outside a transaction go to a read-only connection of the
calling thread: in WAL mode readers never wait for the writer nor for each other, so fifty clients
listing memories do not queue behind one lock (and neither does the event loop, which looks up API
keys). Each read runs to its end, so the next one starts a fresh snapshot and sees every committed
write. Inside a transaction, and for statements that write (``... RETURNING``), the writer answers.
Several reads that must agree with each other (nodes and the edges between them) run inside
:meth:`Database.consistent`: one read transaction, so a write committed between them is not half seen.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw

from assistant.errors import ServiceUnavailableError, StorageError
from assistant.storage.migrations import migrate as run_migrations

Params = Sequence[Any] | dict[str, Any]
READER_CACHE_KIB = 512  # page cache of each thread's read connection (SQLite's default is 2 MiB)


class StorageFullError(ServiceUnavailableError):
    """The disk (or the database's size limit) is full: the statement was rolled back, nothing of it
    was stored. 503: it works again once space is freed."""


@contextmanager
def _full_disk(path: Path | None) -> Iterator[None]:
    try:
        yield
    except apsw.FullError:
        where = f" ({path.parent})" if path is not None else ""
        raise StorageFullError(f"the disk holding the database is full{where}: the change was not stored; "
                               "free some space and try again") from None


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
        self._local = threading.local()  # per thread: its read connection, its transaction depth
        # weak: a thread's reader closes when the thread ends (AnyIO retires idle workers)
        self._readers: weakref.WeakSet[apsw.Connection] = weakref.WeakSet()
        self._readers_lock = threading.Lock()
        self._load_vec_in_readers = load_vec
        self._closed = False
        self._conn.set_busy_timeout(5000)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self.vec_version: str | None = None
        if load_vec:
            self._load_vec()
        if migrate:
            run_migrations(self)

    def _load_vec(self, conn: apsw.Connection | None = None) -> None:
        import sqlite_vec

        target = conn or self._conn
        target.enable_load_extension(True)
        target.load_extension(sqlite_vec.loadable_path())
        target.enable_load_extension(False)
        if conn is None:
            self.vec_version = self.scalar("SELECT vec_version()")

    def _reader(self) -> apsw.Connection | None:
        """This thread's read-only connection; None where reads must use the writer (an in-memory
        database, inside a transaction of this thread, after close)."""
        if self.path is None or self._closed or getattr(self._local, "depth", 0):
            return None
        conn = getattr(self._local, "reader", None)
        if conn is None:
            conn = apsw.Connection(str(self.path), flags=apsw.SQLITE_OPEN_READONLY)
            conn.set_busy_timeout(5000)
            conn.execute("PRAGMA foreign_keys=ON")  # what PRAGMA foreign_keys reports
            conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB}")  # one per thread: the OS caches the file
            if self._load_vec_in_readers:
                self._load_vec(conn)
            with self._readers_lock:
                if self._closed:
                    conn.close()
                    return None
                self._readers.add(conn)
            self._local.reader = conn
        return conn

    def _read(self, sql: str, params: Params) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and every row (the statement always runs to its end)."""
        reader = self._reader()
        if reader is not None:
            try:
                return _run(reader, sql, params)
            except apsw.ReadOnlyError:  # a statement that writes: the writer runs it (nothing happened here)
                pass
        with _full_disk(self.path), self._lock:
            return _run(self._conn, sql, params)

    # --- queries ---------------------------------------------------------------------------------

    def execute(self, sql: str, params: Params = ()) -> None:
        with _full_disk(self.path), self._lock:
            self._conn.execute(sql, params)

    def executemany(self, sql: str, rows: Sequence[Params]) -> None:
        with self.transaction():
            self._conn.executemany(sql, rows)

    def query(self, sql: str, params: Params = ()) -> list[dict[str, Any]]:
        names, rows = self._read(sql, params)
        return [dict(zip(names, row, strict=True)) for row in rows]

    def one(self, sql: str, params: Params = ()) -> dict[str, Any] | None:
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params: Params = ()) -> Any:
        _, rows = self._read(sql, params)
        return rows[0][0] if rows else None

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """All statements inside run atomically; an exception rolls them back (a full disk is
        :class:`StorageFullError`, 503)."""
        with _full_disk(self.path), self._lock:
            full: BaseException | None = None
            self._local.depth = getattr(self._local, "depth", 0) + 1
            try:
                with self._conn:
                    try:
                        yield self
                    except (apsw.FullError, StorageFullError) as exc:
                        full = exc
                        raise
            except apsw.SQLError:
                if full is None:
                    raise
                raise full from None  # SQLite already rolled the transaction back itself
            finally:
                self._local.depth -= 1

    @contextmanager
    def consistent(self) -> Iterator[Database]:
        """Reads inside see one state of the database: a write another thread commits meanwhile is seen
        by none of them (a read transaction on this thread's reader; where the writer answers reads, its
        lock is held, which keeps writers out). Nested uses join the outer one."""
        if getattr(self._local, "consistent", 0):
            self._local.consistent += 1
            try:
                yield self
            finally:
                self._local.consistent -= 1
            return
        reader = self._reader()
        self._local.consistent = 1
        try:
            if reader is None:
                with self._lock:
                    yield self
                return
            reader.execute("BEGIN DEFERRED")
            try:
                yield self
            finally:
                reader.execute("COMMIT")  # a read-only transaction: nothing to keep or undo
        finally:
            self._local.consistent = 0

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
        with self._readers_lock:
            self._closed = True
            readers, self._readers = list(self._readers), weakref.WeakSet()
        for reader in readers:
            reader.close()
        with self._lock:
            self._conn.close()


def _run(conn: apsw.Connection, sql: str, params: Params) -> tuple[list[str], list[tuple[Any, ...]]]:
    cursor = conn.execute(sql, params)
    try:
        names = [d[0] for d in cursor.get_description()]
    except apsw.ExecutionCompleteError:  # a statement that returns no columns
        return [], []
    return names, cursor.fetchall()
