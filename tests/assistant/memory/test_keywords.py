"""The keyword (BM25) index: word normalisation, the BM25 formula and its parameters, keyed tokens
only on disk, per-user statistics. Real SQLite and a real sealer; the memories are added through
MemoryStore so that ``term_count`` is maintained as in production."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import pytest

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory.keywords import K1, STOP_WORDS, B, KeywordIndex, normalise_words
from assistant.memory.store import MemoryStore, NewMemory
from assistant.storage.db import Database


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    db = Database(tmp_path / "assistant.db")
    sealer = open_sealer(db, tmp_path / "memory.key")
    yield MemoryStore(db, sealer, HashingEmbedder(384), MemorySettings(embedding_backend="hashing"))
    db.close()


@pytest.fixture
def alice() -> str:
    return str(uuid4())


# --- normalisation ---------------------------------------------------------------------------------------


def test_numbers_are_kept() -> None:
    assert normalise_words("Moved here in 2019, turned 18 on the 3rd") == ["move", "2019", "turn", "18", "3rd"]


@pytest.mark.parametrize("text", ["Caroline's dog", "Caroline\u2019s dog", "caroline\u02bcs dog"])
def test_a_possessive_matches_the_bare_name(text: str) -> None:
    assert normalise_words(text) == ["carolin", "dog"]


def test_contractions_and_stop_words_drop_out() -> None:
    assert normalise_words("I'm sure it's what we don't want") == ["sure", "want"]
    assert normalise_words("When did you and what was it") == []
    assert {"when", "what", "did"} <= STOP_WORDS


def test_stemming_joins_word_forms() -> None:
    assert normalise_words("painting painted paints") == ["paint"] * 3
    assert normalise_words("dancing")[0] == normalise_words("dance")[0]


def test_letters_outside_ascii_stay_inside_the_word() -> None:
    # with an ASCII-only pattern "Zürich" became "z" + "rich" and matched "rich"
    assert normalise_words("Zürich café") == ["zürich", "café"]
    assert "rich" not in normalise_words("Zürich")
    assert normalise_words("snake_case") == ["snake", "case"]


# --- BM25 ------------------------------------------------------------------------------------------------


def bm25(tf: int, df: int, n: int, length: int, avgdl: float, k1: float = K1, b: float = B) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / avgdl))


def test_default_parameters() -> None:
    assert (K1, B) == (1.2, 0.5)


def test_scores_follow_the_bm25_formula(store: MemoryStore, alice: str) -> None:
    texts = ["violin lessons on Monday", "violin violin concert tickets", "garden needs water today"]
    ids = store.add_many(alice, [NewMemory(t) for t in texts])
    rowid = {r["id"]: r["rowid"] for r in store.db.query("SELECT id, rowid FROM memories")}
    lengths = [len(normalise_words(t)) for t in texts]  # 3, 4, 4
    avgdl = sum(lengths) / 3
    scores = store.keywords.search(alice, "violin concert")
    expected0 = bm25(1, 2, 3, lengths[0], avgdl)
    expected1 = bm25(2, 2, 3, lengths[1], avgdl) + bm25(1, 1, 3, lengths[1], avgdl)
    assert scores[rowid[ids[0]]] == pytest.approx(expected0)
    assert scores[rowid[ids[1]]] == pytest.approx(expected1)
    assert rowid[ids[2]] not in scores
    assert list(scores) == [rowid[ids[1]], rowid[ids[0]]]  # best first


def test_k1_and_b_are_parameters(store: MemoryStore, alice: str) -> None:
    texts = ["violin lessons on Monday evening", "violin"]
    ids = store.add_many(alice, [NewMemory(t) for t in texts])
    rowid = {r["id"]: r["rowid"] for r in store.db.query("SELECT id, rowid FROM memories")}
    lengths = [len(normalise_words(t)) for t in texts]
    for k1, b in ((1.2, 0.75), (0.9, 0.0), (2.0, 1.0)):
        index = KeywordIndex(store.db, store.sealer, k1=k1, b=b)
        scores = index.search(alice, "violin")
        for n, memory_id in enumerate(ids):
            assert scores[rowid[memory_id]] == pytest.approx(bm25(1, 2, 2, lengths[n], sum(lengths) / 2, k1, b))


def test_lower_b_penalises_a_longer_memory_less(store: MemoryStore, alice: str) -> None:
    long_text = "we talked about the violin recital and the long drive home and the dinner after"
    ids = store.add_many(alice, [NewMemory("violin"), NewMemory(long_text), NewMemory("unrelated words here")])
    rowid = {r["id"]: r["rowid"] for r in store.db.query("SELECT id, rowid FROM memories")}
    ratio = {}
    for b in (0.75, 0.5):
        scores = KeywordIndex(store.db, store.sealer, b=b).search(alice, "violin")
        ratio[b] = scores[rowid[ids[1]]] / scores[rowid[ids[0]]]
    assert ratio[0.5] > ratio[0.75]


def test_limit_and_empty_queries(store: MemoryStore, alice: str) -> None:
    store.add_many(alice, [NewMemory(f"violin note {n}") for n in range(5)])
    assert len(store.keywords.search(alice, "violin", limit=3)) == 3
    assert store.keywords.search(alice, "what did you do when") == {}  # stop words only
    assert store.keywords.search(str(uuid4()), "violin") == {}


def test_statistics_are_per_user(store: MemoryStore, alice: str) -> None:
    bob = str(uuid4())
    store.add_many(alice, [NewMemory("violin lessons"), NewMemory("garden work")])
    store.add_many(bob, [NewMemory("violin violin violin"), NewMemory("violin"), NewMemory("violin again")])
    found = store.keywords.search(alice, "violin")
    assert len(found) == 1
    # df and N are Alice's: 1 of 2 memories (Bob's three violins do not lower the idf)
    assert next(iter(found.values())) == pytest.approx(bm25(1, 1, 2, 2, 2.0))


def test_only_keyed_tokens_are_stored(store: MemoryStore, alice: str) -> None:
    store.add(alice, "Quetzalcoatl's xylophone recital in Zürich")
    tokens = [r["token"] for r in store.db.query("SELECT token FROM memory_terms")]
    assert len(tokens) == 4
    assert all(isinstance(t, bytes) and len(t) == 12 for t in tokens)
    for word in normalise_words("Quetzalcoatl's xylophone recital in Zürich"):
        assert store.sealer.token(word) in tokens
        assert word.encode() not in b"".join(tokens)


def test_removed_memories_are_not_found(store: MemoryStore, alice: str) -> None:
    memory = store.add(alice, "violin lessons")
    store.delete(alice, memory.id)
    assert store.keywords.search(alice, "violin") == {}
