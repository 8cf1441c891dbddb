"""Graph integrity: what in the user's knowledge graph no longer stands on anything, found (read
only, :func:`scan`) and fixed inside the run's transaction (:func:`apply`).

- **orphan nodes**: no memory mentions them any more;
- **dangling edges**: an end node is gone, or the edge that invalidated it is (then the edge is valid
  again, as when the graph removes a replacing edge); also source and mention links to rows that do
  not exist (possible only if foreign keys were ever off);
- **unsourced edges**: extraction edges whose every source memory is quarantined (or none is left).

Fixing withdraws what quarantined memories still contribute (:meth:`KnowledgeGraph.remove` with
``publish=False``: its writes join the run's transaction as a savepoint) and lets the graph prune
what that leaves without a source or a mention. The graph events are delivered by the run after
commit (:func:`deliver`), never for a run that was rolled back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from assistant.memory.types import MemoryType

QUARANTINED = MemoryType.QUARANTINED.value


@dataclass
class GraphPlan:
    orphan_nodes: list[str] = field(default_factory=list)
    dangling_edges: list[str] = field(default_factory=list)  # an end node is missing
    broken_invalidations: list[str] = field(default_factory=list)  # invalidated by an edge that is gone
    dangling_links: int = 0  # kg_edge_sources / kg_mentions rows pointing nowhere
    unsourced_edges: list[str] = field(default_factory=list)
    quarantined_sources: list[str] = field(default_factory=list)  # quarantined memories still in the graph

    @property
    def issues(self) -> int:
        return (len(self.orphan_nodes) + len(self.dangling_edges) + len(self.broken_invalidations)
                + self.dangling_links + len(self.unsourced_edges))

    def counts(self) -> dict[str, int]:
        return {"orphan_nodes": len(self.orphan_nodes), "dangling_edges": len(self.dangling_edges)
                + len(self.broken_invalidations) + self.dangling_links, "unsourced_edges": len(self.unsourced_edges),
                "issues": self.issues}


_LINKS = (  # (what, rows pointing nowhere): deleted by apply
    "kg_edge_sources WHERE edge_id IN (SELECT id FROM kg_edges WHERE user_id = :u) AND memory_id NOT IN "
    "(SELECT id FROM memories)",
    "kg_mentions WHERE user_id = :u AND (node_id NOT IN (SELECT id FROM kg_nodes) OR memory_id NOT IN "
    "(SELECT id FROM memories))",
)


def scan(db: Any, user_id: str) -> GraphPlan:
    """What is wrong with ``user_id``'s graph now (reads only)."""
    u = {"u": str(user_id)}
    plan = GraphPlan()
    plan.orphan_nodes = [r["id"] for r in db.query(
        "SELECT id FROM kg_nodes n WHERE user_id = :u AND NOT EXISTS (SELECT 1 FROM kg_mentions m WHERE "
        "m.node_id = n.id) ORDER BY id", u)]
    plan.dangling_edges = [r["id"] for r in db.query(
        "SELECT id FROM kg_edges e WHERE user_id = :u AND (NOT EXISTS (SELECT 1 FROM kg_nodes n WHERE n.id = "
        "e.subject_id) OR NOT EXISTS (SELECT 1 FROM kg_nodes n WHERE n.id = e.object_id)) ORDER BY id", u)]
    plan.broken_invalidations = [r["id"] for r in db.query(
        "SELECT id FROM kg_edges e WHERE user_id = :u AND invalidated_by IS NOT NULL AND NOT EXISTS "
        "(SELECT 1 FROM kg_edges x WHERE x.id = e.invalidated_by) ORDER BY id", u)]
    plan.dangling_links = sum(int(db.scalar(f"SELECT count(*) FROM {links}", u) or 0) for links in _LINKS)
    dangling = set(plan.dangling_edges)
    plan.unsourced_edges = [r["id"] for r in db.query(
        "SELECT id FROM kg_edges e WHERE user_id = :u AND origin = 'extraction' AND NOT EXISTS (SELECT 1 FROM "
        "kg_edge_sources s JOIN memories m ON m.id = s.memory_id WHERE s.edge_id = e.id AND m.memory_type <> "
        f"'{QUARANTINED}') ORDER BY id", u) if r["id"] not in dangling]
    plan.quarantined_sources = [r["memory_id"] for r in db.query(
        "SELECT s.memory_id FROM kg_edge_sources s JOIN memories m ON m.id = s.memory_id WHERE m.user_id = :u AND "
        f"m.memory_type = '{QUARANTINED}' UNION SELECT k.memory_id FROM kg_mentions k JOIN memories m ON "
        f"m.id = k.memory_id WHERE m.user_id = :u AND m.memory_type = '{QUARANTINED}'", u)]
    return plan


def apply(db: Any, graph: Any, user_id: str, plan: GraphPlan, withdraw: list[str]) -> list[Any]:
    """Fix what ``plan`` found and withdraw ``withdraw`` (memories quarantined by this run) from the
    graph, inside the caller's transaction ``db``; returns the graph events to deliver after commit."""
    u = {"u": str(user_id)}
    if plan.dangling_edges:
        marks = ",".join("?" * len(plan.dangling_edges))
        db.execute(f"DELETE FROM kg_edges WHERE id IN ({marks})", plan.dangling_edges)
    if plan.broken_invalidations:
        marks = ",".join("?" * len(plan.broken_invalidations))
        db.execute(f"UPDATE kg_edges SET invalid_ts = NULL, invalidated_by = NULL WHERE id IN ({marks})",
                   plan.broken_invalidations)
    if plan.dangling_links:
        for links in _LINKS:
            db.execute(f"DELETE FROM {links}", u)
    ids = list(dict.fromkeys([*withdraw, *plan.quarantined_sources]))
    if ids:  # withdraws their links and prunes (edges without a source, nodes without a mention)
        return graph.remove(user_id, ids, publish=False)
    return graph._prune(db, str(user_id))  # nothing to withdraw: the prune alone (orphans, unsourced)


def deliver(graph: Any, user_id: str, events: list[Any]) -> None:
    """After commit: the graph's views reload, its events reach its subscribers."""
    graph.views.changed(str(user_id), removed=True)
    if events:
        graph._deliver(events)
