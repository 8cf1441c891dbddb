"""Near-duplicate pairs of unit vectors (cosine above a threshold), without comparing all pairs.

Dream consolidation (assistant/dream/nrem.py) merges memories whose embeddings have a cosine above
``nrem.merge_threshold``. All pairs of 100k vectors are 5 x 10^9 dot products; this finds them in
blocked matrix products inside coarse lists instead, the way the IVF index searches
(:mod:`assistant.memory.ivf`, whose k-means and assignment it reuses):

1. spherical k-means splits the vectors into ``nlist`` lists (about ``sqrt(n)``: list size and
   list count grow alike), trained on a small sample with few iterations (the lists only need
   to keep near vectors together, not to be good clusters);
2. each list is compared with itself and with the ``probe`` lists whose centroids are nearest
   to its own, one matrix product per list (float32 BLAS), keeping the pairs above the
   threshold. Each unordered pair of lists is compared once.

Cost: k-means ``O(sample x nlist)``, assignment ``O(n x nlist)``, blocks ``O(n x probe x n / nlist)``
dot products: ``O(n^1.5)`` in all, against ``O(n^2)``. A pair whose two vectors fall in lists that are
not neighbours is missed; at cosine 0.85 that is rare (benchmarks/dream.py measures the recall
against the exact pairs). Below ``EXACT_BELOW`` vectors the exact blocked product is cheaper and
is used. The products run on one BLAS thread (``threadpoolctl``): OpenBLAS threads each of these
mid-sized products, and on a busy two-core machine every threaded call waits for its second thread
(measured: 3-4x slower; see also ``ivf.BLOCK_ELEMENTS``).
"""

from __future__ import annotations

import math

import numpy as np
from threadpoolctl import threadpool_limits

from assistant.memory.ivf import assign, spherical_kmeans

EXACT_BELOW = 4096  # vectors: up to this, every pair in blocks (8M dot products at most)
PROBE = 8  # neighbouring lists compared with each list
SAMPLE_PER_LIST = 16  # k-means sample size per list
ITERATIONS = 5  # k-means iterations
BLOCK = 2048  # rows per block of the exact product


def choose_lists(n: int) -> int:
    """About ``sqrt(n)`` lists, a power of two between 16 and 1024."""
    return int(min(1024, max(16, 2 ** round(math.log2(math.sqrt(max(n, 1)))))))


def _upper(scores: np.ndarray, threshold: float, row_offset: int, col_offset: int, same: bool):
    rows, cols = np.nonzero(scores > threshold)
    if same:
        keep = rows < cols
        rows, cols = rows[keep], cols[keep]
    return rows + row_offset, cols + col_offset, scores[rows, cols]


def exact_pairs(vectors: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``i < j`` with ``vectors[i] @ vectors[j] > threshold`` (blocked; for small sets
    and for measuring :func:`near_pairs`)."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    parts = []
    for start in range(0, len(v), BLOCK):
        block = v[start:start + BLOCK] @ v[start:].T
        parts.append(_upper(block, threshold, start, start, True))
    return _concat(parts)


def _concat(parts: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    i, j, s = (np.concatenate([p[k] for p in parts]) for k in range(3))
    return i.astype(np.int64), j.astype(np.int64), s.astype(np.float32)


def near_pairs(vectors: np.ndarray, threshold: float, *, probe: int = PROBE, nlist: int | None = None,
               exact_below: int = EXACT_BELOW, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j, cosine)`` with ``i < j`` (positions in ``vectors``, unit rows) whose cosine is
    above ``threshold``, found within coarse lists (see the module doc); exact below ``exact_below``."""
    with threadpool_limits(1, user_api="blas"):
        return _near_pairs(vectors, threshold, probe, nlist, exact_below, seed)


def _near_pairs(vectors: np.ndarray, threshold: float, probe: int, nlist: int | None, exact_below: int,
                seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    n = len(v)
    if n < 2:
        return _concat([])
    if n <= exact_below:
        return exact_pairs(v, threshold)
    rng = np.random.default_rng(seed)
    lists = min(nlist or choose_lists(n), n)
    sample = v[rng.choice(n, min(n, SAMPLE_PER_LIST * lists), replace=False)]
    centroids = spherical_kmeans(sample, lists, iterations=ITERATIONS, rng=rng)
    lists = len(centroids)
    labels = assign(v, centroids)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(lists + 1))
    members = [order[bounds[c]:bounds[c + 1]] for c in range(lists)]
    near = np.argsort(-(centroids @ centroids.T), axis=1)[:, : min(probe, lists - 1) + 1]
    pairs = {(min(a, b), max(a, b)) for a in range(lists) for b in near[a].tolist()}
    partners: dict[int, list[int]] = {}
    for a, b in pairs:
        partners.setdefault(a, []).append(b)
    parts = []
    for a, bs in partners.items():
        rows = members[a]
        if not len(rows):
            continue
        bs = sorted(bs)
        cols = np.concatenate([members[b] for b in bs])
        if not len(cols):
            continue
        scores = v[rows] @ v[cols].T
        r, c = np.nonzero(scores > threshold)
        if len(r):
            i, j = rows[r], cols[c]
            keep = i != j  # a vector meets itself in its own list
            i, j, s = i[keep], j[keep], scores[r[keep], c[keep]]
            parts.append((np.minimum(i, j), np.maximum(i, j), s))
    i, j, s = _concat(parts)
    if len(i):  # a pair inside one list is found from both sides: keep it once
        key = i * n + j
        _, first = np.unique(key, return_index=True)
        i, j, s = i[first], j[first], s[first]
    return i, j, s


def groups(n: int, i: np.ndarray, j: np.ndarray, scores: np.ndarray, *, max_members: int,
           labels: np.ndarray | None = None) -> list[list[int]]:
    """Union-find over the pairs, strongest first, never letting a group pass ``max_members`` nor
    (with ``labels``, -1 for none) hold two different labels. Groups of two or more, each sorted,
    largest first."""
    parent = np.arange(n)
    size = np.ones(n, dtype=np.int64)
    label = np.full(n, -1, dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64).copy()

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    for k in np.argsort(-scores, kind="stable").tolist():
        a, b = root(int(i[k])), root(int(j[k]))
        if a != b and size[a] + size[b] <= max_members and (label[a] < 0 or label[b] < 0 or label[a] == label[b]):
            if size[a] < size[b]:
                a, b = b, a
            parent[b] = a
            size[a] += size[b]
            label[a] = max(label[a], label[b])
    found: dict[int, list[int]] = {}
    for x in np.unique(np.concatenate([i, j])).tolist():
        found.setdefault(root(int(x)), []).append(int(x))
    return sorted((sorted(g) for g in found.values() if len(g) > 1), key=lambda g: (-len(g), g[0]))
