"""NREM with the real parts: the packaged MiniLM embedder, a real SQLite file with encryption on, the
dream service built by ``build_services``. Near-duplicate sentences are consolidated (cosine above
0.85 with MiniLM), unrelated ones are not; exact copies are deduplicated; the merged memory is
found by search, re-embedded by the model, and its text never reaches the database in plaintext."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from assistant.config import Settings
from assistant.dream.types import Operation, SessionStatus
from assistant.memory.types import MemoryType
from assistant.services import DB_FILE, Services

pytestmark = pytest.mark.integration

NEAR = [
    ("I live in Lisbon with my wife and two kids.", "I live in Lisbon with my wife and our two children."),
    ("My dentist appointment is on Tuesday at 3 pm.", "My dentist appointment is on Tuesday at 3pm, don't forget."),
]
UNRELATED = ["My favourite food is sushi.", "I work as a nurse at the city hospital.",
             "The weather was rainy all week.", "I live in Porto."]


@pytest.fixture
def real(make_settings: Callable[..., Settings], make_services: Callable[..., Services]) -> Services:
    settings = make_settings(memory={"embedding_backend": "sentence-transformers"},
                             knowledge_graph={"enabled": False}, dream={"max_cycles": 1})
    services = make_services(settings)
    services.dream.rem_steps = []
    return services


def test_near_duplicates_consolidate_and_unrelated_memories_do_not(real: Services) -> None:
    memory, dream = real.memory, real.dream
    for a, b in NEAR:
        memory.add("u1", a, memory_type="fact")
        memory.add("u1", b)
    for text in UNRELATED:
        memory.add("u1", text)
    memory.add("u1", "i work as a nurse at the city hospital")  # a copy, case and punctuation aside
    session = dream.trigger("u1", background=False)
    assert session.status is SessionStatus.COMPLETED
    assert session.counts["MemoryConsolidated"] == 2 and session.counts["MemoryDeduplicated"] == 1
    entries, _ = dream.journal("u1", session.id, operation=Operation.MEMORY_CONSOLIDATED)
    merged = {memory.get("u1", e.details["memory_id"]).content: e for e in entries}
    assert set(merged) == {f"{a} {b}" for a, b in NEAR}
    live = [m for m in memory.list("u1", limit=100) if m.memory_type is not MemoryType.ARCHIVED]
    assert sorted(m.content for m in live) == sorted([*merged, *UNRELATED])
    for content, entry in merged.items():
        kept = memory.get("u1", entry.details["memory_id"])
        assert kept.memory_type is MemoryType.FACT
        # re-embedded by MiniLM: its own text finds it first
        assert memory.search("u1", content, limit=1, mode="dense")[0].memory.id == kept.id
        for source in entry.details["merged_from"]:
            assert memory.get("u1", source).archived_by_session == session.id
    raw = (real.settings.data_dir / DB_FILE).read_bytes()
    assert b"Lisbon" not in raw and b"dentist" not in raw
    assert dream.trigger("u1", background=False).counts.get("MemoryConsolidated", 0) == 0
