"""A cached in-memory view of each user's graph, for the graph endpoint, search and algorithms.

The view of a user is built from SQLite once and kept until that user's graph changes
(:meth:`GraphViews.changed`): node and edge attributes as numpy arrays, names opened once (a
plaintext cache in memory only, never on disk), and each node's and edge's JSON written once
without its retention. A request then only computes retention for the requested time (vectorised),
masks, and joins the pre-written pieces: no graph is rebuilt or re-serialised per request
(``benchmarks/graph_api.py`` compares this with ``networkx.node_link_data`` + ``json.dumps``).

Neighbourhoods (``center`` + ``depth``, retrieval's spreading) are computed on the same arrays.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import orjson

from assistant.clock import iso_at
from assistant.graph import retention as R
from assistant.graph.store import GraphStore, normalise_name


@dataclass(frozen=True)
class GraphQuery:
    min_retention: float = 0.1
    limit: int = 5000
    center: str | None = None  # node id: only its neighbourhood
    depth: int = 1
    as_of: float | None = None  # epoch seconds: the graph as it was then
    kind: str | None = None
    include_invalid: bool = False  # also edges a contradiction invalidated (at the time shown)


class Snapshot:
    """One user's graph at one version."""

    def __init__(self, store: GraphStore, user_id: str, plain: dict[tuple[str, bytes], str]):
        with store.db.consistent():  # an edge written between the two reads would name an unread node
            nodes = store.node_rows(user_id)
            edges = store.edge_rows(user_id)
            counts = {r["edge_id"]: r["n"] for r in store.db.query(
                "SELECT s.edge_id, count(*) AS n FROM kg_edge_sources s JOIN kg_edges e ON e.id = s.edge_id "
                "WHERE e.user_id = ? GROUP BY s.edge_id", (str(user_id),))}

        def opened(table: str, column: str, row: dict) -> str:
            key = (row["id"], row[column])
            if key not in plain:
                plain[key] = store._open(table, column, row["id"], row["user_id"], row[column])
            return plain[key]

        self.ids = [r["id"] for r in nodes]
        self.index = {node_id: i for i, node_id in enumerate(self.ids)}
        self.names = [opened("kg_nodes", "name_sealed", r) for r in nodes]
        self.aliases = [json.loads(opened("kg_nodes", "aliases_sealed", r)) for r in nodes]
        self.kinds = np.array([r["kind"] for r in nodes], dtype=object)
        self.created = np.array([r["created_ts"] for r in nodes], dtype=np.float64)
        self.last_seen = np.array([r["last_seen_ts"] for r in nodes], dtype=np.float64)
        self.stability = np.array([r["stability"] for r in nodes], dtype=np.float64)
        self.mentions = np.array([r["mention_count"] for r in nodes], dtype=np.int64)
        self.node_json = [
            orjson.dumps({"id": r["id"], "name": self.names[i], "kind": r["kind"], "aliases": self.aliases[i],
                          "mention_count": r["mention_count"], "recalls": r["recalls"],
                          "stability": round(r["stability"], 4), "created_at": iso_at(r["created_ts"]),
                          "last_seen": iso_at(r["last_seen_ts"])})[:-1] + b',"retention":'
            for i, r in enumerate(nodes)
        ]
        self.edge_ids = [r["id"] for r in edges]
        self.relations = [opened("kg_edges", "relation_sealed", r) for r in edges]
        self.src = np.array([self.index[r["subject_id"]] for r in edges], dtype=np.int64)
        self.dst = np.array([self.index[r["object_id"]] for r in edges], dtype=np.int64)
        self.weight = np.array([r["weight"] for r in edges], dtype=np.float64)
        self.valid = np.array([r["valid_ts"] for r in edges], dtype=np.float64)
        self.invalid = np.array([np.inf if r["invalid_ts"] is None else r["invalid_ts"] for r in edges],
                                dtype=np.float64)
        self.edge_last_seen = np.array([r["last_seen_ts"] for r in edges], dtype=np.float64)
        self.edge_stability = np.array([r["stability"] for r in edges], dtype=np.float64)
        self.edge_json = [
            orjson.dumps({"id": r["id"], "source": r["subject_id"], "target": r["object_id"],
                          "relation": self.relations[i], "weight": round(r["weight"], 4),
                          "sources": counts.get(r["id"], 0), "stability": round(r["stability"], 4),
                          "valid_at": iso_at(r["valid_ts"]), "created_at": iso_at(r["created_ts"]),
                          "invalid_at": None if r["invalid_ts"] is None else iso_at(r["invalid_ts"]),
                          "invalidated_by": r["invalidated_by"]})[:-1] + b',"retention":'
            for i, r in enumerate(edges)
        ]

    def __len__(self) -> int:
        return len(self.ids)

    # --- what is valid and retained at a time -------------------------------------------------------

    def node_retention(self, at: float) -> np.ndarray:
        return np.atleast_1d(R.retention_at(at, np.minimum(self.last_seen, at), self.stability))

    def edge_retention(self, at: float) -> np.ndarray:
        return np.atleast_1d(R.retention_at(at, np.minimum(self.edge_last_seen, at), self.edge_stability))

    def edges_valid(self, at: float, include_invalid: bool = False) -> np.ndarray:
        mask = self.valid <= at
        return mask if include_invalid else mask & (self.invalid > at)

    def neighbourhood(self, center: int, depth: int, edges: np.ndarray) -> np.ndarray:
        """Nodes within ``depth`` hops of ``center`` over the edges selected by mask ``edges``."""
        keep = np.zeros(len(self.ids), dtype=bool)
        keep[center] = True
        src, dst = self.src[edges], self.dst[edges]
        for _ in range(depth):
            reach = keep[src] | keep[dst]
            keep[src[reach]] = True
            keep[dst[reach]] = True
        return keep

    # --- the endpoint's answer ----------------------------------------------------------------------

    def render(self, query: GraphQuery, now: float) -> bytes:
        at = now if query.as_of is None else query.as_of
        node_r = self.node_retention(at)
        shown = (self.created <= at) & (node_r >= query.min_retention)
        if query.kind is not None:
            shown &= self.kinds == query.kind
        edges = self.edges_valid(at, query.include_invalid)
        center = None
        if query.center is not None:
            center = self.index[query.center]
            shown &= self.neighbourhood(center, query.depth, edges)
            shown[center] = self.created[center] <= at
        matching = int(shown.sum())
        picked = np.flatnonzero(shown)
        truncated = matching > query.limit
        if truncated:  # the most retained nodes (then the most mentioned), and the centre
            order = np.lexsort((-self.mentions[picked], -node_r[picked]))
            picked = np.sort(picked[order[: query.limit]])
            if center is not None and center not in picked and shown[center]:
                picked = np.sort(np.append(picked[:-1], center))
        keep = np.zeros(len(self.ids), dtype=bool)
        keep[picked] = True
        edge_pick = np.flatnonzero(edges & keep[self.src] & keep[self.dst]) if len(self.edge_ids) else picked[:0]
        edge_r = self.edge_retention(at)
        node_json, edge_json = self.node_json, self.edge_json
        parts = [b'{"nodes":[',
                 b",".join([node_json[i] + b"%.4f}" % r for i, r in zip(picked.tolist(), node_r[picked].tolist(),
                                                                       strict=True)]),
                 b'],"edges":[',
                 b",".join([edge_json[i] + b"%.4f}" % r for i, r in zip(edge_pick.tolist(),
                                                                       edge_r[edge_pick].tolist(), strict=True)]),
                 b"],", orjson.dumps({"total_nodes": matching, "total_edges": int(edges.sum()),
                                      "returned_nodes": len(picked), "returned_edges": len(edge_pick),
                                      "truncated": bool(truncated), "as_of": iso_at(at),
                                      "min_retention": query.min_retention})[1:]]
        return b"".join(parts)


class GraphViews:
    """The cached :class:`Snapshot` of each user, rebuilt on first use after a change."""

    def __init__(self, store: GraphStore, clock: Callable[[], float] = time.time):
        self.store = store
        self.clock = clock
        self._lock = threading.Lock()
        self._snapshots: dict[str, Snapshot] = {}
        self._versions: dict[str, int] = {}
        self._plain: dict[str, dict[tuple[str, bytes], str]] = {}
        self._embeddings: dict[str, tuple[list[str], np.ndarray | None]] = {}

    def changed(self, user_id: str, *, removed: bool = False) -> None:
        user = str(user_id)
        with self._lock:
            self._versions[user] = self._versions.get(user, 0) + 1
            self._snapshots.pop(user, None)
            if removed:
                self._embeddings.pop(user, None)

    def version(self, user_id: str) -> int:
        return self._versions.get(str(user_id), 0)

    def snapshot(self, user_id: str) -> Snapshot:
        user = str(user_id)
        with self._lock:
            cached = self._snapshots.get(user)
            version = self._versions.get(user, 0)
        if cached is not None:
            return cached
        built = Snapshot(self.store, user, self._plain.setdefault(user, {}))
        with self._lock:
            if self._versions.get(user, 0) == version:
                self._snapshots[user] = built
                live = {*built.ids, *built.edge_ids}  # forget the plaintext of what is gone
                plain = self._plain[user]
                for key in [k for k in plain if k[0] not in live]:
                    del plain[key]
        return built

    # --- entity resolution and search ---------------------------------------------------------------

    def embeddings(self, user_id: str) -> tuple[list[str], np.ndarray | None]:
        user = str(user_id)
        with self._lock:
            cached = self._embeddings.get(user)
        if cached is None:
            cached = self.store.embeddings(user)
            with self._lock:
                self._embeddings[user] = cached
        return cached

    def add_embedding(self, user_id: str, node_id: str, vector: np.ndarray | None) -> None:
        if vector is None:
            return
        ids, matrix = self.embeddings(user_id)
        row = np.asarray(vector, dtype=np.float32).reshape(1, -1)
        with self._lock:
            self._embeddings[str(user_id)] = ([*ids, node_id], row if matrix is None else np.vstack([matrix, row]))

    def search(self, user_id: str, text: str, limit: int = 10,
               vector: np.ndarray | None = None) -> list[tuple[str, float]]:
        """Node ids for a name: fuzzy match on names and aliases (rapidfuzz WRatio, 0..1), and cosine of
        the name embeddings when ``vector`` is given; each node's best score, highest first."""
        from rapidfuzz import fuzz, process

        snap = self.snapshot(user_id)
        scores: dict[str, float] = {}
        key = normalise_name(text)
        choices: list[str] = []
        owners: list[int] = []
        for i, (name, aliases) in enumerate(zip(snap.names, snap.aliases, strict=True)):
            for candidate in (name, *aliases):
                choices.append(normalise_name(candidate))
                owners.append(i)
        if key and choices:
            for _, score, pos in process.extract(key, choices, scorer=fuzz.WRatio, limit=limit * 3,
                                                 score_cutoff=60):
                node = snap.ids[owners[pos]]
                scores[node] = max(scores.get(node, 0.0), score / 100.0)
        if vector is not None:
            ids, matrix = self.embeddings(user_id)
            if matrix is not None and len(ids):
                sims = matrix @ np.asarray(vector, dtype=np.float32)
                for pos in np.argsort(-sims)[:limit]:
                    if sims[pos] >= 0.5 and ids[pos] in snap.index:
                        scores[ids[pos]] = max(scores.get(ids[pos], 0.0), float(sims[pos]))
        return sorted(scores.items(), key=lambda kv: -kv[1])[:limit]

    def names(self, user_id: str, node_ids: Sequence[str]) -> dict[str, str]:
        snap = self.snapshot(user_id)
        return {n: snap.names[snap.index[n]] for n in node_ids if n in snap.index}
