"""Crash safety of the served app: SIGKILL during concurrent HTTP writes loses nothing acknowledged.

`assistant serve` runs in a subprocess (benchmarks/_served.py: temporary data directory and config,
the scripted engine, the hashing embedder so writes are fast). Sixteen client threads send 1,000
writes over HTTP — memories, snippets and catalog entries in turn, each with a unique number in its
text — and note every write answered 2xx. Once ``KILL_AFTER`` writes were acknowledged the server
gets SIGKILL (no shutdown code runs); the writes still in flight fail. The database file then
passes ``PRAGMA integrity_check`` and ``foreign_key_check``; the server starts again on the same
data directory, and every acknowledged write is there, as written, through the API. The recovered
server takes new writes. (tests/integration/test_memory_crash.py does the same below HTTP, for the
memory store alone.)
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import apsw
import httpx
import pytest

from benchmarks._served import ServedApp

pytestmark = pytest.mark.integration

WRITES = 1000
CLIENTS = 16
KILL_AFTER = 400
# Catalog changes need an admin key (roles on keys); the key is made with the CLI before the start.
KEY_ARGS = ("--role", "admin")
KINDS = ("memory", "snippet", "catalog")


def request_for(n: int) -> tuple[str, str, dict]:
    kind = KINDS[n % 3]
    if kind == "memory":
        return kind, "/v1/memories", {"content": f"crash memory {n}: the fox {n * 7919 % 1000}",
                                      "summary": f"summary {n}", "tags": [f"n{n}"]}
    if kind == "snippet":
        return kind, "/v1/snippets", {"title": f"crash snippet {n}", "content": f"snippet body {n}"}
    return kind, "/v1/commands/catalog", {"name": f"crash-entry-{n}", "description": f"entry {n}",
                                          "command": f"echo {n}", "category": "system", "risk_level": "low",
                                          "os": "any"}


class Writer:
    """Sends the writes from a pool of threads; SIGKILLs the server after ``kill_after`` acks."""

    def __init__(self, app: ServedApp, kill_after: int):
        self.app = app
        self.kill_after = kill_after
        self.acked: dict[int, tuple[str, str]] = {}  # n -> (kind, id)
        self.failed = 0
        self.unexpected: list[str] = []
        self.lock = threading.Lock()
        self.killed = threading.Event()
        self.local = threading.local()

    def client(self) -> httpx.Client:
        if not hasattr(self.local, "client"):
            self.local.client = httpx.Client(base_url=self.app.base_url, headers=self.app.headers, timeout=30)
        return self.local.client

    def write(self, n: int) -> None:
        kind, path, body = request_for(n)
        try:
            response = self.client().post(path, json=body)
        except httpx.HTTPError:  # the server died under this request: not acknowledged
            with self.lock:
                self.failed += 1
            return
        with self.lock:
            if 200 <= response.status_code < 300:
                self.acked[n] = (kind, response.json()["id"])
                if len(self.acked) >= self.kill_after and not self.killed.is_set():
                    self.killed.set()
                    self.app.kill()
            else:
                self.unexpected.append(f"{path} {response.status_code} {response.text[:200]}")

    def run(self, writes: int) -> None:
        with ThreadPoolExecutor(CLIENTS, thread_name_prefix="writer") as pool:
            list(pool.map(self.write, range(writes)))


def check_file(db_path: Path) -> None:
    """The database after the kill, opened as SQLite would be by the next start (WAL recovered)."""
    conn = apsw.Connection(str(db_path))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        conn.close()


def verify(app: ServedApp, acked: dict[int, tuple[str, str]]) -> None:
    with httpx.Client(base_url=app.base_url, headers=app.headers, timeout=30) as client:
        for n, (kind, item_id) in sorted(acked.items()):
            _, path, body = request_for(n)
            response = client.get(f"{path}/{item_id}")
            assert response.status_code == 200, f"acknowledged {kind} {n} ({item_id}) is gone: {response.text}"
            stored = response.json()
            if kind == "memory":
                assert (stored["content"], stored["summary"], stored["tags"]) == (
                    body["content"], body["summary"], body["tags"])
            elif kind == "snippet":
                assert (stored["title"], stored["content"]) == (body["title"], body["content"])
            else:
                assert (stored["name"], stored["command"]) == (body["name"], body["command"])
        # the recovered server takes new writes of each kind
        for n in (WRITES, WRITES + 1, WRITES + 2):
            _, path, body = request_for(n)
            assert client.post(path, json=body).status_code == 201


def test_sigkill_during_concurrent_http_writes_loses_no_acknowledged_write(tmp_path: Path) -> None:
    app = ServedApp(tmp_path, {"memory": {"embedding_backend": "hashing"}}, key_args=KEY_ARGS)
    writer = Writer(app, KILL_AFTER)
    app.start()
    try:
        writer.run(WRITES)
    finally:
        app.kill()
    assert writer.unexpected == []
    assert writer.killed.is_set(), f"only {len(writer.acked)} writes were acknowledged"
    assert len(writer.acked) >= KILL_AFTER
    assert {kind for kind, _ in writer.acked.values()} == set(KINDS)
    assert len(writer.acked) + writer.failed == WRITES  # every write was answered or failed with the server
    assert writer.failed > 0  # the kill really came in the middle
    check_file(app.data_dir / "assistant.db")
    kinds = {kind: sum(1 for k, _ in writer.acked.values() if k == kind) for kind in KINDS}
    print(f"\n{len(writer.acked)} of {WRITES} writes acknowledged before/at the SIGKILL {kinds}, "
          f"{writer.failed} failed with it")
    app.start()  # again, on the same data directory
    try:
        verify(app, writer.acked)
    finally:
        app.stop()
    check_file(app.data_dir / "assistant.db")
