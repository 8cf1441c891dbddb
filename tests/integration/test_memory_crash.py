"""Crash safety: a writer killed with SIGKILL in the middle of its writes loses nothing it acknowledged.

A child process (tests/integration/memory_crash_writer.py) stores memories in a loop through
MemoryStore and prints each id only after the store returned. The parent reads a few hundred ids,
kills the child with SIGKILL, then opens the database through build_services: it must open cleanly
(integrity_check ok) and every acknowledged memory must be there and decrypt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest

from assistant.config import Settings
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import DB_FILE, build_services
from tests.integration.memory_crash_writer import content_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def run_and_kill(data_dir: Path, user_id: str, acks_before_kill: int) -> dict[str, int]:
    """Start the writer, read ``acks_before_kill`` acknowledged ids, SIGKILL it; every id it
    printed (also those still in the pipe after the kill) is returned with its number."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.memory_crash_writer", str(data_dir), user_id],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    acked: dict[str, int] = {}
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        while len(acked) < acks_before_kill:
            line = child.stdout.readline()
            if not line:
                break
            memory_id, n = line.split()
            acked[memory_id] = int(n)
        assert child.poll() is None, f"the writer stopped by itself: {child.stderr.read()}"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    for line in child.stdout:  # acknowledged before the kill, still in the pipe
        parts = line.split()
        if len(parts) == 2:
            acked[parts[0]] = int(parts[1])
    child.stdout.close()
    child.stderr.close()
    assert len(acked) >= acks_before_kill
    return acked


def verify(settings: Settings, user_id: str, acked: dict[str, int]) -> int:
    services = build_services(settings, chat_model=ScriptedChatModel())
    try:
        assert services.db.scalar("PRAGMA integrity_check") == "ok"
        assert services.db.query("PRAGMA foreign_key_check") == []
        store = services.memory
        for memory_id, n in acked.items():
            memory = store.get(user_id, memory_id)
            assert memory.content == content_of(n)
            assert memory.summary == f"summary {n}"
            assert memory.tags == [f"n{n}"]
        stored = store.count(user_id)
        assert stored >= len(acked)
        # the keyword index agrees with the rows that survived
        assert services.db.scalar(
            "SELECT count(*) FROM memory_terms WHERE memory_rowid NOT IN (SELECT rowid FROM memories)"
        ) == 0
        # a sample of the acknowledged memories is found by search too
        some = sorted(acked.items(), key=lambda kv: kv[1])[-1]
        found = store.search(user_id, content_of(some[1]), limit=3)
        assert some[0] in [s.memory.id for s in found]
        # and the recovered store takes new writes
        store.add(user_id, "written after the crash")
        return stored + 1
    finally:
        services.close()


def test_sigkill_mid_writes_loses_no_acknowledged_memory(make_settings: Callable[..., Settings], tmp_path: Path) -> None:
    settings = make_settings()  # the hashing embedder, the data directory under tmp_path
    data_dir = settings.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    user_id = str(uuid4())
    all_acked: dict[str, int] = {}
    for round_number, acks in enumerate((300, 250, 400)):
        acked = run_and_kill(data_dir, user_id, acks)
        assert not set(acked) & set(all_acked)
        all_acked.update(acked)
        assert (data_dir / "memory.key").exists()
        if round_number == 0:
            # the kill left the WAL behind: recovery is really exercised
            assert (data_dir / (DB_FILE + "-wal")).exists()
        stored = verify(settings, user_id, all_acked)
        assert stored >= len(all_acked) + round_number + 1
