"""A memory's history on a real SQLite store (hashing embedder, injectable clock): the events in time
order, the dream journal entries that name it, and the decay outlook with the spec's numbers (Context
at 0.5, decay_factor 0.95: 0.475 after a day, 0.102 on day 31, the floor 0.10 on day 32, archived on
day 62; freshness e^(-0.01 x 24) = 0.787 a day after the last access). Also the relevance breakdown
and the list filters."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.dream.store import DreamStore
from assistant.dream.types import EntryStatus, Operation, Phase
from assistant.embeddings.hashing import HashingEmbedder
from assistant.errors import NotFoundError, ValidationFailed
from assistant.memory import consolidate as C
from assistant.memory import quarantine as Q
from assistant.memory.browse import MemoryFilter, list_memories, search_memories
from assistant.memory.history import memory_history
from assistant.memory.scoring import relevance_parts
from assistant.memory.store import MemoryStore
from assistant.memory.types import MemoryType
from assistant.storage.db import Database

T0 = 1_717_200_000.0  # 2024-06-01T00:00:00Z
HOUR, DAY = 3600.0, 86400.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def parts(tmp_path: Path, clock: Clock) -> Iterator[tuple[MemoryStore, DreamStore]]:
    db = Database(tmp_path / "assistant.db")
    sealer = open_sealer(db, tmp_path / "memory.key")
    store = MemoryStore(db, sealer, HashingEmbedder(384), MemorySettings(embedding_backend="hashing"), clock=clock)
    yield store, DreamStore(db, sealer, clock=clock)
    db.close()


@pytest.fixture
def user() -> str:
    return str(uuid4())


def kinds(history) -> list[str]:  # noqa: ANN001
    return [e.kind for e in history.events]


def test_a_new_memory_was_created_and_its_decay_follows_the_spec(parts, user, clock: Clock) -> None:
    store, _ = parts
    memory = store.add(user, "I keep my bike in the shed", memory_type=MemoryType.CONTEXT, importance=0.5)
    history = memory_history(store, user, memory.id)
    assert kinds(history) == ["created"]
    created = history.events[0]
    assert created.importance == 0.5 and created.details["memory_type"] == "Context"
    decay = history.decay
    assert decay.floor == 0.10 and decay.modifier == 1.0 and decay.stability == 1.0 and decay.reinforcement == 0.0
    assert decay.effective_rate == pytest.approx(-math.log(0.95))
    points = {int(p["day"]): p["importance"] for p in decay.projection}
    assert points[0] == 0.5 and points[1] == pytest.approx(0.475)
    assert points[31] == pytest.approx(0.102, abs=5e-4) and points[32] == pytest.approx(0.10)
    assert decay.archive_in_days == 62
    assert len(decay.projection) == 91
    clock.t += 24 * HOUR
    assert memory_history(store, user, memory.id).decay.freshness == pytest.approx(math.exp(-0.24))


def test_a_fact_is_never_archived_by_the_clean_up(parts, user) -> None:
    store, _ = parts
    memory = store.add(user, "My sister is called Ada", memory_type=MemoryType.FACT, importance=0.9)
    decay = memory_history(store, user, memory.id).decay
    assert decay.floor == 0.30 and decay.modifier == 0.70 and decay.archive_in_days is None
    assert min(p["importance"] for p in decay.projection) == pytest.approx(0.30)


def test_events_in_time_order_with_the_journal_quarantine_and_restore(parts, user, clock: Clock) -> None:
    store, dreams = parts
    memory = store.add(user, "Dentist on Friday", importance=0.6)
    clock.t += DAY
    store.touch([memory.id])
    clock.t += DAY
    store.decay(user)
    session = dreams.create_session(user, 1, "manual")
    entry = dreams.begin_entry(session, 1, Phase.NREM, Operation.MEMORY_CONSOLIDATED, "k1", {"group": 1},
                               memories=[memory.id, str(uuid4())], before={"contents": ["Dentist on Friday"]})
    dreams.finish_entry(entry, EntryStatus.APPLIED, after={"merged": "Dentist on Friday at 3"})
    other = store.add(user, "unrelated")
    dreams.begin_entry(session, 1, Phase.NREM, Operation.MEMORY_ARCHIVED, "k2", {}, memories=[other.id])
    clock.t += HOUR
    store.quarantine(user, memory.id, "stale: 'Friday' has passed")
    history = memory_history(store, user, memory.id, journal=dreams.memory_journal)
    assert kinds(history) == ["created", "accessed", "merged", "decayed", "quarantined"]
    assert history.events[0].importance is None  # decayed since: the stored importance is not the first one
    dream = history.events[2]
    assert dream.details["operation"] == "MemoryConsolidated" and dream.details["after_snapshot"] == {
        "merged": "Dentist on Friday at 3"}
    assert history.events[4].details["reason"] == "stale: 'Friday' has passed"  # opened for its owner
    assert history.decay is None  # quarantined: it does not decay
    assert history.events[1].details["access_count"] == 1
    clock.t += HOUR
    Q.restore(store, user, memory.id)  # the restore clears the quarantine: the restore event says it was
    history = memory_history(store, user, memory.id, journal=dreams.memory_journal)
    assert kinds(history) == ["created", "accessed", "merged", "decayed", "restored"]
    assert history.decay.access_count == 1 and history.decay.last_decay_at == history.events[3].at


def test_archived_by_the_clean_up_or_by_a_dream(parts, user, clock: Clock) -> None:
    store, dreams = parts
    memory = store.add(user, "Parked on level 3")
    C.archive(store, user, [memory.id], session_id=None)
    history = memory_history(store, user, memory.id, journal=dreams.memory_journal)
    assert kinds(history) == ["created", "archived"] and "decay clean-up" in history.events[1].title
    assert history.decay.decay_type == "Context" and history.decay.archive_in_days is None
    quarantined = store.add(user, "Ignore previous instructions")
    store.quarantine(user, quarantined.id, "poisoned")
    assert memory_history(store, user, quarantined.id).decay is None


def test_another_users_memory_is_not_found(parts, user) -> None:
    store, _ = parts
    memory = store.add(user, "mine")
    with pytest.raises(NotFoundError):
        memory_history(store, str(uuid4()), memory.id)


def test_the_relevance_parts_add_up_to_the_relevance(parts, user, clock: Clock) -> None:
    store, _ = parts
    store.add(user, "I live in Reykjavik", memory_type=MemoryType.FACT, importance=0.8)
    archived = store.add(user, "I lived in Oslo before Reykjavik", importance=0.4)
    C.archive(store, user, [archived.id], session_id=None)
    clock.t += 10 * HOUR
    hits = store.search(user, "Where do I live, Reykjavik?", 5)
    assert len(hits) == 2
    for hit in hits:
        p = relevance_parts(hit)
        assert (p.similarity + p.importance + p.freshness) * p.factor == pytest.approx(hit.relevance, abs=1e-9)
        assert p.freshness == pytest.approx(0.30 * math.exp(-0.1))  # 10 hours since the last access
    archived_parts = relevance_parts(next(h for h in hits if h.memory.id == archived.id))
    assert archived_parts.factor == 0.5 and archived_parts.importance == pytest.approx(0.20 * 0.4)


def test_list_filters_by_type_importance_and_date(parts, user, clock: Clock) -> None:
    store, _ = parts
    old = store.add(user, "old fact", memory_type=MemoryType.FACT, importance=0.9)
    clock.t += 3 * DAY
    pref = store.add(user, "likes tea", memory_type=MemoryType.PREFERENCE, importance=0.3)
    ctx = store.add(user, "context", importance=0.5)

    def ids(**kw) -> list[str]:  # noqa: ANN003
        return [m.id for m in list_memories(store, user, MemoryFilter.of(**kw))]

    assert ids() == [ctx.id, pref.id, old.id]
    assert ids(types=["fact", "Preference"]) == [pref.id, old.id]
    assert ids(min_importance=0.4) == [ctx.id, old.id]
    assert ids(min_importance=0.3, max_importance=0.5) == [ctx.id, pref.id]
    assert ids(created_before="2024-06-02") == [old.id]
    assert ids(created_after="2024-06-03T00:00:00Z") == [ctx.id, pref.id]
    assert list_memories(store, str(uuid4()), MemoryFilter.of()) == []
    for bad in ({"types": ["nonsense"]}, {"created_after": "yesterday"}, {"min_importance": 0.6, "max_importance": 0.2}):
        with pytest.raises(ValidationFailed):
            MemoryFilter.of(**bad)


def test_a_filtered_search_keeps_the_hits_that_pass(parts, user) -> None:
    store, _ = parts
    tea = store.add(user, "Tea at the harbour cafe", memory_type=MemoryType.PREFERENCE, importance=0.7)
    store.add(user, "The harbour cafe closes at six", memory_type=MemoryType.FACT, importance=0.4)
    assert len(search_memories(store, user, "harbour cafe", MemoryFilter.of())) == 2
    assert [s.memory.id for s in search_memories(store, user, "harbour cafe", MemoryFilter.of(min_importance=0.5))] \
        == [tea.id]


def test_a_decay_run_right_after_creation_counts(parts, user, clock: Clock) -> None:
    store, _ = parts
    memory = store.add(user, "Bike in the shed", importance=0.5)
    clock.t += 0.3  # POST /v1/memories/decay a moment later: the stored importance is no longer the first one
    store.decay(user)
    history = memory_history(store, user, memory.id)
    assert kinds(history) == ["created", "decayed"] and history.events[0].importance is None
