"""DuckDB analytics: append-only request and inference latency history.

Writes are buffered in memory and written in batches by a background thread (every
``flush_interval_secs``, sooner when ``FLUSH_EVERY`` rows wait) or before any read, so recording a
request costs a list append on the hot path: the request middleware calls ``record`` on the event
loop, where a DuckDB write would stall every request in flight (measured: a 256-row
``executemany`` took 0.4 s under load; the batch is now one columnar ``INSERT ... unnest``).
DuckDB was chosen for columnar percentiles and Parquet export that notebooks read directly.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

log = logging.getLogger("assistant.analytics")

FLUSH_EVERY = 256
FLUSH_INTERVAL_SECS = 5.0
_INSERT = (
    "INSERT INTO latency SELECT unnest($1::TIMESTAMPTZ[]), unnest($2::VARCHAR[]), unnest($3::VARCHAR[]), "
    "unnest($4::DOUBLE[]), unnest($5::BOOLEAN[]), unnest($6::INTEGER[])"
)


@dataclass(frozen=True)
class Percentiles:
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    count: int


class Analytics:
    def __init__(self, path: Path | str, flush_interval_secs: float = FLUSH_INTERVAL_SECS):
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = duckdb.connect(str(path))
        self._lock = threading.Lock()  # the DuckDB connection
        self._pending_lock = threading.Lock()  # the buffer only: never held during I/O
        self._pending: list[tuple[datetime, str, str, float, bool, int]] = []
        self._wake = threading.Event()
        self._closed = False
        self._closed_conn = False
        self.flush_interval_secs = flush_interval_secs
        self._conn.execute(
            """
            CREATE TABLE IF NOT EXISTS latency (
                ts TIMESTAMPTZ NOT NULL,
                kind VARCHAR NOT NULL,      -- 'request' or 'inference'
                name VARCHAR NOT NULL,      -- route template or model id
                duration_ms DOUBLE NOT NULL,
                ok BOOLEAN NOT NULL,
                tokens INTEGER NOT NULL DEFAULT 0
            )
            """
        )
        self._flusher = threading.Thread(target=self._flush_loop, name="analytics-flush", daemon=True)
        self._flusher.start()

    def record(self, kind: str, name: str, duration_ms: float, ok: bool = True, tokens: int = 0) -> None:
        """Buffer one row (a list append; the background thread writes it)."""
        row = (datetime.now(UTC), kind, name, float(duration_ms), ok, tokens)
        with self._pending_lock:
            self._pending.append(row)
            full = len(self._pending) >= FLUSH_EVERY
        if full:
            self._wake.set()

    def _flush_loop(self) -> None:
        while not self._closed:
            self._wake.wait(self.flush_interval_secs)
            self._wake.clear()
            if self._closed:
                return
            try:
                self.flush()
            except Exception:  # a failed write loses a batch of latency samples, never the service
                log.exception("writing analytics rows failed")

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        with self._pending_lock:
            rows, self._pending = self._pending, []
        if rows and not self._closed_conn:
            try:
                self._conn.execute(_INSERT, [list(column) for column in zip(*rows, strict=True)])
            except duckdb.Error as exc:  # a full disk: latency samples are dropped, requests go on
                log.warning("dropped %d analytics rows: %s", len(rows), exc)

    def execute(self, sql: str, params: list[object] | None = None) -> list[tuple]:
        """One statement on the DuckDB connection (under its lock), its rows fetched (the signal bus's
        ``signals`` table lives in the same file: :mod:`assistant.observability.signals`)."""
        with self._lock:
            if self._closed_conn:
                raise RuntimeError("the analytics store is closed")
            cursor = self._conn.execute(sql, params or [])
            try:
                return cursor.fetchall()
            except duckdb.InvalidInputError:  # a statement without a result set
                return []

    def percentiles(self, kind: str = "request", since: datetime | None = None) -> Percentiles:
        with self._lock:
            self._flush_locked()
            sql = (
                "SELECT quantile_cont(duration_ms, 0.5), quantile_cont(duration_ms, 0.9), "
                "quantile_cont(duration_ms, 0.99), count(*) FROM latency WHERE kind = ?"
            )
            params: list[object] = [kind]
            if since is not None:
                sql += " AND ts >= ?"
                params.append(since)
            p50, p90, p99, count = self._conn.execute(sql, params).fetchone()
        return Percentiles(p50, p90, p99, int(count))

    def history(self, kind: str | None = None, limit: int = 10_000):
        """Latest rows as a pandas DataFrame (for notebooks and dashboards)."""
        with self._lock:
            self._flush_locked()
            sql = "SELECT * FROM latency"
            params: list[object] = []
            if kind:
                sql += " WHERE kind = ?"
                params.append(kind)
            sql += " ORDER BY ts DESC LIMIT ?"
            params.append(limit)
            return self._conn.execute(sql, params).df()

    def export_parquet(self, path: Path | str) -> Path:
        with self._lock:
            self._flush_locked()
            quoted = str(Path(path)).replace("'", "''")  # COPY takes no parameters: quote the literal
            self._conn.execute(f"COPY latency TO '{quoted}' (FORMAT parquet)")
        return Path(path)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._flusher.join(timeout=30)
        with self._lock:
            self._flush_locked()
            self._closed_conn = True
            self._conn.close()
