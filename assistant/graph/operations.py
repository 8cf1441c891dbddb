"""What consolidation does to the graph: merge two nodes, prune or re-weight an edge, connect two nodes.

These are the graph sides of the dream journal's operations (NodeMerged, EdgePruned,
EdgeWeightUpdated, EdgeCreated). Each runs in one transaction, publishes its event after the commit
(``NodeMerged``, ``EdgeRemoved`` with ``reason: "pruned"``, ``EdgeCreated``) and is idempotent where
the journal may replay it: merging a node that is already gone, or pruning an edge that is already
gone, changes nothing and returns None. A mixin of :class:`~assistant.graph.service.KnowledgeGraph`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from assistant.errors import NotFoundError, ValidationFailed
from assistant.graph import retention as R
from assistant.graph.types import Edge, GraphEvent, GraphEventType

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from assistant.graph.events import GraphEvents
    from assistant.graph.store import GraphStore
    from assistant.graph.view import GraphViews
    from assistant.storage.db import Database


class GraphOperations:
    db: Database
    store: GraphStore
    views: GraphViews
    events: GraphEvents
    clock: Callable[[], float]
    base_stability: float

    def _deliver(self, events: list[GraphEvent]) -> None: ...

    def merge_nodes(self, user_id: str, keep_id: str, merged_id: str) -> GraphEvent | None:
        """``merged_id`` becomes part of ``keep_id``: its name and aliases become aliases, its
        mentions and edges move over (a duplicate fact joins the existing edge's sources, a fact
        between the two becomes nothing), then it is deleted. None if ``merged_id`` is already gone."""
        user = str(user_id)
        if keep_id == merged_id:
            raise ValidationFailed("a node cannot be merged into itself", [{"field": "merged_id",
                                                                              "error": "same as keep_id"}])
        keep = self.store.node(user, keep_id)  # NotFoundError when the survivor is missing
        try:
            merged = self.store.node(user, merged_id)
        except NotFoundError:
            return None
        with self.db.transaction() as db:
            for alias in (merged.name, *merged.aliases):
                if self.store.add_alias(db, keep, alias):
                    keep = self.store.node(user, keep_id)
            db.execute("INSERT OR IGNORE INTO kg_names (user_id, token, node_id) SELECT user_id, token, ? "
                       "FROM kg_names WHERE node_id = ?", (keep_id, merged_id))
            db.execute("INSERT OR IGNORE INTO kg_mentions (node_id, memory_id, user_id) SELECT ?, memory_id, user_id "
                       "FROM kg_mentions WHERE node_id = ?", (keep_id, merged_id))
            for row in db.query("SELECT id, subject_id, object_id, relation_token, invalid_ts FROM kg_edges "
                                "WHERE subject_id = ? OR object_id = ?", (merged_id, merged_id)):
                subject = keep_id if row["subject_id"] == merged_id else row["subject_id"]
                obj = keep_id if row["object_id"] == merged_id else row["object_id"]
                if subject == obj:
                    continue  # a fact between the two: gone with the merged node
                twin = db.one("SELECT id FROM kg_edges WHERE user_id = ? AND subject_id = ? AND object_id = ? AND "
                              "relation_token = ? AND invalid_ts IS NULL AND id != ?",
                              (user, subject, obj, row["relation_token"], row["id"]))
                if twin is not None and row["invalid_ts"] is None:
                    db.execute("INSERT OR IGNORE INTO kg_edge_sources (edge_id, memory_id) SELECT ?, memory_id "
                               "FROM kg_edge_sources WHERE edge_id = ?", (twin["id"], row["id"]))
                    continue
                db.execute("UPDATE kg_edges SET subject_id = ?, object_id = ? WHERE id = ?", (subject, obj, row["id"]))
            db.execute(
                "UPDATE kg_nodes SET created_ts = min(created_ts, ?), last_seen_ts = max(last_seen_ts, ?), "
                "stability = max(stability, ?), recalls = max(recalls, ?), "
                "mention_count = (SELECT count(*) FROM kg_mentions m WHERE m.node_id = kg_nodes.id) WHERE id = ?",
                (merged.created_at, merged.last_seen, merged.stability, merged.recalls, keep_id))
            db.execute("DELETE FROM kg_nodes WHERE id = ?", (merged_id,))  # its remaining edges and names cascade
            event = self.events.append(db, user, GraphEventType.NODE_MERGED, {
                "id": keep_id, "merged_id": merged_id, "name": keep.name, "aliases": list(keep.aliases)})
        self.views.changed(user, removed=True)
        self._deliver([event])
        return event

    def prune_edge(self, user_id: str, edge_id: str) -> GraphEvent | None:
        """Delete an edge (a weak one dream mode reviewed); None if it is already gone."""
        user = str(user_id)
        with self.db.transaction() as db:
            row = db.one("SELECT id FROM kg_edges WHERE id = ? AND user_id = ?", (edge_id, user))
            if row is None:
                return None
            db.execute("UPDATE kg_edges SET invalid_ts = NULL, invalidated_by = NULL WHERE invalidated_by = ?",
                       (edge_id,))
            db.execute("DELETE FROM kg_edges WHERE id = ?", (edge_id,))
            event = self.events.append(db, user, GraphEventType.EDGE_REMOVED, {"id": edge_id, "reason": "pruned"})
        self.views.changed(user)
        self._deliver([event])
        return event

    def set_edge_weight(self, user_id: str, edge_id: str, weight: float) -> float:
        """Set an edge's weight (0..1); returns the weight it had."""
        if not 0.0 <= weight <= 1.0:
            raise ValidationFailed("weight must be between 0 and 1", [{"field": "weight", "error": "0..1"}])
        user = str(user_id)
        with self.db.transaction() as db:
            row = db.one("SELECT weight FROM kg_edges WHERE id = ? AND user_id = ?", (edge_id, user))
            if row is None:
                raise NotFoundError(f"edge {edge_id} not found")
            db.execute("UPDATE kg_edges SET weight = ? WHERE id = ?", (weight, edge_id))
        self.views.changed(user)
        return float(row["weight"])

    def connect(self, user_id: str, subject_id: str, relation: str, object_id: str, weight: float = 0.5) -> str:
        """A new edge made by consolidation (``origin = 'dream'``: it has no source memory and is not
        removed for lacking one). An equal valid edge is reused. Returns the edge id."""
        user = str(user_id)
        self.store.node(user, subject_id)
        self.store.node(user, object_id)
        now = self.clock()
        with self.db.transaction() as db:
            existing = self.store.find_edge(db, user, subject_id, relation, object_id)
            if existing is not None:
                return existing["id"]
            edge_id = self.store.insert_edge(db, user, subject_id, relation, object_id, weight=weight, valid_at=now,
                                             now=now, stability=self.base_stability, origin="dream")
            event = self.events.append(db, user, GraphEventType.EDGE_CREATED, {
                "id": edge_id, "source": subject_id, "target": object_id, "relation": relation, "weight": weight,
                "origin": "dream"})
        self.views.changed(user)
        self._deliver([event])
        return edge_id

    def move_sources(self, user_id: str, memory_ids: Sequence[str], to_memory_id: str) -> int:
        """The memories were merged into ``to_memory_id`` (dream consolidation archives them): what
        they mention and the facts they source become the merged memory's, so nodes and edges keep
        their history and the graph leads to the merged memory, not to its archived sources.
        Idempotent (moved rows are gone). Returns how many rows were moved."""
        user, ids = str(user_id), [str(i) for i in memory_ids if i != to_memory_id]
        if not ids:
            return 0
        marks = ",".join("?" * len(ids))
        with self.db.transaction() as db:
            nodes = [r["node_id"] for r in db.query(
                f"SELECT DISTINCT node_id FROM kg_mentions WHERE user_id = ? AND memory_id IN ({marks})", (user, *ids))]
            edges = [r["edge_id"] for r in db.query(
                f"SELECT s.edge_id FROM kg_edge_sources s JOIN kg_edges e ON e.id = s.edge_id WHERE e.user_id = ? "
                f"AND s.memory_id IN ({marks})", (user, *ids))]
            if not nodes and not edges:
                return 0
            db.execute(f"INSERT OR IGNORE INTO kg_mentions (node_id, memory_id, user_id) SELECT node_id, ?, user_id "
                       f"FROM kg_mentions WHERE user_id = ? AND memory_id IN ({marks})", (to_memory_id, user, *ids))
            db.execute(f"DELETE FROM kg_mentions WHERE user_id = ? AND memory_id IN ({marks})", (user, *ids))
            emarks = ",".join("?" * len(set(edges)))
            if edges:
                db.execute(f"INSERT OR IGNORE INTO kg_edge_sources (edge_id, memory_id) SELECT DISTINCT edge_id, ? "
                           f"FROM kg_edge_sources WHERE edge_id IN ({emarks}) AND memory_id IN ({marks})",
                           (to_memory_id, *set(edges), *ids))
                db.execute(f"DELETE FROM kg_edge_sources WHERE edge_id IN ({emarks}) AND memory_id IN ({marks})",
                           (*set(edges), *ids))
            if nodes:
                nmarks = ",".join("?" * len(nodes))
                db.execute(f"UPDATE kg_nodes SET mention_count = (SELECT count(*) FROM kg_mentions m WHERE "
                           f"m.node_id = kg_nodes.id) WHERE id IN ({nmarks})", nodes)
        self.views.changed(user)
        return len(nodes) + len(edges)

    def weak_edges(self, user_id: str, below: float, limit: int, now: float | None = None) -> list[Edge]:
        """Valid edges whose strength (weight x retention now) is under ``below``, weakest first: what
        dream mode reviews (``edge_prune_threshold``, ``max_edge_reviews_per_cycle``)."""
        now = self.clock() if now is None else now
        rows = self.db.query("SELECT * FROM kg_edges WHERE user_id = ? AND invalid_ts IS NULL", (str(user_id),))
        if not rows:
            return []
        strength = np.array([r["weight"] for r in rows]) * np.atleast_1d(R.retention_at(
            now, np.array([r["last_seen_ts"] for r in rows]), np.array([r["stability"] for r in rows])))
        order = [i for i in np.argsort(strength) if strength[i] < below][:limit]
        sources = self.store.sources([rows[i]["id"] for i in order])
        return [self.store.edge_from_row(rows[i], sources.get(rows[i]["id"], ())) for i in order]

