"""Hybrid search fusion and its neighbour context (HybridWeights): the memory's own fused score,
the ranking score with the best keyword match of its neighbours in the same conversation, the
neighbours joining the candidates, and what stays untouched (dense and keyword modes, memories
without a conversation, the ``fused`` value the RAG threshold reads).

Real SQLite and sealer; embeddings are given explicitly so that every cosine is known."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import uuid4

import numpy as np
import pytest

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory.scoring import relevance
from assistant.memory.store import HybridWeights, MemoryStore
from assistant.storage.db import Database

DIM = 384
T0 = 1_717_200_000.0


def at_cosine(c: float, axis: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[0] = c
    v[axis] = math.sqrt(1.0 - c * c)
    return v


QUERY = at_cosine(1.0, 1)


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[..., MemoryStore]]:
    opened: list[Database] = []

    def make(memory: dict | None = None, **hybrid: float) -> MemoryStore:
        path = tmp_path / f"s{len(opened)}"
        path.mkdir()
        db = Database(path / "assistant.db")
        opened.append(db)
        return MemoryStore(db, open_sealer(db, path / "memory.key"), HashingEmbedder(DIM),
                           MemorySettings(embedding_backend="hashing", **(memory or {})),
                           hybrid=HybridWeights(**hybrid), clock=lambda: T0)

    yield make
    for db in opened:
        db.close()


@pytest.fixture
def alice() -> str:
    return str(uuid4())


def test_defaults() -> None:
    assert HybridWeights() == HybridWeights(dense=0.6, keyword=0.4, context=0.3)


def add_exchange(store: MemoryStore, user: str) -> dict[str, str]:
    """A question that names the query's word, its answer that does not, and an unrelated memory
    with the answer's cosine but no conversation."""
    ids = {}
    ids["question"] = store.add(user, "Which violin teacher should I call?", conversation_id="c1",
                                embedding=at_cosine(0.2, 10)).id
    ids["answer"] = store.add(user, "Try Mrs Okafor, she is patient and cheap.", conversation_id="c1",
                              embedding=at_cosine(0.5, 11)).id
    ids["isolated"] = store.add(user, "The boiler was serviced in March.", embedding=at_cosine(0.5, 12)).id
    return ids


def test_a_neighbours_keyword_match_lifts_the_answer(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store()
    ids = add_exchange(store, alice)
    found = store.search(alice, "violin", limit=10, query_vector=QUERY, rank_by="similarity")
    by_id = {s.memory.id: s for s in found}
    answer, question, isolated = by_id[ids["answer"]], by_id[ids["question"]], by_id[ids["isolated"]]
    # own scores: fused = 0.6 cos + 0.4 kw/best
    assert question.keyword == pytest.approx(1.0)
    assert question.fused == pytest.approx(0.6 * 0.2 + 0.4 * 1.0, abs=1e-6)
    assert answer.keyword == 0.0 and answer.fused == pytest.approx(0.3, abs=1e-6)
    assert isolated.fused == pytest.approx(0.3, abs=1e-6)
    # ranking: fused + 0.3 x the best keyword score of the neighbours
    ranked_answer = 0.3 + 0.3 * 1.0
    ranked_question = 0.52  # its neighbour matches no keyword
    assert [s.memory.id for s in found] == [ids["answer"], ids["question"], ids["isolated"]]
    assert answer.relevance == pytest.approx(float(relevance(ranked_answer, 0.5, 0.0)), abs=1e-6)
    assert question.relevance == pytest.approx(float(relevance(ranked_question, 0.5, 0.0)), abs=1e-6)
    # a memory without a conversation keeps its own score too
    assert isolated.relevance == pytest.approx(float(relevance(0.3, 0.5, 0.0)), abs=1e-6)


def test_context_zero_is_plain_weighted_fusion(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store(context=0.0)
    ids = add_exchange(store, alice)
    found = store.search(alice, "violin", limit=10, query_vector=QUERY, rank_by="similarity")
    assert found[0].memory.id == ids["question"]
    for s in found:
        assert s.relevance == pytest.approx(float(relevance(s.fused, 0.5, 0.0)), abs=1e-6)


@pytest.mark.parametrize("mode", ["dense", "keyword"])
def test_single_signal_modes_ignore_the_context(make_store: Callable[..., MemoryStore], alice: str,
                                                mode: str) -> None:
    store = make_store()
    add_exchange(store, alice)
    for s in store.search(alice, "violin", limit=10, query_vector=QUERY, mode=mode, rank_by="similarity"):
        own = s.similarity if mode == "dense" else s.keyword
        assert s.fused == pytest.approx(own, abs=1e-6)
        assert s.relevance == pytest.approx(float(relevance(own, 0.5, 0.0)), abs=1e-6)


def test_a_neighbour_outside_the_pool_becomes_a_candidate(make_store: Callable[..., MemoryStore],
                                                          alice: str) -> None:
    store = make_store()
    store.add(alice, "Which violin teacher should I call?", conversation_id="c1", embedding=at_cosine(0.0, 10))
    answer = store.add(alice, "Try Mrs Okafor, she is patient.", conversation_id="c1", embedding=at_cosine(0.0, 11))
    for n in range(30):  # closer by cosine than both, no keyword
        store.add(alice, f"filler note {n}", embedding=at_cosine(0.4, 20 + n))
    found = store.search(alice, "violin", limit=50, query_vector=QUERY, candidates=5, rank_by="similarity")
    assert answer.id in {s.memory.id for s in found}
    off = make_store(context=0.0)
    off.add(alice, "Which violin teacher should I call?", conversation_id="c1", embedding=at_cosine(0.0, 10))
    other = off.add(alice, "Try Mrs Okafor, she is patient.", conversation_id="c1", embedding=at_cosine(0.0, 11))
    for n in range(30):
        off.add(alice, f"filler note {n}", embedding=at_cosine(0.4, 20 + n))
    found = off.search(alice, "violin", limit=50, query_vector=QUERY, candidates=5, rank_by="similarity")
    assert other.id not in {s.memory.id for s in found}


def test_only_the_same_conversation_and_the_adjacent_memories_count(make_store: Callable[..., MemoryStore],
                                                                   alice: str) -> None:
    store = make_store()
    store.add(alice, "Which violin teacher should I call?", conversation_id="c1", embedding=at_cosine(0.2, 10))
    other_conv = store.add(alice, "Try Mrs Okafor.", conversation_id="c2", embedding=at_cosine(0.5, 11))
    store.add(alice, "Unrelated in between.", conversation_id="c1", embedding=at_cosine(0.1, 12))
    two_away = store.add(alice, "Two messages later.", conversation_id="c1", embedding=at_cosine(0.5, 13))
    found = {s.memory.id: s for s in store.search(alice, "violin", limit=10, query_vector=QUERY,
                                                  rank_by="similarity")}
    # alone in its conversation: its own score; the question in c1 does not count
    assert found[other_conv.id].relevance == pytest.approx(float(relevance(0.3, 0.5, 0.0)), abs=1e-6)
    # its neighbour is the unrelated memory (no keyword), not the question two memories back
    assert found[two_away.id].relevance == pytest.approx(float(relevance(0.3, 0.5, 0.0)), abs=1e-6)


def test_another_users_memories_are_never_neighbours(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store()
    bob = str(uuid4())
    store.add(bob, "Which violin teacher should I call?", conversation_id="c1", embedding=at_cosine(0.2, 10))
    mine = store.add(alice, "Try Mrs Okafor.", conversation_id="c1", embedding=at_cosine(0.5, 11))
    found = store.search(alice, "violin", limit=10, query_vector=QUERY, rank_by="similarity")
    assert [s.memory.id for s in found] == [mine.id]
    assert found[0].relevance == pytest.approx(float(relevance(0.3, 0.5, 0.0)), abs=1e-6)


def test_scores_stay_within_0_and_1(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store()
    for n in range(6):
        store.add(alice, f"violin violin lesson {n}", conversation_id="c1", embedding=at_cosine(0.99, 10 + n))
    found = store.search(alice, "violin lesson", limit=10, query_vector=QUERY, rank_by="similarity")
    assert len(found) == 6
    for s in found:
        assert 0.0 <= s.fused <= 1.0 + 1e-6
        # fused ~0.99 plus 0.3 x a neighbour's keyword score ~1 is capped at 1
        assert s.relevance == pytest.approx(float(relevance(1.0, 0.5, 0.0)), abs=1e-6)


def test_a_quarantined_neighbour_lends_nothing(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store()
    question = store.add(alice, "Which violin teacher should I call?", conversation_id="c1",
                         embedding=at_cosine(0.2, 10))
    answer = store.add(alice, "Try Mrs Okafor.", conversation_id="c1", embedding=at_cosine(0.5, 11))
    store.db.execute("UPDATE memories SET memory_type = 'Quarantined' WHERE id = ?", (question.id,))
    found = store.search(alice, "violin", limit=10, query_vector=QUERY, rank_by="similarity")
    assert [s.memory.id for s in found] == [answer.id]
    assert found[0].relevance == pytest.approx(float(relevance(0.3, 0.5, 0.0)), abs=1e-6)


# --- rag_threshold_mode: what rag_threshold reads ------------------------------------------------


def rag_memories(store: MemoryStore, user: str) -> dict[str, str]:
    """Two memories on either side of the default threshold 0.5 depending on the mode: one close in
    meaning but sharing no word with the message (cosine 0.55, fused 0.6 x 0.55 = 0.33), one
    sharing its words but further in meaning (cosine 0.45, fused 0.6 x 0.45 + 0.4 x 1 = 0.67)."""
    return {
        "meaning": store.add(user, "Mrs Okafor gives lessons on Tuesdays.", embedding=at_cosine(0.55, 20)).id,
        "words": store.add(user, "The violin teacher question came up again.", embedding=at_cosine(0.45, 21)).id,
    }


def test_by_default_rag_threshold_reads_the_fused_score(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store()
    assert store.settings.rag_threshold_mode == "fused"
    ids = rag_memories(store, alice)
    _, used = store.retrieve_for_prompt(alice, "violin teacher", QUERY)
    assert [m.memory.id for m in used] == [ids["words"]]
    assert used[0].fused == pytest.approx(0.6 * 0.45 + 0.4 * 1.0, abs=1e-5)


def test_in_cosine_mode_rag_threshold_reads_the_cosine(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store({"rag_threshold_mode": "cosine"})
    ids = rag_memories(store, alice)
    _, used = store.retrieve_for_prompt(alice, "violin teacher", QUERY)
    assert [m.memory.id for m in used] == [ids["meaning"]]
    assert used[0].fused == pytest.approx(0.55, abs=1e-5) == used[0].similarity
    # relevance is the spec's formula with that cosine (importance 0.5, never accessed: freshness 1)
    assert used[0].relevance == pytest.approx(float(relevance(0.55, 0.5, 0.0)), abs=1e-5)


def test_in_cosine_mode_a_lower_threshold_lets_both_in(make_store: Callable[..., MemoryStore], alice: str) -> None:
    store = make_store({"rag_threshold_mode": "cosine", "rag_threshold": 0.44})
    ids = rag_memories(store, alice)
    _, used = store.retrieve_for_prompt(alice, "violin teacher", QUERY)
    assert {m.memory.id for m in used} == set(ids.values())
