"""DuckDB analytics: percentiles equal numpy's (linear interpolation), flush on read, Parquet export."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pytest

from assistant.storage import analytics as analytics_module
from assistant.storage.analytics import Analytics

VALUES = [12.0, 3.5, 250.0, 40.0, 41.0, 7.25, 1000.0, 99.9, 0.5, 63.0, 18.0]


@pytest.fixture
def analytics(tmp_path: Path) -> Analytics:
    a = Analytics(tmp_path / "analytics.duckdb")
    yield a
    a.close()


def test_percentiles_match_numpy(analytics: Analytics) -> None:
    for v in VALUES:
        analytics.record("request", "/x", v)
    p = analytics.percentiles("request")
    assert p.count == len(VALUES)
    assert p.p50_ms == pytest.approx(np.percentile(VALUES, 50))
    assert p.p90_ms == pytest.approx(np.percentile(VALUES, 90))
    assert p.p99_ms == pytest.approx(np.percentile(VALUES, 99))


def test_percentiles_of_one_to_hundred(analytics: Analytics) -> None:
    for v in range(1, 101):
        analytics.record("request", "/x", float(v))
    p = analytics.percentiles("request")
    assert (p.p50_ms, p.p90_ms, p.p99_ms) == pytest.approx((50.5, 90.1, 99.01))


def test_kinds_are_separate(analytics: Analytics) -> None:
    analytics.record("request", "/x", 10)
    analytics.record("inference", "m", 1000, ok=False, tokens=5)
    assert analytics.percentiles("request").count == 1
    assert analytics.percentiles("inference").p50_ms == 1000


def test_empty_history_has_no_percentiles(analytics: Analytics) -> None:
    p = analytics.percentiles("request")
    assert (p.p50_ms, p.p90_ms, p.p99_ms, p.count) == (None, None, None, 0)


def test_records_are_buffered_and_flushed_on_read(analytics: Analytics, tmp_path: Path) -> None:
    analytics.record("request", "/x", 5.0)
    assert analytics._pending  # buffered, not yet written
    assert analytics._conn.execute("SELECT count(*) FROM latency").fetchone()[0] == 0
    assert analytics.percentiles().count == 1  # a read flushes first
    assert analytics._pending == []


def test_buffer_flushes_itself_when_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(analytics_module, "FLUSH_EVERY", 3)
    a = Analytics(tmp_path / "small.duckdb")
    try:
        for v in (1, 2, 3):
            a.record("request", "/x", v)
        for _ in range(200):  # written by the background thread, soon, without any read
            if not a._pending:
                break
            time.sleep(0.05)
        assert a._pending == []
        with a._lock:
            assert a._conn.execute("SELECT count(*) FROM latency").fetchone()[0] == 3
    finally:
        a.close()


def test_since_filters_by_time(analytics: Analytics) -> None:
    analytics.record("request", "/x", 10)
    future = datetime.now(UTC) + timedelta(hours=1)
    past = datetime.now(UTC) - timedelta(hours=1)
    assert analytics.percentiles("request", since=future).count == 0
    assert analytics.percentiles("request", since=past).count == 1


def test_history_is_a_dataframe(analytics: Analytics) -> None:
    analytics.record("request", "/a", 1.0)
    analytics.record("inference", "model", 2.0, ok=False, tokens=7)
    df = analytics.history()
    assert list(df.columns) == ["ts", "kind", "name", "duration_ms", "ok", "tokens"]
    assert len(df) == 2
    inference = analytics.history("inference")
    assert inference["name"].tolist() == ["model"]
    assert inference["tokens"].tolist() == [7]
    assert inference["ok"].tolist() == [False]
    assert len(analytics.history(limit=1)) == 1


def test_export_parquet_is_readable_by_duckdb(analytics: Analytics, tmp_path: Path) -> None:
    for v in VALUES:
        analytics.record("request", "/x", v)
    out = analytics.export_parquet(tmp_path / "latency.parquet")
    assert out.is_file()
    con = duckdb.connect()
    try:
        count, total = con.execute(f"SELECT count(*), sum(duration_ms) FROM read_parquet('{out}')").fetchone()
    finally:
        con.close()
    assert count == len(VALUES)
    assert total == pytest.approx(sum(VALUES))


def test_data_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "persist.duckdb"
    a = Analytics(path)
    a.record("request", "/x", 42.0)
    a.close()  # close flushes
    b = Analytics(path)
    try:
        assert b.percentiles().p50_ms == 42.0
    finally:
        b.close()


def test_export_parquet_to_a_path_with_a_quote(analytics: Analytics, tmp_path: Path) -> None:
    """Known failure: the path is pasted into the COPY statement inside single quotes, so a
    directory such as ``O'Brien`` breaks the SQL (duckdb ParserException)."""
    directory = tmp_path / "O'Brien"
    directory.mkdir()
    analytics.record("request", "/x", 1.0)
    out = analytics.export_parquet(directory / "latency.parquet")
    assert out.is_file()


def test_record_never_writes_on_the_callers_thread(tmp_path) -> None:  # noqa: ANN001
    """The middleware records on the event loop: a slow or busy DuckDB must not stall it."""
    import threading

    from assistant.storage import analytics as module

    a = Analytics(tmp_path / "busy.duckdb", flush_interval_secs=3600)
    try:
        with a._lock:  # the connection is busy (a long flush or a percentile query elsewhere)
            done = threading.Event()

            def record_many() -> None:
                for i in range(module.FLUSH_EVERY + 10):
                    a.record("request", "/x", float(i))
                done.set()

            threading.Thread(target=record_many).start()
            assert done.wait(10), "record waited for the database"
        for _ in range(200):  # the background thread writes the full batch without any read
            if not a._pending:
                break
            time.sleep(0.05)
        assert a._pending == []
        assert a.percentiles("request").count == module.FLUSH_EVERY + 10
    finally:
        a.close()
