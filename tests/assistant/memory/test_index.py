"""Vector indexes (assistant/memory/index.py, ivf.py): every kind against exact search.

Small random and clustered unit vectors; IVF thresholds are lowered so training, retraining,
quantisation and the ``auto`` migrations all happen on a few thousand vectors. No timings.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from assistant.config import MemorySettings
from assistant.crypto import Sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory import index as index_module
from assistant.memory.index import AutoIndex, ExactIndex, create_index
from assistant.memory.ivf import (
    IVFIndex,
    ScalarQuantizer,
    _IdMap,
    choose_nlist,
    choose_nprobe,
    matvec,
    spherical_kmeans,
)
from assistant.memory.store import MemoryStore, NewMemory
from assistant.storage.db import Database

DIM = 32


def unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def random_vectors(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    return unit(np.random.default_rng(seed).standard_normal((n, dim)))


def clustered(n: int, centres: int = 60, noise: float = 0.15, seed: int = 0, dim: int = DIM) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = unit(rng.standard_normal((centres, dim)))
    return unit(c[rng.integers(0, centres, n)] + noise * rng.standard_normal((n, dim)))


class Vectors:
    """The float32 vectors by id: the ``fetch`` an sq8 index re-ranks with (SQLite in the store)."""

    def __init__(self) -> None:
        self.by_id: dict[int, np.ndarray] = {}
        self.calls = 0

    def put(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.by_id.update(zip(np.asarray(ids).tolist(), np.asarray(vectors, dtype=np.float32), strict=True))

    def drop(self, ids: np.ndarray) -> None:
        for i in np.asarray(ids).tolist():
            self.by_id.pop(i, None)

    def fetch(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.calls += 1
        found = [int(i) for i in ids if int(i) in self.by_id]
        return np.array(found, dtype=np.int64), np.array([self.by_id[i] for i in found], dtype=np.float32).reshape(
            len(found), -1)


# Every kind, with thresholds low enough that small data exercises the trained paths.
KINDS: dict[str, Callable[[Vectors], object]] = {
    "exact": lambda v: create_index("exact", DIM, fetch=v.fetch),
    "ivf": lambda v: create_index("ivf", DIM, fetch=v.fetch, min_train=256),
    "ivf-sq8": lambda v: create_index("ivf-sq8", DIM, fetch=v.fetch, min_train=256),
    "ivf-sq8-nofetch": lambda v: create_index("ivf-sq8", DIM, min_train=256),
    "auto": lambda v: create_index("auto", DIM, fetch=v.fetch, exact_max=300, float32_budget=1200 * DIM * 4,
                                   min_train=256),
}
EXACT_SCORES = {"exact", "ivf", "ivf-sq8", "auto"}  # kinds whose returned similarities are exact


class Harness:
    """An index of one kind, its float32 vectors (for fetch) and an exact reference in step."""

    def __init__(self, kind: str):
        self.kind = kind
        self.vectors = Vectors()
        self.index = KINDS[kind](self.vectors)
        self.reference = ExactIndex(DIM)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.vectors.put(ids, vectors)
        self.index.add(ids, vectors)
        self.reference.remove(ids)
        self.reference.add(ids, vectors)

    def remove(self, ids: np.ndarray) -> None:
        self.vectors.drop(ids)
        self.index.remove(ids)
        self.reference.remove(ids)

    def probe_all(self) -> None:
        """Scan every list: an IVF search then equals exact search."""
        inner = getattr(self.index, "inner", self.index)
        if isinstance(inner, IVFIndex):
            inner.fixed_nprobe = 10**6


@pytest.fixture(params=list(KINDS))
def harness(request: pytest.FixtureRequest) -> Harness:
    return Harness(request.param)


def test_empty_index(harness: Harness) -> None:
    index = harness.index
    assert len(index) == 0
    ids, scores = index.search(random_vectors(1)[0], 5)
    assert ids.shape == (0,) and scores.shape == (0,)
    index.remove(np.array([1, 2, 3]))  # removing from an empty index is a no-op
    assert len(index) == 0


def test_k_larger_than_n_and_k_zero(harness: Harness) -> None:
    vectors = random_vectors(7)
    harness.add(np.arange(10, 17), vectors)
    ids, scores = harness.index.search(vectors[0], 50)
    assert sorted(ids.tolist()) == list(range(10, 17))
    assert ids[0] == 10
    assert np.all(np.diff(scores) <= 1e-6)  # best first
    assert harness.index.search(vectors[0], 0)[0].shape == (0,)


@pytest.mark.parametrize("n", [100, 1500])
def test_search_equals_exact_when_every_list_is_scanned(harness: Harness, n: int) -> None:
    vectors = random_vectors(n, seed=1)
    ids = np.arange(n) * 3 + 5  # ids are arbitrary rowids, not positions
    for start in range(0, n, 200):  # added in batches: training happens on the way
        harness.add(ids[start:start + 200], vectors[start:start + 200])
    harness.probe_all()
    assert len(harness.index) == n
    for q in random_vectors(20, seed=2):
        got_ids, got_scores = harness.index.search(q, 10)
        want_ids, want_scores = harness.reference.search(q, 10)
        if harness.kind == "ivf-sq8-nofetch":  # quantised scores: the same neighbours up to near-ties
            assert len(set(got_ids.tolist()) & set(want_ids.tolist())) >= 8
            assert np.allclose(got_scores, [float(vectors[(i - 5) // 3] @ q) for i in got_ids], atol=0.03)
        else:
            assert got_ids.tolist() == want_ids.tolist()
            assert np.allclose(got_scores, want_scores, atol=1e-5)


def test_recall_on_clustered_data(harness: Harness) -> None:
    vectors = clustered(6000, seed=3)
    harness.add(np.arange(6000), vectors)
    queries = clustered(100, seed=4)
    hits = 0
    for q in queries:
        got = set(harness.index.search(q, 5)[0].tolist())
        hits += len(got & set(harness.reference.search(q, 5)[0].tolist()))
    assert hits / (5 * len(queries)) >= 0.95


def test_remove(harness: Harness) -> None:
    vectors = clustered(2000, seed=5)
    harness.add(np.arange(2000), vectors)
    gone = np.arange(0, 2000, 3)
    harness.remove(gone)
    harness.remove(np.array([10**9, -4]))  # unknown ids are ignored
    assert len(harness.index) == 2000 - len(gone)
    harness.probe_all()
    for i in (0, 3, 300, 1998):
        ids = harness.index.search(vectors[i], 20)[0]
        assert not set(ids.tolist()) & set(gone.tolist())
    ids, scores = harness.index.search(vectors[1], 1)
    assert ids[0] == 1


def test_update_replaces_the_vector(harness: Harness) -> None:
    vectors = clustered(1000, seed=6)
    harness.add(np.arange(1000), vectors)
    new = unit(-vectors[42])  # somewhere else entirely
    harness.vectors.put(np.array([42]), new[None])
    harness.index.update(np.array([42]), new[None])
    harness.reference.update(np.array([42]), new[None])
    assert len(harness.index) == 1000
    harness.probe_all()
    ids, scores = harness.index.search(new, 1)
    assert ids.tolist() == [42]
    if harness.kind in EXACT_SCORES:
        assert scores[0] == pytest.approx(1.0, abs=1e-5)
    assert 42 not in harness.index.search(vectors[42], 50)[0].tolist()


def test_adding_a_held_id_replaces_it(harness: Harness) -> None:
    vectors = clustered(1000, seed=6)
    harness.add(np.arange(1000), vectors)
    new = unit(-vectors[7])
    harness.add(np.array([7]), new[None])
    assert len(harness.index) == 1000
    harness.probe_all()
    assert harness.index.search(new, 1)[0].tolist() == [7]
    assert 7 not in harness.index.search(vectors[7], 50)[0].tolist()


def test_concurrent_adds_and_searches(harness: Harness) -> None:
    vectors = clustered(3000, seed=7)
    harness.add(np.arange(500), vectors[:500])
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for start in range(500, 3000, 100):
                harness.index.add(np.arange(start, start + 100), vectors[start:start + 100])
                harness.vectors.put(np.arange(start, start + 100), vectors[start:start + 100])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def reader() -> None:
        try:
            for i in range(200):
                ids, scores = harness.index.search(vectors[i % 500], 5)
                assert len(ids) == len(scores) <= 5
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer), threading.Thread(target=reader), threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(harness.index) == 3000


# --- IVF specifics ---------------------------------------------------------------------------------


def test_ivf_trains_at_min_train_and_retrains_when_doubled() -> None:
    index = IVFIndex(DIM, min_train=256)
    vectors = clustered(2200, seed=8)
    index.add(np.arange(200), vectors[:200])
    assert not index.trained  # exact until min_train
    index.add(np.arange(200, 300), vectors[200:300])
    assert index.trained and index.nlist == choose_nlist(300)
    first = index.centroids
    index.add(np.arange(300, 599), vectors[300:599])
    assert index.centroids is first  # not yet doubled
    index.add(np.arange(599, 2200), vectors[599:2200])
    assert index.centroids is not first and index.nlist == choose_nlist(2200)
    assert len(index) == 2200 and int(index._sizes.sum()) == 2200
    # every id is in exactly one list, and the id map agrees
    held = np.concatenate([ids[:size] for ids, size in zip(index._ids, index._sizes, strict=True)])
    assert sorted(held.tolist()) == list(range(2200))
    lists = index._map.get(np.arange(2200))
    for lst in (0, index.nlist - 1):
        assert set(index._ids[lst][: index._sizes[lst]].tolist()) == set(np.flatnonzero(lists == lst).tolist())


def test_ivf_retrains_when_shrunk_to_a_quarter() -> None:
    index = IVFIndex(DIM, min_train=64)
    vectors = clustered(2000, seed=9)
    index.add(np.arange(2000), vectors)
    before = index.centroids
    index.remove(np.arange(1000))
    assert index.centroids is before
    index.remove(np.arange(1000, 1600))
    index.add(np.array([5000]), vectors[:1])  # retraining is checked on add
    assert index.centroids is not before and len(index) == 401


def test_ivf_explicit_train_for_a_bulk_load() -> None:
    index = IVFIndex(DIM, codec="sq8", min_train=128)
    vectors = clustered(3000, seed=10)
    wanted = index.training_size(3000)
    assert 0 < wanted <= 3000
    index.train(vectors[:wanted], 3000)
    trained = index.centroids
    for start in range(0, 3000, 500):
        index.add(np.arange(start, start + 500), vectors[start:start + 500])
    assert index.centroids is trained  # trained for the final size: no retraining on the way
    assert IVFIndex(DIM, min_train=128).training_size(100) == 0


def test_ivf_sq8_re_ranks_through_fetch_and_drops_vanished_ids() -> None:
    vectors = Vectors()
    index = IVFIndex(DIM, codec="sq8", fetch=vectors.fetch, min_train=128)
    data = clustered(1000, seed=11)
    vectors.put(np.arange(1000), data)
    index.add(np.arange(1000), data)
    ids, scores = index.search(data[3], 5)
    assert vectors.calls == 1 and ids[0] == 3
    assert np.allclose(scores, data[ids] @ data[3], atol=1e-6)  # exact re-ranked scores
    vectors.drop(ids[:1])  # deleted from the store while the index still holds it
    ids2, _ = index.search(data[3], 5)
    assert 3 not in ids2.tolist() and len(ids2) == 5


def test_ivf_finds_enough_candidates_when_probed_lists_are_small() -> None:
    index = IVFIndex(DIM, min_train=64, nlist=64, nprobe=1)
    data = random_vectors(300, seed=12)
    index.add(np.arange(300), data)
    ids, _ = index.search(data[0], 100)
    assert len(ids) == 100  # more lists are scanned until 100 vectors were seen


def test_scalar_quantizer_round_trip() -> None:
    data = random_vectors(500, seed=13)
    sq = ScalarQuantizer.fit(data)
    codes = sq.encode(data)
    assert codes.dtype == np.uint8 and codes.shape == data.shape
    assert np.abs(sq.decode(codes) - data).max() <= sq.step.max()
    q = data[0]
    qq, offset = sq.query(q)
    assert np.allclose(codes.astype(np.float32) @ qq + offset, sq.decode(codes) @ q, atol=1e-4)
    assert sq.encode(np.full((1, DIM), 5.0)).max() == 255  # out of range: clipped


def test_id_map_recent_and_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_IdMap, "MERGE_AT", 8)
    m = _IdMap()
    m.set(np.arange(100, 200), np.arange(100) % 7)  # bulk: merged at once
    for i in range(20):  # small additions go to the dict, merged every 8
        m.set(np.array([1000 + i]), np.array([i % 5]))
    m.discard(np.array([100, 1019, 1003]))
    got = m.get(np.array([100, 101, 1019, 1003, 1004, 5]))
    assert got.tolist() == [-1, 1, -1, -1, 4, -1]


def test_kmeans_and_sizing_helpers() -> None:
    data = clustered(2000, centres=10, noise=0.05, seed=14)
    centroids = spherical_kmeans(data, 10)
    assert centroids.shape == (10, DIM)
    assert np.allclose(np.linalg.norm(centroids, axis=1), 1.0, atol=1e-5)
    assert choose_nlist(100_000) == 1024 and choose_nlist(1_000_000) == 2048 and choose_nlist(10) == 16
    assert choose_nprobe(1024) == 32 and choose_nprobe(2048) == 51 and choose_nprobe(16) == 16
    m = np.random.default_rng(0).standard_normal((30_000, 40)).astype(np.float32)
    v = np.ones(40, dtype=np.float32)
    assert np.allclose(matvec(m, v), m @ v, atol=1e-4)


# --- auto ------------------------------------------------------------------------------------------


def test_auto_migrates_exact_to_ivf_to_sq8_as_it_grows() -> None:
    vectors = Vectors()
    index = AutoIndex(DIM, fetch=vectors.fetch, exact_max=300, float32_budget=1200 * DIM * 4, min_train=128)
    data = clustered(3000, seed=15)
    reference = ExactIndex(DIM)
    seen = []
    for start in range(0, 3000, 100):
        ids = np.arange(start, start + 100)
        vectors.put(ids, data[start:start + 100])
        index.add(ids, data[start:start + 100])
        reference.add(ids, data[start:start + 100])
        if not seen or seen[-1] != index.kind:
            seen.append(index.kind)
    assert seen == ["exact", "ivf", "ivf-sq8"]
    assert len(index) == 3000
    index.inner.fixed_nprobe = 10**6
    for q in clustered(10, seed=16):
        assert index.search(q, 5)[0].tolist() == reference.search(q, 5)[0].tolist()
    index.remove(np.arange(0, 3000, 2))
    assert len(index) == 1500 and index.kind == "ivf-sq8"  # shrinking never migrates back


def test_auto_expected_size_picks_the_final_kind() -> None:
    assert AutoIndex(384, expected=10).kind == "exact"
    assert AutoIndex(384, expected=100_000).kind == "ivf"
    assert AutoIndex(384, expected=1_000_000).kind == "ivf-sq8"
    assert AutoIndex(384, expected=1_000_000).training_size(1_000_000) > 0
    assert AutoIndex(384, expected=10).training_size(10) == 0


def test_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown vector index"):
        create_index("hnsw", DIM)
    with pytest.raises(ValueError, match="codec"):
        IVFIndex(DIM, codec="pq")


# --- through the store: built from SQLite, re-ranked from SQLite ------------------------------------


@pytest.fixture
def tiny_auto(monkeypatch: pytest.MonkeyPatch) -> str:
    """An ``auto`` whose thresholds are small enough for a test: sq8 from 600 vectors."""
    monkeypatch.setitem(index_module.INDEXES, "tiny-auto", lambda dimension, **options: AutoIndex(
        dimension, exact_max=150, float32_budget=600 * dimension * 4, min_train=128, **options))
    return "tiny-auto"


def test_store_builds_the_index_from_sqlite_and_keeps_it_in_step(tmp_path: Path, tiny_auto: str) -> None:
    dim = 384
    db = Database(tmp_path / "assistant.db")
    settings = MemorySettings(embedding_backend="hashing")
    data = unit(clustered(1200, seed=17, dim=dim))
    store = MemoryStore(db, Sealer(None), HashingEmbedder(dim), settings, index_kind=tiny_auto)
    assert store.index("u").kind == "exact"  # built empty, then grows with add_many
    ids = store.add_many("u", [NewMemory(content=f"memory {i}") for i in range(1200)], embeddings=data)
    live = store.index("u")
    assert live.kind == "ivf-sq8" and len(live) == 1200
    store.delete("u", ids[5])
    assert len(live) == 1199

    # a new process: the index is built from SQLite (expected size known, trained on a sample)
    fresh = MemoryStore(db, Sealer(None), HashingEmbedder(dim), settings, index_kind=tiny_auto)
    built = fresh.index("u")
    assert built.kind == "ivf-sq8" and len(built) == 1199
    reference = ExactIndex(dim)
    rows = db.query("SELECT rowid, embedding FROM memories WHERE user_id = 'u' ORDER BY rowid")
    reference.add(np.array([r["rowid"] for r in rows]),
                  np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32).reshape(len(rows), dim))
    built.inner.fixed_nprobe = 10**6
    for i in (0, 6, 700):
        got_ids, got = built.search(data[i], 5)
        want_ids, want = reference.search(data[i], 5)
        assert got_ids.tolist() == want_ids.tolist()
        assert np.allclose(got, want, atol=1e-6)  # re-ranked with the float32 embeddings from SQLite
    found = fresh.search("u", "memory", limit=3, query_vector=data[700], mode="dense", rank_by="similarity")
    assert found[0].memory.id == ids[700] and found[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert fresh.index("other").kind == "exact" and len(fresh.index("other")) == 0
    db.close()


def test_store_default_index_kind_is_auto(tmp_path: Path) -> None:
    db = Database(tmp_path / "assistant.db")
    store = MemoryStore(db, Sealer(None), HashingEmbedder(384), MemorySettings(embedding_backend="hashing"))
    assert store.index_kind == "auto"
    store.add("u", "hello there", embedding=random_vectors(1, dim=384)[0])
    assert isinstance(store.index("u"), AutoIndex) and store.index("u").kind == "exact"
    db.close()
