"""Vector indexes: the in-memory search structure over one user's embeddings.

SQLite holds every embedding (float32 BLOB); an index is built from it on first use and kept in
step by the store. ``exact`` is a numpy matrix product: exact, and faster than sqlite-vec's
brute-force scans measured here (benchmarks/memory_search.py prints both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np


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
        ids = np.asarray(ids, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimension)
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


IndexFactory = Callable[[int], VectorIndex]
INDEXES: dict[str, IndexFactory] = {"exact": ExactIndex}


def create_index(kind: str, dimension: int) -> VectorIndex:
    try:
        return INDEXES[kind](dimension)
    except KeyError:
        raise ValueError(f"unknown vector index {kind!r}; known: {', '.join(INDEXES)}") from None
