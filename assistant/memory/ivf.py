"""An inverted-file (IVF) vector index: k-means lists, a query scans the lists of its nearest centroids.

Vectors are unit length (cosine = dot product). Spherical k-means over a sample splits them into
``nlist`` lists (about 3 sqrt(n)); a query is scored against the centroids, then only the
``nprobe`` best lists are scanned - a few per cent of the vectors instead of all of them.

Two codecs for the vectors kept in the lists:

* ``float32``: the vectors themselves; in-list scores are exact cosines. 4 bytes x dim per vector.
* ``sq8``: one byte per dimension (per-dimension affine scalar quantisation, trained on a sample):
  a quarter of the memory. Scores are approximate (about 1e-3), so the best ``rerank`` candidates
  are re-scored exactly from their float32 vectors read through ``fetch`` (the store passes a
  function reading the embeddings from SQLite, the system of record); without ``fetch`` the
  approximate scores are returned.

Growth: until ``min_train`` vectors the index is exact (no lists); then it trains on what it has.
When the size has doubled since the last training (or fallen to a quarter of its peak), it retrains on a sample
(at most ``TRAIN_PER_LIST`` vectors per list) and reassigns every vector, list by list, so memory
stays about one copy of the vectors. New vectors are assigned to their nearest centroid as they
come. A sorted id -> list map (plus a small dict of recent additions) makes removal O(log n).

All public methods take an internal lock: the store calls them from several threads.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import numpy as np

Fetch = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

TRAIN_PER_LIST = 32  # k-means sample: this many vectors per list (capped by ``max_train``)
KMEANS_ITERATIONS = 8
BLOCK_ELEMENTS = 400_000  # matrix-vector products in row blocks of at most this many elements:
# OpenBLAS (0.3.x) threads a sgemv from ~460k elements, and on a busy 2-core machine each threaded
# call waits a scheduler slice (~4-8 ms) for its second thread; measured here, 100k x 384 float32:
# one call 14-16 ms, threaded 2048-row blocks 380 ms, 1024-row blocks 10.5 ms (memory-bound).


def matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` in row blocks small enough to stay single-threaded in OpenBLAS."""
    rows = max(1, BLOCK_ELEMENTS // max(1, matrix.shape[1]))
    if len(matrix) <= rows:
        return matrix @ vector
    out = np.empty(len(matrix), dtype=np.result_type(matrix.dtype, vector.dtype))
    for start in range(0, len(matrix), rows):
        out[start:start + rows] = matrix[start:start + rows] @ vector
    return out


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, best first."""
    k = min(k, len(scores))
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
    return top[np.argsort(-scores[top], kind="stable")]


def choose_nlist(n: int) -> int:
    """About 3 sqrt(n) lists, a power of two between 16 and 2048 (100k: 1024, 1M: 2048)."""
    return int(min(2048, max(16, 2 ** round(math.log2(3 * math.sqrt(max(n, 1)))))))


def choose_nprobe(nlist: int) -> int:
    """Lists scanned per query: 32, or 1/40 of them above 1280 lists (2048 lists: 51). Measured on
    MiniLM-like data with real questions as queries (benchmarks/memory_search.py): recall@5 .99+
    at 100k (1024 lists, 3 % of the vectors scanned) and 1M (2048 lists, 2.5 %)."""
    return min(nlist, max(32, nlist // 40))


def assign(vectors: np.ndarray, centroids: np.ndarray, block: int = 8192) -> np.ndarray:
    """Index of the nearest centroid (largest dot product) of each vector."""
    labels = np.empty(len(vectors), dtype=np.int32)
    for start in range(0, len(vectors), block):
        chunk = np.asarray(vectors[start:start + block], dtype=np.float32)
        labels[start:start + block] = np.argmax(chunk @ centroids.T, axis=1)
    return labels


def spherical_kmeans(sample: np.ndarray, k: int, *, iterations: int = KMEANS_ITERATIONS,
                     rng: np.random.Generator | None = None) -> np.ndarray:
    """``k`` unit centroids of unit vectors (k-means on the sphere); empty clusters are re-seeded."""
    rng = rng or np.random.default_rng(0)
    sample = np.asarray(sample, dtype=np.float32)
    k = max(1, min(k, len(sample)))
    centroids = sample[rng.choice(len(sample), k, replace=False)].copy()
    for _ in range(iterations):
        labels = assign(sample, centroids)
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels, minlength=k)
        filled = counts > 0
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[filled]
        sums = np.add.reduceat(sample[order], starts, axis=0)
        centroids[filled] = sums
        if (~filled).any():
            centroids[~filled] = sample[rng.choice(len(sample), int((~filled).sum()), replace=False)]
        norms = np.linalg.norm(centroids, axis=1, keepdims=True)
        centroids /= np.where(norms > 0, norms, 1.0)
    return centroids


class ScalarQuantizer:
    """One byte per dimension: ``x ~ low + code x step``, ``low``/``step`` per dimension."""

    def __init__(self, low: np.ndarray, step: np.ndarray):
        self.low = np.asarray(low, dtype=np.float32)
        self.step = np.asarray(step, dtype=np.float32)

    @classmethod
    def fit(cls, sample: np.ndarray) -> ScalarQuantizer:
        sample = np.asarray(sample, dtype=np.float32)
        low, high = sample.min(axis=0), sample.max(axis=0)
        margin = 0.05 * (high - low) + 1e-6  # room for vectors a little outside the sample's range
        low, high = low - margin, high + margin
        return cls(low, (high - low) / 255.0)

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        codes = np.rint((np.asarray(vectors, dtype=np.float32) - self.low) / self.step)
        return np.clip(codes, 0, 255).astype(np.uint8)

    def decode(self, codes: np.ndarray) -> np.ndarray:
        return codes.astype(np.float32) * self.step + self.low

    def query(self, query: np.ndarray) -> tuple[np.ndarray, float]:
        """``(q', c)`` such that ``codes @ q' + c`` approximates ``decode(codes) @ query``."""
        return self.step * query, float(self.low @ query)


class _IdMap:
    """id -> list number: sorted arrays for the bulk, a dict for recent additions."""

    MERGE_AT = 4096

    def __init__(self) -> None:
        self._keys = np.zeros(0, dtype=np.int64)
        self._values = np.zeros(0, dtype=np.int32)  # -1: removed
        self._recent: dict[int, int] = {}

    def get(self, ids: np.ndarray) -> np.ndarray:
        out = np.full(len(ids), -1, dtype=np.int32)
        if len(self._keys):
            pos = np.minimum(np.searchsorted(self._keys, ids), len(self._keys) - 1)
            hit = self._keys[pos] == ids
            out[hit] = self._values[pos[hit]]
        if self._recent:
            for i, key in enumerate(ids.tolist()):
                value = self._recent.get(key)
                if value is not None:
                    out[i] = value
        return out

    def set(self, ids: np.ndarray, lists: np.ndarray) -> None:
        """Add ids that are not in the map."""
        if len(ids) < 64:
            self._recent.update(zip(ids.tolist(), lists.tolist(), strict=True))
            if len(self._recent) >= self.MERGE_AT:
                self._merge()
            return
        self._merge(ids, lists)

    def discard(self, ids: np.ndarray) -> None:
        for key in ids.tolist():
            self._recent.pop(key, None)
        if len(self._keys):
            pos = np.minimum(np.searchsorted(self._keys, ids), len(self._keys) - 1)
            hit = self._keys[pos] == ids
            self._values[pos[hit]] = -1

    def _merge(self, ids: np.ndarray | None = None, lists: np.ndarray | None = None) -> None:
        parts_k, parts_v = [self._keys], [self._values]
        if self._recent:
            parts_k.append(np.fromiter(self._recent.keys(), dtype=np.int64, count=len(self._recent)))
            parts_v.append(np.fromiter(self._recent.values(), dtype=np.int32, count=len(self._recent)))
            self._recent = {}
        if ids is not None:
            parts_k.append(np.asarray(ids, dtype=np.int64))
            parts_v.append(np.asarray(lists, dtype=np.int32))
        keys, values = np.concatenate(parts_k), np.concatenate(parts_v)
        live = values >= 0
        keys, values = keys[live], values[live]
        order = np.argsort(keys, kind="stable")
        self._keys, self._values = keys[order], values[order]

    def reset(self, ids: np.ndarray, lists: np.ndarray) -> None:
        self._keys = np.zeros(0, dtype=np.int64)
        self._values = np.zeros(0, dtype=np.int32)
        self._recent = {}
        self._merge(ids, lists)


class IVFIndex:
    """Inverted lists over k-means centroids; ``codec`` ``float32`` or ``sq8`` (see the module doc)."""

    def __init__(self, dimension: int, *, codec: str = "float32", fetch: Fetch | None = None,
                 nlist: int | None = None, nprobe: int | None = None, rerank: int = 32,
                 min_train: int = 4096, max_train: int = 65_536, seed: int = 0, expected: int = 0):
        """``expected``: the store's size hint for a bulk load (it trains with :meth:`train`)."""
        if codec not in ("float32", "sq8"):
            raise ValueError(f"unknown codec {codec!r}: float32 or sq8")
        self.dimension = dimension
        self.codec = codec
        self.fetch = fetch
        self.fixed_nlist = nlist
        self.fixed_nprobe = nprobe
        self.rerank = rerank
        self.min_train = min_train
        self.max_train = max_train
        self._rng = np.random.default_rng(seed)
        self._lock = threading.RLock()
        self._n = 0
        self._trained_n = 0
        self._high = 0
        self.centroids: np.ndarray | None = None
        self.quantizer: ScalarQuantizer | None = None
        self._data: list[np.ndarray] = []  # per list: (capacity, dim) float32 or uint8
        self._ids: list[np.ndarray] = []  # per list: (capacity,) int64
        self._sizes = np.zeros(0, dtype=np.int64)
        self._map = _IdMap()
        # before training: plain exact storage
        self._pending_vectors = np.zeros((0, dimension), dtype=np.float32)
        self._pending_ids = np.zeros(0, dtype=np.int64)

    # --- introspection ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    @property
    def trained(self) -> bool:
        return self.centroids is not None

    @property
    def nlist(self) -> int:
        return 0 if self.centroids is None else len(self.centroids)

    @property
    def nprobe(self) -> int:
        return min(self.nlist, self.fixed_nprobe or choose_nprobe(self.nlist))

    def training_size(self, expected: int) -> int:
        """How many sample vectors :meth:`train` wants for an index about to hold ``expected``."""
        if expected < self.min_train:
            return 0
        return min(expected, self.max_train, TRAIN_PER_LIST * (self.fixed_nlist or choose_nlist(expected)))

    def memory_bytes(self) -> int:
        """Bytes held by the lists, ids, centroids and id map (capacity included)."""
        total = sum(d.nbytes + i.nbytes for d, i in zip(self._data, self._ids, strict=True))
        total += 0 if self.centroids is None else self.centroids.nbytes
        total += self._map._keys.nbytes + self._map._values.nbytes + self._pending_vectors.nbytes
        return total

    # --- training --------------------------------------------------------------------------------

    def train(self, sample: np.ndarray, expected: int | None = None) -> None:
        """Train centroids (and the quantiser) on ``sample`` for an index of about ``expected``
        vectors; vectors already held are reassigned."""
        with self._lock:
            sample = np.asarray(sample, dtype=np.float32).reshape(-1, self.dimension)
            if not len(sample):
                return
            expected = max(expected or 0, len(sample), self._n)
            nlist = min(self.fixed_nlist or choose_nlist(expected), len(sample))
            if len(sample) > TRAIN_PER_LIST * nlist:
                sample = sample[self._rng.choice(len(sample), TRAIN_PER_LIST * nlist, replace=False)]
            if self.codec == "sq8" and self.quantizer is None:
                self.quantizer = ScalarQuantizer.fit(sample)
            self._install(spherical_kmeans(sample, nlist, rng=self._rng), expected)

    def _install(self, centroids: np.ndarray, trained_n: int) -> None:
        """Switch to new centroids: move every vector held (lists, then pending) into new lists."""
        old_data, old_ids, old_sizes = self._data, self._ids, self._sizes
        nlist = len(centroids)
        labels = [assign(self._float(d[:s]), centroids) for d, s in zip(old_data, old_sizes, strict=True)]
        counts = np.zeros(nlist, dtype=np.int64)
        for lab in labels:
            counts += np.bincount(lab, minlength=nlist)
        width = self.dimension
        dtype = np.float32 if self.codec == "float32" else np.uint8
        # np.empty: pages become resident as they are filled while old lists are freed
        self._data = [np.empty((int(c + c // 8 + 8), width), dtype=dtype) for c in counts]
        self._ids = [np.empty(int(c + c // 8 + 8), dtype=np.int64) for c in counts]
        self._sizes = np.zeros(nlist, dtype=np.int64)
        self.centroids = np.ascontiguousarray(centroids, dtype=np.float32)
        for n, lab in enumerate(labels):
            size = int(old_sizes[n])
            self._place(old_ids[n][:size], old_data[n][:size], lab)
            old_data[n] = old_ids[n] = None  # type: ignore[call-overload]  # free as we go
        all_ids = np.concatenate([i[:s] for i, s in zip(self._ids, self._sizes, strict=True)] or [np.zeros(0, np.int64)])
        all_lists = np.repeat(np.arange(nlist, dtype=np.int32), self._sizes)
        self._map.reset(all_ids, all_lists)
        self._trained_n = max(trained_n, 1)
        self._high = self._n  # the most vectors held since this training (retrain when a quarter is left)
        if len(self._pending_ids):
            ids, vectors = self._pending_ids, self._pending_vectors
            self._pending_ids = np.zeros(0, dtype=np.int64)
            self._pending_vectors = np.zeros((0, self.dimension), dtype=np.float32)
            self._add_to_lists(ids, vectors)

    def _float(self, stored: np.ndarray) -> np.ndarray:
        return stored if self.codec == "float32" else self.quantizer.decode(stored)  # type: ignore[union-attr]

    def _encode(self, vectors: np.ndarray) -> np.ndarray:
        return vectors if self.codec == "float32" else self.quantizer.encode(vectors)  # type: ignore[union-attr]

    def _place(self, ids: np.ndarray, stored: np.ndarray, labels: np.ndarray) -> None:
        """Append already-encoded rows to their lists (no id-map update)."""
        if not len(ids):
            return
        order = np.argsort(labels, kind="stable")
        labels_sorted = labels[order]
        bounds = np.flatnonzero(np.diff(labels_sorted)) + 1
        for group in np.split(order, bounds):
            lst = int(labels[group[0]])
            size = int(self._sizes[lst])
            need = size + len(group)
            if need > len(self._ids[lst]):
                capacity = max(need, int(len(self._ids[lst]) * 1.25) + 8)
                data = np.empty((capacity, self.dimension), dtype=self._data[lst].dtype)
                data[:size] = self._data[lst][:size]
                ids_grown = np.empty(capacity, dtype=np.int64)
                ids_grown[:size] = self._ids[lst][:size]
                self._data[lst], self._ids[lst] = data, ids_grown
            self._data[lst][size:need] = stored[group]
            self._ids[lst][size:need] = ids[group]
            self._sizes[lst] = need

    def _add_to_lists(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        labels = assign(vectors, self.centroids)  # type: ignore[arg-type]
        self._place(ids, self._encode(vectors), labels)
        self._map.set(ids, labels)

    def _sample_held(self, count: int) -> np.ndarray:
        """``count`` random vectors held in the lists, as float32."""
        total = int(self._sizes.sum())
        picks = np.sort(self._rng.choice(total, min(count, total), replace=False))
        ends = np.cumsum(self._sizes)
        lists = np.searchsorted(ends, picks, side="right")
        offsets = picks - (ends[lists] - self._sizes[lists])
        out = np.empty((len(picks), self.dimension), dtype=np.float32)
        for lst in np.unique(lists):
            mask = lists == lst
            out[mask] = self._float(self._data[lst][offsets[mask]])
        return out

    def _maybe_retrain(self) -> None:
        if not self.trained:
            if self._n >= self.min_train:
                self.train(self._pending_vectors, self._n)
            return
        self._high = max(self._high, self._n)
        if self._n >= 2 * self._trained_n or (self._n * 4 < self._high and self._n >= self.min_train):
            nlist = self.fixed_nlist or choose_nlist(self._n)
            sample = self._sample_held(min(self.max_train, TRAIN_PER_LIST * nlist))
            self._install(spherical_kmeans(sample, min(nlist, len(sample)), rng=self._rng), self._n)

    # --- changes ---------------------------------------------------------------------------------

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimension)
        if not len(ids):
            return
        with self._lock:
            self._remove(ids)  # adding an id already held replaces its vector
            if self.trained:
                self._add_to_lists(ids, vectors)
            else:
                self._pending_ids = np.concatenate([self._pending_ids, ids])
                self._pending_vectors = np.concatenate([self._pending_vectors, vectors])
            self._n += len(ids)
            self._maybe_retrain()

    def remove(self, ids: np.ndarray) -> None:
        with self._lock:
            self._remove(np.asarray(ids, dtype=np.int64).reshape(-1))

    def update(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        self.add(ids, vectors)

    def _remove(self, ids: np.ndarray) -> None:
        if not len(ids) or not self._n:
            return
        if len(self._pending_ids):
            keep = ~np.isin(self._pending_ids, ids)
            self._n -= int((~keep).sum())
            self._pending_ids, self._pending_vectors = self._pending_ids[keep], self._pending_vectors[keep]
        if not self.trained:
            return
        lists = self._map.get(ids)
        held = lists >= 0
        if not held.any():
            return
        ids, lists = ids[held], lists[held]
        for lst in np.unique(lists):
            size = int(self._sizes[lst])
            keep = ~np.isin(self._ids[lst][:size], ids[lists == lst])
            kept = int(keep.sum())
            self._data[lst][:kept] = self._data[lst][:size][keep]
            self._ids[lst][:kept] = self._ids[lst][:size][keep]
            self._sizes[lst] = kept
        self._map.discard(ids)
        self._n -= len(ids)

    # --- search ----------------------------------------------------------------------------------

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest ids and their cosine similarities, best first (exact scores for
        ``float32``, and for ``sq8`` with ``fetch``)."""
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        query = np.asarray(query, dtype=np.float32).reshape(-1)
        with self._lock:
            if self._n == 0 or k <= 0:
                return empty
            if not self.trained:
                scores = matvec(self._pending_vectors, query)
                top = top_k(scores, k)
                return self._pending_ids[top], scores[top]
            want = k if self.codec == "float32" else max(k + self.rerank, 2 * k)
            scores, ids = self._scan(query, want)
            top = top_k(scores, want)
            ids, scores = ids[top], scores[top]
        if self.codec == "float32":
            return ids, scores.astype(np.float32, copy=False)
        if self.fetch is None:
            return ids[:k], scores[:k].astype(np.float32)
        found, vectors = self.fetch(ids)  # outside the lock: reads SQLite
        if not len(found):
            return empty
        exact = matvec(np.asarray(vectors, dtype=np.float32).reshape(len(found), self.dimension), query)
        top = top_k(exact, k)
        return np.asarray(found, dtype=np.int64)[top], exact[top]

    def _scan(self, query: np.ndarray, want: int) -> tuple[np.ndarray, np.ndarray]:
        """Scores and ids of the vectors in the lists nearest to ``query`` (at least ``want`` of
        them when the index holds that many)."""
        centroid_scores = matvec(self.centroids, query)  # type: ignore[arg-type]
        nprobe = self.nprobe
        probe = top_k(centroid_scores, nprobe)
        if int(self._sizes[probe].sum()) < want and nprobe < self.nlist:
            order = np.argsort(-centroid_scores)
            enough = int(np.searchsorted(np.cumsum(self._sizes[order]), want)) + 1
            probe = order[: max(nprobe, enough)]
        if self.codec == "float32":
            q, offset = query, 0.0
        else:
            q, offset = self.quantizer.query(query)  # type: ignore[union-attr]
        parts, part_ids = [], []
        for lst in probe.tolist():
            size = int(self._sizes[lst])
            if size:
                block = self._data[lst][:size]
                parts.append(matvec(block, q) if self.codec == "float32" else np.einsum("ij,j->i", block, q))
                part_ids.append(self._ids[lst][:size])
        if not parts:
            return np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.int64)
        scores = np.concatenate(parts)
        if offset:
            scores += offset
        return scores, np.concatenate(part_ids)
