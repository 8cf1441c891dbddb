"""DuckDB analytics: append-only request and inference latency history.

Writes are buffered in memory and flushed in batches (or before any read), so recording a request
costs a list append on the hot path. DuckDB was chosen for columnar percentiles and Parquet export
that notebooks read directly.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

FLUSH_EVERY = 256


@dataclass(frozen=True)
class Percentiles:
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None
    count: int


class Analytics:
    def __init__(self, path: Path | str):
        self.path = Path(path) if str(path) != ":memory:" else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = duckdb.connect(str(path))
        self._lock = threading.Lock()
        self._pending: list[tuple[datetime, str, str, float, bool, int]] = []
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

    def record(self, kind: str, name: str, duration_ms: float, ok: bool = True, tokens: int = 0) -> None:
        row = (datetime.now(UTC), kind, name, float(duration_ms), ok, tokens)
        with self._lock:
            self._pending.append(row)
            if len(self._pending) >= FLUSH_EVERY:
                self._flush_locked()

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if self._pending:
            self._conn.executemany("INSERT INTO latency VALUES (?, ?, ?, ?, ?, ?)", self._pending)
            self._pending.clear()

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
        with self._lock:
            self._flush_locked()
            self._conn.close()
