"""The knowledge graph's answers: the graph (for the document only: the route returns the service's
JSON bytes as they are), a node with its facts and source memories, and search hits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from assistant.clock import iso_at
from assistant.graph import retention as R
from assistant.graph.types import Edge, Node, NodeKind

RETENTION = "Ebbinghaus retention R = e^(-t/S) at the time shown (now, or `as_of`), 0..1, 4 decimals."
STABILITY = "S in days: `memory.ebbinghaus_base_stability` (1.0) x `memory.recall_bonus` (1.5) per recall."
ISO = "ISO 8601, UTC."


class KnowledgeNodeOut(BaseModel):
    id: str = Field(description="The node's id (a UUID).")
    name: str = Field(description="The entity's name as first seen (sealed at rest).")
    kind: NodeKind = Field(description="What the entity is: a person, place, organisation, date, event, thing, or "
                                       "topic (a keyphrase).")
    aliases: list[str] = Field(description="Other names that resolved to this node (by normalised name or name "
                                           "embedding similarity >= `knowledge_graph.resolution_threshold`).")
    mention_count: int = Field(ge=0, description="Memories that mention the entity.")
    recalls: int = Field(ge=0, description="Times it was recalled: mentioned again by a written memory, or mentioned "
                                           "by a memory retrieved into a prompt.")
    stability: float = Field(description=STABILITY)
    created_at: str = Field(description=f"When the entity was first mentioned (the memory's creation time). {ISO}")
    last_seen: str = Field(description=f"Its last mention or recall: retention counts from here. {ISO}")
    retention: float = Field(ge=0.0, le=1.0, description=RETENTION)

    @classmethod
    def of(cls, node: Node, now: float) -> KnowledgeNodeOut:
        return cls(id=node.id, name=node.name, kind=node.kind, aliases=list(node.aliases),
                   mention_count=node.mention_count, recalls=node.recalls, stability=round(node.stability, 4),
                   created_at=iso_at(node.created_at), last_seen=iso_at(node.last_seen),
                   retention=round(float(R.retention_at(now, min(node.last_seen, now), node.stability)), 4))


class KnowledgeEdgeOut(BaseModel):
    id: str = Field(description="The edge's id (a UUID).")
    source: str = Field(description="The subject node's id.")
    target: str = Field(description="The object node's id.")
    relation: str = Field(description="snake_case (`lives_in`, `works_at`); `related_to` for two entities named in "
                                      "one memory (a co-occurrence edge, source < target).")
    weight: float = Field(ge=0.0, le=1.0, description="1.0 for an extracted fact, 0.5 for a co-occurrence; each "
                                                      "further source memory adds half the distance to 1.")
    sources: int = Field(ge=0, description="How many memories state the fact.")
    stability: float = Field(description=STABILITY)
    valid_at: str = Field(description=f"When the fact started to hold: its first source memory's time. {ISO}")
    created_at: str = Field(description=f"When the edge was stored. {ISO}")
    invalid_at: str | None = Field(description=f"When a contradicting fact replaced it (null: still valid). {ISO}")
    invalidated_by: str | None = Field(description="The id of the edge that replaced it.")
    retention: float = Field(ge=0.0, le=1.0, description=RETENTION)


class KnowledgeGraphOut(BaseModel):
    """What ``GET /api/v1/knowledge/graph`` answers (documented here; the route sends the service's
    pre-rendered JSON)."""

    nodes: list[KnowledgeNodeOut] = Field(description="The nodes shown, in storage (creation) order.")
    edges: list[KnowledgeEdgeOut] = Field(description="The edges valid at the time shown whose two ends are both "
                                                      "shown (with `include_invalid`, invalidated ones too).")
    total_nodes: int = Field(ge=0, description="Nodes that match the query before `limit`.")
    total_edges: int = Field(ge=0, description="Edges valid at the time shown (with `include_invalid`: existing "
                                               "then), whatever their ends.")
    returned_nodes: int = Field(ge=0, description="len(nodes).")
    returned_edges: int = Field(ge=0, description="len(edges).")
    truncated: bool = Field(description="True when `total_nodes` > `limit`: the most retained nodes were kept "
                                        "(ties: the most mentioned), and the centre.")
    as_of: str = Field(description=f"The time shown (now unless `as_of` was given). {ISO}")
    min_retention: float = Field(ge=0.0, le=1.0, description="The retention threshold applied.")


class FactOut(BaseModel):
    id: str = Field(description="The edge's id.")
    relation: str = Field(description="snake_case relation (`related_to`: named together in a memory).")
    direction: Literal["out", "in"] = Field(description="`out`: this node is the subject (node -relation-> other); "
                                                        "`in`: it is the object (other -relation-> node).")
    other_id: str = Field(description="The node at the other end.")
    other_name: str = Field(description="Its name.")
    weight: float = Field(ge=0.0, le=1.0)
    retention: float = Field(ge=0.0, le=1.0, description="The edge's retention now.")
    valid_at: str = Field(description=f"When the fact started to hold. {ISO}")
    invalid_at: str | None = Field(description=f"When a contradicting fact replaced it; null while valid. {ISO}")
    invalidated_by: str | None = Field(description="The edge that replaced it.")
    source_memory_ids: list[str] = Field(description="The memories that state the fact.")

    @classmethod
    def of(cls, edge: Edge, node_id: str, names: dict[str, str], now: float) -> FactOut:
        outgoing = edge.subject_id == node_id
        other = edge.object_id if outgoing else edge.subject_id
        return cls(id=edge.id, relation=edge.relation, direction="out" if outgoing else "in", other_id=other,
                   other_name=names.get(other, ""), weight=round(edge.weight, 4),
                   retention=round(float(R.retention_at(now, min(edge.last_seen, now), edge.stability)), 4),
                   valid_at=iso_at(edge.valid_at),
                   invalid_at=None if edge.invalid_at is None else iso_at(edge.invalid_at),
                   invalidated_by=edge.invalidated_by, source_memory_ids=list(edge.source_memory_ids))


class SourceMemoryOut(BaseModel):
    id: str = Field(description="The memory's id (`GET /v1/memories/{id}` has all of it).")
    summary: str = Field(description="Its summary, decrypted.")
    created_at: str = Field(description=ISO)


class KnowledgeNodeDetail(KnowledgeNodeOut):
    facts: list[FactOut] = Field(description="Every edge touching the node, valid or invalidated, oldest first "
                                             "(by `valid_at`).")
    sources: list[SourceMemoryOut] = Field(description="The memories that mention the node, newest first, at most "
                                                       "`sources_limit`.")
    sources_total: int = Field(ge=0, description="How many memories mention the node (= `mention_count`).")
    sources_truncated: bool = Field(description="True when `sources` holds fewer than `sources_total`.")


class KnowledgeSearchHit(KnowledgeNodeOut):
    score: float = Field(ge=0.0, le=1.0, description="The best of: fuzzy name/alias match (rapidfuzz WRatio / 100, "
                                                     "kept from 0.6) and cosine of the name embeddings (kept from "
                                                     "0.5).")
