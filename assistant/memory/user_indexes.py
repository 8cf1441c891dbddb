"""Each user's vector index over their memories' embeddings, built from SQLite on first use."""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from assistant.memory.index import VectorIndex, create_index
from assistant.storage.db import Database


class UserIndexes:
    """One :class:`VectorIndex` per user, kept in step with the ``memories`` table.

    ``kind`` ``auto`` (default) is exact while small and IVF when large (see
    assistant/memory/index.py). The build streams embeddings in rowid chunks, so a million of
    them never sit in Python objects at once; an index that must be trained (IVF) first gets a
    random sample of the user's embeddings. Compact indexes re-rank their best candidates with
    the float32 embeddings read back from SQLite by ``fetch``."""

    def __init__(self, db: Database, dimension: int, kind: str = "auto"):
        self.db = db
        self.dimension = dimension
        self.kind = kind
        self._indexes: dict[str, VectorIndex] = {}
        self._lock = threading.Lock()

    def fetch(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact float32 embeddings of ``ids`` (those still stored), from SQLite."""
        found: list[int] = []
        blobs: list[bytes] = []
        wanted = [int(i) for i in ids]
        for start in range(0, len(wanted), 10_000):
            part = wanted[start:start + 10_000]
            marks = ",".join("?" * len(part))
            for r in self.db.query(f"SELECT rowid, embedding FROM memories WHERE rowid IN ({marks})", part):
                found.append(r["rowid"])
                blobs.append(r["embedding"])
        vectors = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(found), self.dimension)
        return np.array(found, dtype=np.int64), vectors

    def get(self, user_id: str) -> VectorIndex:
        """The user's index, built on first use."""
        with self._lock:
            index = self._indexes.get(user_id)
            if index is None:
                index = self._indexes[user_id] = self._build(user_id)
            return index

    def _build(self, user_id: str, chunk: int = 20_000) -> VectorIndex:
        parts, last = [], -1
        while True:
            rows = self.db.query("SELECT rowid FROM memories WHERE user_id = ? AND rowid > ? ORDER BY rowid "
                                 "LIMIT ?", (user_id, last, 100_000))
            if not rows:
                break
            parts.append(np.fromiter((r["rowid"] for r in rows), dtype=np.int64, count=len(rows)))
            last = int(parts[-1][-1])
        rowids = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        index = create_index(self.kind, self.dimension, fetch=self.fetch, expected=len(rowids))
        wanted = index.training_size(len(rowids)) if hasattr(index, "training_size") else 0
        if wanted:
            sample = np.sort(np.random.default_rng(0).choice(rowids, wanted, replace=False))
            index.train(self.fetch(sample)[1], len(rowids))
        for start in range(0, len(rowids), chunk):
            ids, vectors = self.fetch(rowids[start:start + chunk])
            index.add(ids, vectors)
        return index

    def _loaded(self, user_id: str) -> VectorIndex | None:
        with self._lock:
            return self._indexes.get(user_id)

    def add(self, user_id: str, ids: np.ndarray, vectors: np.ndarray) -> None:
        """New rows of a user whose index is loaded (one not loaded yet reads them when built)."""
        if (index := self._loaded(user_id)) is not None:
            index.add(ids, vectors)

    def remove(self, user_id: str, ids: Iterable[int]) -> None:
        if (index := self._loaded(user_id)) is not None:
            index.remove(np.fromiter(ids, dtype=np.int64))

    def update(self, user_id: str, rowid: int, vector: np.ndarray) -> None:
        """A row's embedding changed (a merge)."""
        if (index := self._loaded(user_id)) is not None:
            ids = np.array([rowid], dtype=np.int64)
            if hasattr(index, "update"):
                index.update(ids, vector.reshape(1, -1))
            else:
                index.remove(ids)
                index.add(ids, vector.reshape(1, -1))
