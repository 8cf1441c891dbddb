"""Vector indexes: the in-memory search structure over one user's embeddings.

SQLite holds every embedding (float32 BLOB); an index is built from it on first use and kept in
step by the store. Kinds (``create_index``), chosen by measurement (benchmarks/memory_search.py
prints each against numpy exact and sqlite-vec in the same run):

* ``exact``: a numpy matrix product over all vectors; exact, best for small stores.
* ``ivf``: k-means inverted lists of float32 vectors (assistant/memory/ivf.py); scans a few per
  cent of the vectors, in-list scores exact.
* ``ivf-sq8``: the same lists with one byte per dimension, the best candidates re-ranked exactly
  from float32 vectors read back through ``fetch`` (SQLite): a quarter of the memory.
* ``auto`` (the store's default): ``exact`` up to ``EXACT_MAX`` vectors, then ``ivf`` while the
  float32 vectors fit in ``FLOAT32_BUDGET`` bytes, then ``ivf-sq8``; it migrates as it grows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from assistant.memory.ivf import Fetch, IVFIndex, ScalarQuantizer, matvec, top_k


class VectorIndex(Protocol):
    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None: ...

    def remove(self, ids: np.ndarray) -> None: ...

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids and their cosine similarities, best first."""
        ...

    def __len__(self) -> int: ...


class ExactIndex:
    """All vectors in one growable float32 matrix; search is one matrix-vector product."""

    def __init__(self, dimension: int):
        self.dimension = dimension
        self._vectors = np.zeros((0, dimension), dtype=np.float32)
        self._ids = np.zeros(0, dtype=np.int64)
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors; an id already held is replaced (as in every index kind)."""
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimension)
        if self._n and np.isin(ids, self._ids[: self._n]).any():
            self.remove(ids)
        needed = self._n + len(ids)
        if needed > len(self._ids):
            capacity = max(needed, 2 * len(self._ids), 1024)
            grown = np.zeros((capacity, self.dimension), dtype=np.float32)
            grown[: self._n] = self._vectors[: self._n]
            grown_ids = np.full(capacity, -1, dtype=np.int64)
            grown_ids[: self._n] = self._ids[: self._n]
            self._vectors, self._ids = grown, grown_ids
        self._vectors[self._n:needed] = vectors
        self._ids[self._n:needed] = ids
        self._n = needed

    def remove(self, ids: np.ndarray) -> None:
        keep = ~np.isin(self._ids[: self._n], np.asarray(ids, dtype=np.int64))
        kept = int(keep.sum())
        self._vectors[:kept] = self._vectors[: self._n][keep]
        self._ids[:kept] = self._ids[: self._n][keep]
        self._n = kept

    def update(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.remove(ids)
        self.add(ids, vectors)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self._n == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self._vectors[: self._n] @ np.asarray(query, dtype=np.float32)
        k = min(k, self._n)
        top = np.argpartition(-scores, k - 1)[:k] if k < self._n else np.arange(self._n)
        order = top[np.argsort(-scores[top])]
        return self._ids[order], scores[order]


EXACT_MAX = 20_000  # vectors; an exact search over 20k x 384 float32 takes ~1 ms
FLOAT32_BUDGET = 320 * 2**20  # bytes of float32 vectors an ``ivf`` may hold before ``auto`` uses sq8


class AutoIndex:
    """Exact while small, IVF (float32) when larger, IVF (sq8 + exact re-rank) when the float32
    vectors would take more than ``FLOAT32_BUDGET``. ``expected`` (the size about to be loaded)
    picks the final kind at once, so a bulk load does not migrate on the way."""

    def __init__(self, dimension: int, *, fetch: Fetch | None = None, expected: int = 0,
                 exact_max: int = EXACT_MAX, float32_budget: int = FLOAT32_BUDGET, **ivf_options: Any):
        self.dimension = dimension
        self.fetch = fetch
        self.exact_max = exact_max
        self.float32_budget = float32_budget
        self.ivf_options = ivf_options
        self._lock = threading.RLock()
        kind = self._kind_for(expected)
        self.inner: ExactIndex | IVFIndex = (
            ExactIndex(dimension) if kind == "exact" else self._ivf("sq8" if kind == "ivf-sq8" else "float32")
        )

    def _kind_for(self, n: int) -> str:
        if n <= self.exact_max:
            return "exact"
        return "ivf" if n * self.dimension * 4 <= self.float32_budget else "ivf-sq8"

    def _ivf(self, codec: str) -> IVFIndex:
        return IVFIndex(self.dimension, codec=codec, fetch=self.fetch, **self.ivf_options)

    @property
    def kind(self) -> str:
        if isinstance(self.inner, ExactIndex):
            return "exact"
        return "ivf" if self.inner.codec == "float32" else "ivf-sq8"

    def __len__(self) -> int:
        return len(self.inner)

    def training_size(self, expected: int) -> int:
        inner = self.inner
        return inner.training_size(expected) if isinstance(inner, IVFIndex) and not inner.trained else 0

    def train(self, sample: np.ndarray, expected: int | None = None) -> None:
        with self._lock:
            if isinstance(self.inner, IVFIndex):
                self.inner.train(sample, expected)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        with self._lock:
            if isinstance(self.inner, ExactIndex):
                self.inner.remove(ids)  # as IVFIndex: adding a held id replaces its vector
            self.inner.add(ids, vectors)
            self._migrate()

    def remove(self, ids: np.ndarray) -> None:
        with self._lock:
            self.inner.remove(ids)

    def update(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        with self._lock:
            self.inner.remove(ids)
            self.add(ids, vectors)

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        while True:
            with self._lock:
                inner = self.inner
                if isinstance(inner, ExactIndex):
                    if len(inner) == 0 or k <= 0:
                        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
                    # ExactIndex.search in single-threaded blocks (see ivf.BLOCK_ELEMENTS)
                    scores = matvec(inner._vectors[: inner._n], np.asarray(query, dtype=np.float32).reshape(-1))
                    top = top_k(scores, k)
                    return inner._ids[top], scores[top]
            found = inner.search(query, k)  # IVFIndex locks itself and fetches outside its lock
            if self.inner is inner:
                return found
            # migrated to sq8 while this search waited for the old index: search the new one

    def _migrate(self) -> None:
        n, kind = len(self.inner), self._kind_for(len(self.inner))
        current = self.kind
        if kind == current or (kind == "exact") or (kind == "ivf" and current == "ivf-sq8"):
            return  # grow only: shrinking never migrates back
        if current == "exact":
            exact = self.inner
            ids, vectors = exact._ids[: exact._n].copy(), exact._vectors[: exact._n]  # type: ignore[union-attr]
            ivf = self._ivf("sq8" if kind == "ivf-sq8" else "float32")
            ivf.train(vectors, n)
            ivf.add(ids, vectors)
            self.inner = ivf
            return
        # float32 lists -> sq8 lists: quantise list by list, keep the centroids. The old index's
        # own lock is held: a search that started on it before the switch finishes first.
        ivf = self.inner
        with ivf._lock:  # type: ignore[union-attr]
            self.inner = self._quantised(ivf, n)  # type: ignore[arg-type]

    def _quantised(self, ivf: IVFIndex, n: int) -> IVFIndex:
        sq8 = self._ivf("sq8")
        sample = ivf._sample_held(min(len(ivf), ivf.max_train))  # type: ignore[union-attr]
        sq8.quantizer = ScalarQuantizer.fit(sample)
        sq8._install(ivf.centroids, ivf._trained_n)  # type: ignore[union-attr, arg-type]
        for lst in range(ivf.nlist):  # type: ignore[union-attr]
            size = int(ivf._sizes[lst])  # type: ignore[union-attr]
            if size:
                sq8._place(ivf._ids[lst][:size], sq8._encode(ivf._data[lst][:size]),  # type: ignore[union-attr]
                           np.full(size, lst, dtype=np.int32))
                ivf._data[lst] = ivf._ids[lst] = np.zeros(0)  # type: ignore[union-attr]  # free as we go
        sq8._map = ivf._map
        sq8._n = n
        ivf._n = 0
        return sq8


IndexFactory = Callable[..., VectorIndex]
INDEXES: dict[str, IndexFactory] = {
    "exact": lambda dimension, **_: ExactIndex(dimension),
    "ivf": lambda dimension, **options: IVFIndex(dimension, codec="float32", **options),
    "ivf-sq8": lambda dimension, **options: IVFIndex(dimension, codec="sq8", **options),
    "auto": AutoIndex,
}


def create_index(kind: str, dimension: int, **options: Any) -> VectorIndex:
    """A new index of ``kind``; ``options`` (``fetch``, ``expected``, IVF settings) go to the kinds
    that use them and are ignored by the others."""
    try:
        factory = INDEXES[kind]
    except KeyError:
        raise ValueError(f"unknown vector index {kind!r}; known: {', '.join(INDEXES)}") from None
    return factory(dimension, **options)
