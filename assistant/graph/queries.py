"""What the knowledge graph answers: the graph (JSON), a node, its facts and sources, search, conflicts.

A mixin of :class:`~assistant.graph.service.KnowledgeGraph` (kept apart to keep modules small); it
reads through the service's ``db``, ``store``, ``views``, ``memory`` and ``visualization``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

from assistant.errors import NotFoundError
from assistant.graph.types import Edge, Node
from assistant.graph.view import GraphQuery

if TYPE_CHECKING:
    from assistant.config import KnowledgeVisualizationSettings
    from assistant.graph.store import GraphStore
    from assistant.graph.view import GraphViews
    from assistant.memory.store import MemoryStore
    from assistant.memory.types import Memory
    from assistant.storage.db import Database


class GraphQueries:
    db: Database
    store: GraphStore
    views: GraphViews
    memory: MemoryStore
    visualization: KnowledgeVisualizationSettings

    def pending(self, user_id: str) -> list[str]: ...

    def graph_json(self, user_id: str, query: GraphQuery | None = None, now: float | None = None) -> bytes:
        """The user's graph as JSON bytes (see :meth:`Snapshot.render`); ``query.center`` must be one of
        the user's nodes (NotFoundError otherwise)."""
        query = query or GraphQuery(self.visualization.min_retention_threshold, self.visualization.max_nodes)
        snap = self.views.snapshot(user_id)  # one snapshot for the check and the answer
        if query.center is not None and query.center not in snap.index:
            raise NotFoundError(f"node {query.center} not found")
        return snap.render(query, self.views.clock() if now is None else now)

    def graph(self, user_id: str, query: GraphQuery | None = None, now: float | None = None) -> dict[str, Any]:
        """:meth:`graph_json` as a dict (notebooks, dashboards)."""
        return orjson.loads(self.graph_json(user_id, query, now))

    def node(self, user_id: str, node_id: str) -> Node:
        return self.store.node(user_id, node_id)

    def facts(self, user_id: str, node_id: str) -> list[Edge]:
        """Every edge touching the node, valid or invalidated, oldest first, with source memories."""
        self.store.node(user_id, node_id)
        return self.store.edges_of(user_id, node_id)

    def sources(self, user_id: str, node_id: str, limit: int = 50) -> list[Memory]:
        """The memories that mention the node (opened), newest first."""
        rows = self.db.query("SELECT memory_id FROM kg_mentions k JOIN memories m ON m.id = k.memory_id "
                             "WHERE k.node_id = ? AND k.user_id = ? ORDER BY m.rowid DESC LIMIT ?",
                             (str(node_id), str(user_id), int(limit)))
        return [self.memory.get(user_id, r["memory_id"]) for r in rows]

    def search(self, user_id: str, text: str, limit: int = 10) -> list[tuple[Node, float]]:
        """Entities by name (fuzzy, aliases too) or by meaning (name embeddings)."""
        vector = self.memory.embedder.embed([text])[0]
        found = self.views.search(user_id, text, limit, vector)
        rows = {r["id"]: r for r in self.store.node_rows(user_id, [n for n, _ in found])}
        return [(self.store.node_from_row(rows[n]), score) for n, score in found if n in rows]

    def conflicts(self, user_id: str) -> list[tuple[Edge, Edge]]:
        """(invalidated edge, the edge that replaced it) pairs: what sanitation quarantines from."""
        rows = self.db.query("SELECT id, invalidated_by FROM kg_edges WHERE user_id = ? AND invalidated_by IS NOT "
                             "NULL ORDER BY invalid_ts", (str(user_id),))
        out = []
        for r in rows:
            old = self._edge(user_id, r["id"])
            new = self._edge(user_id, r["invalidated_by"])
            if old is not None and new is not None:
                out.append((old, new))
        return out

    def _edge(self, user_id: str, edge_id: str) -> Edge | None:
        row = self.db.one("SELECT e.* FROM kg_edges e WHERE e.id = ? AND e.user_id = ?", (edge_id, str(user_id)))
        if row is None:
            return None
        return self.store.edge_from_row(row, self.store.sources([edge_id]).get(edge_id, ()))

    # --- for graph-aware retrieval ------------------------------------------------------------------

    def nodes_of_memories(self, user_id: str, memory_ids: list[str]) -> dict[str, list[str]]:
        """memory id -> the nodes it mentions."""
        return self._mentions(user_id, "memory_id", "node_id", memory_ids)

    def memories_of_nodes(self, user_id: str, node_ids: list[str]) -> dict[str, list[str]]:
        """node id -> the memories that mention it."""
        return self._mentions(user_id, "node_id", "memory_id", node_ids)

    def _mentions(self, user_id: str, key: str, value: str, ids: list[str]) -> dict[str, list[str]]:
        if not ids:
            return {}
        marks = ",".join("?" * len(ids))
        out: dict[str, list[str]] = {}
        for r in self.db.query(f"SELECT {key}, {value} FROM kg_mentions WHERE user_id = ? AND {key} IN ({marks})",
                               (str(user_id), *ids)):
            out.setdefault(r[key], []).append(r[value])
        return out

    def neighbours(self, user_id: str, seeds: dict[str, float], hops: int = 1,
                   now: float | None = None) -> dict[str, float]:
        """Spread ``seeds`` (node id -> score) over valid edges for ``hops`` hops: a neighbour gets
        score x edge weight x edge retention (the best path), seeds keep their own score."""
        snap = self.views.snapshot(user_id)
        if not len(snap) or not seeds:
            return dict(seeds)
        now = self.clock() if now is None else now  # type: ignore[attr-defined]
        score = np.zeros(len(snap), dtype=np.float64)
        for node, value in seeds.items():
            if node in snap.index:
                score[snap.index[node]] = max(score[snap.index[node]], value)
        valid = snap.edges_valid(now)
        src, dst = snap.src[valid], snap.dst[valid]
        strength = (snap.weight * snap.edge_retention(now))[valid]
        for _ in range(hops):
            spread = score.copy()
            np.maximum.at(spread, dst, score[src] * strength)
            np.maximum.at(spread, src, score[dst] * strength)
            score = spread
        return {snap.ids[i]: float(score[i]) for i in np.flatnonzero(score)}

    # --- counts ------------------------------------------------------------------------------------

    def per_user(self) -> dict[str, dict[str, int]]:
        """user id -> {nodes, edges (valid), edges_invalidated, pending} for every user with a graph or
        memories (``assistant graph stats``)."""
        out: dict[str, dict[str, int]] = {}
        for r in self.db.query("SELECT DISTINCT user_id FROM memories UNION SELECT DISTINCT user_id FROM kg_nodes"):
            out[r["user_id"]] = {"nodes": 0, "edges": 0, "edges_invalidated": 0, "pending": 0}
        for r in self.db.query("SELECT user_id, count(*) AS n FROM kg_nodes GROUP BY user_id"):
            out[r["user_id"]]["nodes"] = r["n"]
        for r in self.db.query("SELECT user_id, invalid_ts IS NULL AS valid, count(*) AS n FROM kg_edges "
                               "GROUP BY user_id, valid"):
            out[r["user_id"]]["edges" if r["valid"] else "edges_invalidated"] = r["n"]
        for user, row in out.items():
            row["pending"] = len(self.pending(user))
        return out

    def totals(self) -> dict[str, Any]:
        """Nodes and edges over all users (for /metrics)."""
        return {
            "nodes": int(self.db.scalar("SELECT count(*) FROM kg_nodes")),
            "edges": int(self.db.scalar("SELECT count(*) FROM kg_edges WHERE invalid_ts IS NULL")),
            "edges_invalidated": int(self.db.scalar("SELECT count(*) FROM kg_edges WHERE invalid_ts IS NOT NULL")),
        }
