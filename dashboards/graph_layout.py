"""Node positions for the knowledge-graph dashboard: fast at 5,000 nodes, stable when nodes are added.

:func:`force_layout` is Fruchterman-Reingold (repulsion k²/d, attraction d²/k along edges, times
the edge weight) with the repulsion approximated on a grid: nodes are binned into ``cells`` ×
``cells`` cells and every node is pushed by the centres of mass of the other occupied cells (a
cell-to-cell sum, O(cells⁴) instead of O(n²)) and by the rest of its own cell; a linear gravity keeps
isolated nodes and small components in view. Vectorised numpy, no dependency.

Why not a library (a 5,000-node / ~20,000-edge graph on the 2 shared cores of the build machine;
``benchmarks/graph_dashboard.py --compare``; two runs, the second under heavy load):
``networkx.spring_layout`` 29 s / 45 s with 15 iterations (83 s with its default 50),
``networkx.forceatlas2_layout`` 34 s / 57 s with 20 iterations, ``networkx.spectral_layout`` 0.4 s /
3.9 s but it piles disconnected components onto each other, ``rustworkx.spring_layout`` 11 s (50
iterations), igraph's grid Fruchterman-Reingold 0.5 s but igraph is GPL (this project is MIT). This
one, 100 iterations on a 24 × 24 grid: 0.75 s / 1.6 s (32 × 32 took 3 s and looked no better; 16 × 16
leaves clumps). The grid moves by a random fraction of a cell at each iteration, so no lattice shows.

:class:`PositionCache` keeps each node's position by id: a new node starts at the mean of its placed
neighbours (plus a little jitter), or near the centre when it has none, and only the new nodes move
(a few steps among their neighbours) while the placed ones stay fixed, so a live update does not
reshuffle the picture. One cache can serve several views (the sessions of a served dashboard).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

GRAVITY = 1.0  # pull towards the centre, relative to the total repulsion of the graph (keeps it round)


def force_layout(n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None = None, *,
                 pos: np.ndarray | None = None, fixed: np.ndarray | None = None, iterations: int = 100,
                 cells: int = 24, temperature: float = 0.1, seed: int = 0, k: float | None = None,
                 gravity: float = GRAVITY) -> np.ndarray:
    """(n, 2) positions for nodes 0..n-1 and edges ``src[i]``–``dst[i]``; ``pos`` starts from given
    positions, ``fixed`` (bool mask) holds nodes in place; ``temperature`` caps each step, cooling
    linearly to 0; ``k`` is the ideal edge length (default 2/√n, for a layout about 2 wide)."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1.0, 1.0, (n, 2)) if pos is None else np.array(pos, dtype=np.float64)
    if n < 2:
        return pos
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    w = np.ones(len(src)) if weight is None else np.asarray(weight, dtype=np.float64)
    k = 2.0 / np.sqrt(n) if k is None else k
    step_cap = temperature
    for _ in range(iterations):
        force = _repulsion(pos, cells, rng.uniform(0.0, 1.0, 2)) * (k * k)
        e = pos[src] - pos[dst]
        pull = e * ((np.sqrt((e ** 2).sum(1)) + 1e-9) * w / k)[:, None]
        for axis in range(2):
            force[:, axis] -= np.bincount(src, pull[:, axis], n) - np.bincount(dst, pull[:, axis], n)
        force -= pos * (gravity * k * k * n)
        length = np.sqrt((force ** 2).sum(1)) + 1e-9
        step = force * (np.minimum(length, step_cap) / length)[:, None]
        if fixed is not None:
            step[fixed] = 0.0
        pos += step
        step_cap -= temperature / (iterations + 1)
    return pos


def _repulsion(pos: np.ndarray, cells: int, shift: np.ndarray) -> np.ndarray:
    """Repulsion (without the k² factor) of every node, from cell centres of mass; the grid moves by
    ``shift`` (fractions of a cell) at each call, so its lines leave no pattern in the layout. The
    few nodes outside the grid (beyond the 2nd and 98th percentiles, which keep far nodes from
    squashing it) are pushed exactly: by every cell and by each other."""
    lo, hi = np.percentile(pos, [2, 98], axis=0)
    span = np.maximum(hi - lo, 1e-9)
    inside = ((pos >= lo) & (pos <= hi)).all(1)
    grid_lo = lo - shift * span / cells
    xy = np.clip(((pos[inside] - grid_lo) / span * cells).astype(np.int64), 0, cells - 1)
    cid = xy[:, 0] * cells + xy[:, 1]
    size = cells * cells
    mass_all = np.bincount(cid, minlength=size).astype(np.float64)
    occupied = np.flatnonzero(mass_all)
    mass = mass_all[occupied]
    com = np.stack([np.bincount(cid, pos[inside, 0], size)[occupied],
                    np.bincount(cid, pos[inside, 1], size)[occupied]], 1) / mass[:, None]
    dx = com[:, None, 0] - com[None, :, 0]
    dy = com[:, None, 1] - com[None, :, 1]
    d2 = dx * dx + dy * dy
    np.fill_diagonal(d2, np.inf)
    scale = mass[None, :] / np.maximum(d2, 1e-6)
    per_cell = np.stack([(dx * scale).sum(1), (dy * scale).sum(1)], 1)
    mine = np.searchsorted(occupied, cid)
    force = np.zeros_like(pos)
    others = mass[mine] - 1.0  # the rest of the node's own cell, as one mass at its centre
    rest = (com[mine] * mass[mine, None] - pos[inside]) / np.maximum(others, 1.0)[:, None]
    d = pos[inside] - rest
    d2_own = np.maximum((d ** 2).sum(1), 1e-6)
    force[inside] = per_cell[mine] + np.where(others[:, None] > 0, d * (others / d2_own)[:, None], 0.0)
    out = ~inside
    if out.any():
        far = pos[out]
        for points, weights, own in ((com, mass, False), (far, np.ones(len(far)), True)):
            ex = far[:, None, 0] - points[None, :, 0]
            ey = far[:, None, 1] - points[None, :, 1]
            e2 = ex * ex + ey * ey
            if own:
                np.fill_diagonal(e2, np.inf)
            w = weights[None, :] / np.maximum(e2, 1e-6)
            force[out] += np.stack([(ex * w).sum(1), (ey * w).sum(1)], 1)
    return force


class PositionCache:
    """Positions by node id, kept across refreshes (see the module docstring)."""

    def __init__(self, iterations: int = 100, settle_iterations: int = 30, seed: int = 0):
        self.iterations = iterations
        self.settle_iterations = settle_iterations
        self.rng = np.random.default_rng(seed)
        self.positions: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def place(self, ids: Sequence[str], edges: Sequence[tuple[str, str, float]]) -> np.ndarray:
        """(len(ids), 2) positions of ``ids`` in order; ``edges`` are (source id, target id, weight)
        among them. Known nodes keep their place; unknown ones are laid out around them."""
        with self._lock:
            return self._place(ids, edges)

    def _place(self, ids: Sequence[str], edges: Sequence[tuple[str, str, float]]) -> np.ndarray:
        index = {node: i for i, node in enumerate(ids)}
        pairs = [(index[s], index[t], w) for s, t, w in edges if s in index and t in index and s != t]
        src = np.array([p[0] for p in pairs], dtype=np.int64)
        dst = np.array([p[1] for p in pairs], dtype=np.int64)
        weight = np.array([p[2] for p in pairs], dtype=np.float64)
        known = np.array([node in self.positions for node in ids], dtype=bool)
        n = len(ids)
        if n and not known.any():
            pos = force_layout(n, src, dst, weight, iterations=self.iterations, seed=int(self.rng.integers(1 << 30)))
        else:
            pos = np.zeros((n, 2))
            for i in np.flatnonzero(known):
                pos[i] = self.positions[ids[i]]
            if not known.all():
                pos = self._add(pos, known, src, dst, weight)
        self.positions.update({node: (float(x), float(y)) for node, (x, y) in zip(ids, pos, strict=True)})
        return pos

    def _add(self, pos: np.ndarray, known: np.ndarray, src: np.ndarray, dst: np.ndarray,
             weight: np.ndarray) -> np.ndarray:
        n = len(pos)
        placed = pos[known]
        spread = float(np.ptp(placed, axis=0).max()) if len(placed) > 1 else 1.0
        jitter = max(spread, 1e-3) * 0.02
        new = np.flatnonzero(~known)
        # mean of the placed neighbours (over both edge directions), else near the centre
        total = np.zeros((n, 2))
        count = np.zeros(n)
        for a, b in ((src, dst), (dst, src)):
            ok = known[b]
            np.add.at(total, a[ok], pos[b[ok]])
            np.add.at(count, a[ok], 1.0)
        centre = placed.mean(0) if len(placed) else np.zeros(2)
        for i in new:
            base = total[i] / count[i] if count[i] else centre + self.rng.normal(0, spread * 0.1 + 1e-3, 2)
            pos[i] = base + self.rng.normal(0, jitter, 2)
        if self.settle_iterations:  # the new nodes settle among their neighbours, which stay fixed
            near = ~known
            for a, b in ((src, dst), (dst, src)):
                near[b[~known[a]]] = True
            sub = np.flatnonzero(near)
            where = np.full(n, -1)
            where[sub] = np.arange(len(sub))
            inside = near[src] & near[dst]
            pos[sub] = force_layout(len(sub), where[src[inside]], where[dst[inside]], weight[inside], pos=pos[sub],
                                    fixed=known[sub], iterations=self.settle_iterations, temperature=jitter * 2,
                                    k=2.0 / np.sqrt(n), gravity=0.0)
        return pos

    def forget(self, keep: Sequence[str]) -> None:
        """Drop the positions of nodes no longer shown (so a returning node is placed afresh)."""
        alive = set(keep)
        for node in [n for n in self.positions if n not in alive]:
            del self.positions[node]
