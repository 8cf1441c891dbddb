"""Crash safety of dream mode: a server killed with SIGKILL in the middle of a night leaves memories
consistent, and the next start completes what the journal says was under way.

A child process (tests/integration/dream_crash_dreamer.py) stores near-duplicate pairs and runs a
dream that consolidates them; the parent kills it after some operations. Then build_services opens
the data directory as a restarted server does and ``DreamService.recover`` runs: the interrupted
session is failed with the reason, no journal entry is left pending, and every pair is either
untouched (both active, no merged memory) or consolidated exactly once (a merged memory holding both
texts, both originals archived by the session).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.dream.types import EntryStatus, Operation, SessionStatus
from assistant.llm.scripted import ScriptedChatModel
from assistant.memory.types import MemoryType
from assistant.services import build_services
from tests.integration.dream_crash_dreamer import USER, settings_for

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAIRS = 120


def dream_and_kill(data_dir: Path, ops_before_kill: int) -> int:
    child = subprocess.Popen([sys.executable, "-m", "tests.integration.dream_crash_dreamer", str(data_dir),
                              str(PAIRS)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = 0
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        while seen < ops_before_kill:
            line = child.stdout.readline()
            assert line.startswith("op "), f"the dream stopped early: {line!r} {child.stderr.read()}"
            seen += 1
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=60)
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return seen


@pytest.mark.parametrize("ops_before_kill", [1, 37])
def test_a_night_killed_mid_consolidation_leaves_memories_consistent(tmp_path: Path, ops_before_kill: int) -> None:
    data_dir = tmp_path / "data"
    dream_and_kill(data_dir, ops_before_kill)
    services = build_services(settings_for(data_dir), chat_model=ScriptedChatModel())
    try:
        assert services.db.scalar("PRAGMA integrity_check") == "ok"
        [failed] = services.dream.recover()
        assert failed.status is SessionStatus.FAILED
        assert failed.reason.startswith("interrupted by a server restart during cycle 1 (nrem)")
        entries, total = services.dream.journal(USER, failed.id, limit=1000)
        assert total >= ops_before_kill and not [e for e in entries if e.status is EntryStatus.PENDING]
        consolidations = [e for e in entries if e.operation is Operation.MEMORY_CONSOLIDATED]
        assert all(e.status is EntryStatus.APPLIED for e in consolidations)
        memories = {m.id: m for m in services.memory.list(USER, limit=10_000)}
        merged_from = {e.details["memory_id"]: e.details["merged_from"] for e in consolidations}
        assert len(memories) == 2 * PAIRS + len(merged_from)  # one merged memory per consolidation, no more
        for merged_id, sources in merged_from.items():
            merged = memories[merged_id]
            assert merged.memory_type is not MemoryType.ARCHIVED
            for source in sources:
                original = memories[source]
                assert original.memory_type is MemoryType.ARCHIVED and original.archived_by_session == failed.id
                assert original.content.rstrip(".") in merged.content
        consolidated = {s for sources in merged_from.values() for s in sources}
        untouched = [m for m in memories.values() if m.id not in consolidated and m.id not in merged_from]
        assert all(m.memory_type is not MemoryType.ARCHIVED for m in untouched)
        assert len(untouched) == 2 * PAIRS - len(consolidated)
    finally:
        services.close()
