"""The SQLite wrapper: WAL mode, sqlite-vec loaded, queries, transactions, size."""

from __future__ import annotations

import struct
import threading
from pathlib import Path

import pytest

from assistant.storage.db import Database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "test.db")
    yield database
    database.close()


def test_wal_mode_is_on(db: Database) -> None:
    assert db.scalar("PRAGMA journal_mode") == "wal"


def test_foreign_keys_are_on(db: Database) -> None:
    assert db.scalar("PRAGMA foreign_keys") == 1


def test_sqlite_vec_is_loaded(db: Database) -> None:
    assert db.vec_version is not None
    assert db.vec_version.startswith("v")
    assert db.scalar("SELECT vec_distance_l2('[1, 2, 3]', '[1, 2, 5]')") == pytest.approx(2.0)


def test_vec0_virtual_table_knn(db: Database) -> None:
    db.execute("CREATE VIRTUAL TABLE items USING vec0(embedding float[3])")
    vectors = {1: [0.0, 0.0, 1.0], 2: [1.0, 0.0, 0.0], 3: [0.9, 0.1, 0.0]}
    for rowid, vector in vectors.items():
        db.execute("INSERT INTO items (rowid, embedding) VALUES (?, ?)", (rowid, struct.pack("3f", *vector)))
    rows = db.query(
        "SELECT rowid, distance FROM items WHERE embedding MATCH ? ORDER BY distance LIMIT 2",
        (struct.pack("3f", 1.0, 0.0, 0.0),),
    )
    assert [r["rowid"] for r in rows] == [2, 3]
    assert rows[0]["distance"] == pytest.approx(0.0)


def test_without_vec_the_functions_are_absent(tmp_path: Path) -> None:
    plain = Database(tmp_path / "plain.db", load_vec=False, migrate=False)
    try:
        assert plain.vec_version is None
        with pytest.raises(Exception, match="vec_version"):
            plain.scalar("SELECT vec_version()")
    finally:
        plain.close()


def test_query_one_scalar(db: Database) -> None:
    db.execute("CREATE TABLE t (a INTEGER, b TEXT)")
    db.executemany("INSERT INTO t VALUES (?, ?)", [(1, "x"), (2, "y")])
    assert db.query("SELECT a, b FROM t ORDER BY a") == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert db.one("SELECT b FROM t WHERE a = ?", (2,)) == {"b": "y"}
    assert db.one("SELECT b FROM t WHERE a = ?", (3,)) is None
    assert db.scalar("SELECT count(*) FROM t") == 2
    assert db.scalar("SELECT a FROM t WHERE a = 99") is None
    assert db.query("UPDATE t SET b = 'z'") == []
    assert db.query("SELECT * FROM t WHERE a = :a", {"a": 1}) == [{"a": 1, "b": "z"}]


def test_transaction_rolls_back_on_error(db: Database) -> None:
    db.execute("CREATE TABLE t (a INTEGER)")
    with pytest.raises(RuntimeError):
        with db.transaction() as tx:
            tx.execute("INSERT INTO t VALUES (1)")
            raise RuntimeError("abort")
    assert db.scalar("SELECT count(*) FROM t") == 0
    with db.transaction() as tx:
        tx.execute("INSERT INTO t VALUES (1)")
    assert db.scalar("SELECT count(*) FROM t") == 1


def test_nested_transactions(db: Database) -> None:
    db.execute("CREATE TABLE t (a INTEGER)")
    with db.transaction():
        db.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(ValueError):
            with db.transaction():
                db.execute("INSERT INTO t VALUES (2)")
                raise ValueError
    assert [r["a"] for r in db.query("SELECT a FROM t")] == [1]


def test_threads_share_the_connection(db: Database) -> None:
    db.execute("CREATE TABLE t (a INTEGER)")

    def work(base: int) -> None:
        for i in range(50):
            with db.transaction() as tx:
                tx.execute("INSERT INTO t VALUES (?)", (base + i,))

    threads = [threading.Thread(target=work, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert db.scalar("SELECT count(DISTINCT a) FROM t") == 200


def test_introspection_and_size(db: Database, tmp_path: Path) -> None:
    assert "conversations" in db.tables()
    assert db.columns("meta") == ["key", "value"]
    assert db.size_bytes() > 0
    assert db.size_bytes() >= (tmp_path / "test.db").stat().st_size
    assert db.ping() is True


def test_data_survives_reopening(tmp_path: Path) -> None:
    first = Database(tmp_path / "p.db")
    first.execute("INSERT INTO meta (key, value) VALUES ('k', 'v')")
    first.close()
    second = Database(tmp_path / "p.db")
    try:
        assert second.scalar("SELECT value FROM meta WHERE key = 'k'") == "v"
    finally:
        second.close()


def test_in_memory_database(tmp_path: Path) -> None:
    mem = Database(":memory:")
    try:
        assert mem.path is None
        assert "api_keys" in mem.tables()
        assert mem.size_bytes() > 0
    finally:
        mem.close()


def test_parent_directories_are_created(tmp_path: Path) -> None:
    nested = Database(tmp_path / "a" / "b" / "c.db")
    try:
        assert (tmp_path / "a" / "b" / "c.db").is_file()
    finally:
        nested.close()


def test_a_full_database_is_a_503_and_keeps_what_it_had(tmp_path) -> None:  # noqa: ANN001
    """SQLITE_FULL (a full disk; here the page limit) rolls the statement back and says so."""
    import pytest

    from assistant.errors import ServiceUnavailableError
    from assistant.storage.db import Database, StorageFullError

    db = Database(tmp_path / "full.db", load_vec=False, migrate=False)
    try:
        db.execute("CREATE TABLE t (v TEXT)")
        db.execute("INSERT INTO t VALUES ('kept')")
        db.execute(f"PRAGMA max_page_count = {db.scalar('PRAGMA page_count') + 2}")
        with pytest.raises(StorageFullError, match="full") as caught:
            with db.transaction():
                for _ in range(100):
                    db.execute("INSERT INTO t VALUES (?)", ("x" * 4000,))
        assert isinstance(caught.value, ServiceUnavailableError)
        assert db.query("SELECT v FROM t") == [{"v": "kept"}]  # the whole transaction rolled back
        with pytest.raises(StorageFullError):
            db.executemany("INSERT INTO t VALUES (?)", [("y" * 4000,)] * 100)
        assert db.scalar("SELECT count(*) FROM t") == 1
    finally:
        db.close()


def test_reads_use_a_connection_per_thread_and_never_wait_for_the_writer(tmp_path) -> None:  # noqa: ANN001
    import threading

    from assistant.storage.db import Database

    db = Database(tmp_path / "r.db", load_vec=False, migrate=False)
    try:
        db.execute("CREATE TABLE t (v INTEGER)")
        db.execute("INSERT INTO t VALUES (1)")
        seen: list[object] = []
        with db.transaction():  # the writer is busy (and holds its lock) in this thread
            db.execute("INSERT INTO t VALUES (2)")
            assert db.scalar("SELECT count(*) FROM t") == 2  # this transaction sees its own write
            reader = threading.Thread(target=lambda: seen.append(db.scalar("SELECT count(*) FROM t")))
            reader.start()
            reader.join(10)
            assert not reader.is_alive(), "a read waited for the writer"
        assert seen == [1]  # the other thread read the committed state, without waiting
        done: list[object] = []
        later = threading.Thread(target=lambda: done.append(db.scalar("SELECT count(*) FROM t")))
        later.start()
        later.join(10)
        assert done == [2]  # a commit is visible to the next read of any thread
        assert db.scalar("SELECT count(*) FROM t") == 2  # also to this thread's reader after its own write
        db.execute("INSERT INTO t VALUES (3)")
        assert db.scalar("SELECT max(v) FROM t") == 3
    finally:
        db.close()


def test_a_writing_statement_through_query_goes_to_the_writer(tmp_path) -> None:  # noqa: ANN001
    from assistant.storage.db import Database

    db = Database(tmp_path / "w.db", load_vec=False, migrate=False)
    try:
        db.execute("CREATE TABLE t (v INTEGER)")
        assert db.query("INSERT INTO t VALUES (7) RETURNING v") == [{"v": 7}]
        assert db.query("DELETE FROM t WHERE v = 7 RETURNING v") == [{"v": 7}]
        assert db.scalar("SELECT count(*) FROM t") == 0
    finally:
        db.close()
    assert db._readers is not None and len(db._readers) == 0  # closed with the database


def test_reads_inside_consistent_see_one_state(tmp_path) -> None:  # noqa: ANN001
    database = Database(tmp_path / "c.db")
    try:
        database.execute("CREATE TABLE t (x INTEGER)")
        database.execute("INSERT INTO t VALUES (1)")

        def write() -> None:
            database.execute("INSERT INTO t VALUES (2)")

        with database.consistent():
            first = database.scalar("SELECT count(*) FROM t")
            writer = threading.Thread(target=write)
            writer.start()
            writer.join()  # committed by another thread between the two reads
            with database.consistent():  # nested: joins the outer state
                inner = database.scalar("SELECT count(*) FROM t")
            second = database.scalar("SELECT count(*) FROM t")
        assert (first, inner, second) == (1, 1, 1)
        assert database.scalar("SELECT count(*) FROM t") == 2  # after the block: the write is seen
    finally:
        database.close()


def test_consistent_inside_a_transaction_and_in_memory(tmp_path) -> None:  # noqa: ANN001
    for database in (Database(":memory:"), Database(tmp_path / "t.db")):
        try:
            database.execute("CREATE TABLE t (x INTEGER)")
            with database.transaction():
                database.execute("INSERT INTO t VALUES (1)")
                with database.consistent():  # the writer answers: its own uncommitted write is seen
                    assert database.scalar("SELECT count(*) FROM t") == 1
            with database.consistent():
                assert database.scalar("SELECT count(*) FROM t") == 1
            database.execute("INSERT INTO t VALUES (2)")  # the read transaction ended with the block
            assert database.scalar("SELECT count(*) FROM t") == 2
        finally:
            database.close()
