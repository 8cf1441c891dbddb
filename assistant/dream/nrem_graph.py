"""NREM's graph steps (with a knowledge graph only): review weak edges, merge duplicate nodes.

**Review edges** (EdgePruned / EdgeWeightUpdated): up to ``nrem.max_edge_reviews_per_cycle`` valid
edges whose strength (weight x retention, :meth:`KnowledgeGraph.weak_edges`) is under
``nrem.edge_prune_threshold``, weakest first. The rule:

- the edge was **used**: recalled at least once (``recalls``), or one of its source memories was
  accessed (``access_count`` > 0);
- its sources are **present**: at least one source memory still exists and is not Quarantined
  (an Archived memory is present: it is still searchable), or it has none (an edge dream mode
  created, ``origin = 'dream'``);
- used and present: **reweight** up by ``REWEIGHT_STEP`` (capped at 1); otherwise **prune**.

Each edge is reviewed once per session (key ``edge:<id>:<session>``).

**Merge nodes** (NodeMerged): two nodes of the same kind are one entity when their normalised
names are equal or their name embeddings have a cosine of at least
``knowledge_graph.resolution_threshold`` (what resolution itself uses when a mention arrives;
pairs found by :func:`pairs.near_pairs`), except that names whose numbers differ are never one
entity by embedding, and dates only by name: MiniLM puts "25 August 2023" and "23 August 2023" at
cosine 0.96 ("17 July" / "17 August": 0.96), and merging such dates cost LoCoMo's temporal questions
0.08 of R@5 with graph retrieval (benchmarks/dream.py). The node with more mentions (then the
older) is kept; up to ``rem.max_node_merges_per_cycle`` per cycle, a node taking part in one merge
per cycle.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from assistant.dream.journal import Applied, applier
from assistant.dream.types import JournalEntry, Operation
from assistant.errors import NotFoundError
from assistant.graph.store import normalise_name
from assistant.graph.types import NodeKind
from assistant.memory import pairs
from assistant.memory.types import MemoryType

if TYPE_CHECKING:
    from assistant.dream.deps import DreamDeps
    from assistant.dream.session import PhaseContext
    from assistant.graph.types import Edge

REWEIGHT_STEP = 0.1
_NUMBER = re.compile(r"\d+")
DEFAULT_RESOLUTION = 0.88  # knowledge_graph.resolution_threshold when the graph does not say


def _edge_brief(edge: Edge) -> dict:
    return {"id": edge.id, "relation": edge.relation, "subject_id": edge.subject_id, "object_id": edge.object_id,
            "weight": round(edge.weight, 4), "recalls": edge.recalls, "sources": list(edge.source_memory_ids)[:20]}


class ReviewEdges:
    name = "review_edges"

    def run(self, ctx: PhaseContext) -> None:
        deps = ctx.deps
        graph, s = deps.graph, deps.settings.nrem
        if graph is None or s.max_edge_reviews_per_cycle == 0:
            return
        user = ctx.user_id
        # more than the cap: edges reviewed by an earlier cycle of this session are skipped (their key)
        edges = graph.weak_edges(user, s.edge_prune_threshold, s.max_edge_reviews_per_cycle * (ctx.cycle + 1))
        reviewed = 0
        for edge in edges:
            if reviewed >= s.max_edge_reviews_per_cycle:
                return
            key = f"edge:{edge.id}:{ctx.session.id}"
            if deps.store.applied(user, key):
                continue
            present, used = self._judge(ctx, edge)
            keep = used and (present or not edge.source_memory_ids)
            rule = {"used": used, "sources_present": present}
            if keep:
                weight = min(1.0, edge.weight + REWEIGHT_STEP)
                done = ctx.record(Operation.EDGE_WEIGHT_UPDATED, key,
                                  {"edge_id": edge.id, "from": edge.weight, "to": weight, **rule},
                                  edges=[edge.id], nodes=[edge.subject_id, edge.object_id],
                                  memories=list(edge.source_memory_ids), before={"edge": _edge_brief(edge)})
            else:
                done = ctx.record(Operation.EDGE_PRUNED, key, {"edge_id": edge.id, **rule}, edges=[edge.id],
                                  nodes=[edge.subject_id, edge.object_id], memories=list(edge.source_memory_ids),
                                  before={"edge": _edge_brief(edge)})
            if done is None:
                if ctx.exhausted:
                    return
                continue
            reviewed += 1

    @staticmethod
    def _judge(ctx: PhaseContext, edge: Edge) -> tuple[bool, bool]:
        ids = list(edge.source_memory_ids)
        rows = []
        if ids:
            marks = ",".join("?" * len(ids))
            rows = ctx.deps.memory.db.query(
                f"SELECT memory_type, access_count FROM memory_rows WHERE +user_id = ? AND id IN ({marks})",
                (ctx.user_id, *ids))
        present = [r for r in rows if r["memory_type"] != MemoryType.QUARANTINED.value]
        used = edge.recalls > 0 or any(int(r["access_count"]) > 0 for r in present)
        return bool(present), used


@applier(Operation.EDGE_PRUNED)
def apply_prune(deps: DreamDeps, entry: JournalEntry) -> Applied:
    if deps.graph is None:
        raise RuntimeError("the knowledge graph is off")
    event = deps.graph.prune_edge(entry.user_id, entry.details["edge_id"])
    return Applied(after={"pruned": event is not None}, count=int(event is not None))


@applier(Operation.EDGE_WEIGHT_UPDATED)
def apply_reweight(deps: DreamDeps, entry: JournalEntry) -> Applied:
    """Sets the planned weight (the same value again on a replay); an edge gone since: nothing."""
    if deps.graph is None:
        raise RuntimeError("the knowledge graph is off")
    d = entry.details
    try:
        deps.graph.set_edge_weight(entry.user_id, d["edge_id"], d["to"])
    except NotFoundError:
        return Applied(after={"edge_id": d["edge_id"], "gone": True}, count=0)
    return Applied(after={"edge_id": d["edge_id"], "weight": d["to"]})


class MergeNodes:
    name = "merge_nodes"

    def run(self, ctx: PhaseContext) -> None:
        deps = ctx.deps
        graph, cap = deps.graph, deps.settings.rem.max_node_merges_per_cycle
        if graph is None or cap == 0:
            return
        user = ctx.user_id
        threshold = getattr(getattr(graph, "settings", None), "resolution_threshold", DEFAULT_RESOLUTION)
        nodes = [graph.store.node_from_row(r, with_embedding=True) for r in graph.store.node_rows(user)]
        found: list[tuple[float, int, int]] = []  # (similarity, a, b)
        by_name: dict[tuple[str, str], int] = {}
        for n, node in enumerate(nodes):
            name = (node.kind.value, normalise_name(node.name))
            if name in by_name:
                found.append((1.0, by_name[name], n))
            else:
                by_name[name] = n
        for kind in {node.kind for node in nodes} - {NodeKind.DATE}:
            members = [n for n, node in enumerate(nodes) if node.kind is kind and node.embedding is not None]
            if len(members) < 2:
                continue
            vectors = np.vstack([nodes[n].embedding for n in members])
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            i, j, sims = pairs.near_pairs(vectors, threshold - 1e-6)
            found += [(float(s), members[a], members[b]) for a, b, s in zip(i.tolist(), j.tolist(), sims.tolist(),
                                                                             strict=True)
                      if _NUMBER.findall(nodes[members[a]].name) == _NUMBER.findall(nodes[members[b]].name)]
        found.sort(key=lambda f: (-f[0], f[1], f[2]))
        touched: set[int] = set()
        merged = 0
        for similarity, a, b in found:
            if merged >= cap:
                return
            if a in touched or b in touched:
                continue
            keep, gone = sorted((nodes[a], nodes[b]), key=lambda x: (-x.mention_count, x.created_at, x.id))
            key = f"node-merge:{min(keep.id, gone.id)}:{max(keep.id, gone.id)}"
            details = {"keep_id": keep.id, "merged_id": gone.id, "similarity": round(similarity, 4),
                       "rule": "same name" if similarity >= 1.0 else "name embedding"}
            before = {"keep": {"id": keep.id, "name": keep.name[:200], "kind": keep.kind.value,
                               "mentions": keep.mention_count},
                      "merged": {"id": gone.id, "name": gone.name[:200], "kind": gone.kind.value,
                                 "mentions": gone.mention_count}}
            done = ctx.record(Operation.NODE_MERGED, key, details, nodes=[keep.id, gone.id], before=before)
            if done is None:
                if ctx.exhausted:
                    return
                continue
            touched |= {a, b}
            merged += 1


@applier(Operation.NODE_MERGED)
def apply_node_merge(deps: DreamDeps, entry: JournalEntry) -> Applied:
    """``merge_nodes`` is idempotent (a node already merged: None); a survivor gone since: nothing."""
    if deps.graph is None:
        raise RuntimeError("the knowledge graph is off")
    d = entry.details
    try:
        event = deps.graph.merge_nodes(entry.user_id, d["keep_id"], d["merged_id"])
    except NotFoundError:
        event = None
    return Applied(after={"kept": d["keep_id"], "merged": event is not None}, count=int(event is not None))
