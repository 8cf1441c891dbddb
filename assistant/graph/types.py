"""The knowledge graph's types: what extraction returns, what is stored, what is published.

Extraction works on :class:`Passage` s (a memory's text and who said it) and returns one
:class:`Extraction` per passage: :class:`Entity` s and :class:`Fact` s naming entities by their
surface name. The service resolves names to stored :class:`Node` s and facts to :class:`Edge` s.

Edges are bi-temporal (after Zep/Graphiti): ``valid_at`` is when the fact started to hold (its
first source memory), ``invalid_at`` when a contradicting fact replaced it. An invalidated edge is
kept, so the graph as it was at any past time can be shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

ME = "me"  # the node of the user themself: "I live in Berlin" is (me, lives_in, Berlin)
RELATED = "related_to"  # the relation of a co-occurrence edge (two entities named in one memory)


class NodeKind(StrEnum):
    PERSON = "person"
    PLACE = "place"
    ORGANISATION = "organisation"
    DATE = "date"
    EVENT = "event"
    THING = "thing"
    TOPIC = "topic"  # a keyphrase

    @classmethod
    def parse(cls, value: str | None) -> NodeKind:
        """A kind from free text (an engine's answer): unknown or missing kinds are topics."""
        text = (value or "").strip().lower()
        aliases = {"organization": "organisation", "org": "organisation", "location": "place", "city": "place",
                   "country": "place", "time": "date", "object": "thing", "concept": "topic"}
        text = aliases.get(text, text)
        try:
            return cls(text)
        except ValueError:
            return cls.TOPIC


@dataclass(frozen=True)
class Passage:
    """What an extractor reads: a memory's text, and who said it when that is known."""

    text: str
    speaker: str | None = None  # None: the user themself (a chat message)
    memory_id: str | None = None


@dataclass(frozen=True)
class Entity:
    name: str
    kind: NodeKind = NodeKind.TOPIC


@dataclass(frozen=True)
class Fact:
    """(subject, relation, object) by entity name; ``relation`` is snake_case (``lives_in``)."""

    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class Extraction:
    entities: tuple[Entity, ...] = ()
    facts: tuple[Fact, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Entities and facts of passages, one :class:`Extraction` per passage, in order.

    A passage whose output is unusable gives an empty :class:`Extraction` (and is counted by the
    extractor's ``failures``), never an exception; only an unavailable backend raises."""

    id: str

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]: ...


@dataclass(frozen=True)
class Node:
    id: str
    user_id: str
    name: str
    kind: NodeKind
    aliases: tuple[str, ...]
    created_at: float  # epoch seconds
    last_seen: float  # last mention or recall: retention counts from here
    mention_count: int
    recalls: int
    stability: float  # days; base x recall_bonus ** recalls
    embedding: Any = None  # np.ndarray | None


@dataclass(frozen=True)
class Edge:
    id: str
    user_id: str
    subject_id: str
    relation: str
    object_id: str
    weight: float
    valid_at: float
    invalid_at: float | None
    created_at: float
    last_seen: float
    recalls: int
    stability: float
    source_memory_ids: tuple[str, ...] = field(default=())
    invalidated_by: str | None = None  # the edge that contradicted this one


class GraphEventType(StrEnum):
    NODE_CREATED = "NodeCreated"
    NODE_DECAYED = "NodeDecayed"  # retention fell under knowledge_visualization.min_retention_threshold
    EDGE_CREATED = "EdgeCreated"
    EDGE_INVALIDATED = "EdgeInvalidated"  # a contradicting fact replaced it
    NODE_MERGED = "NodeMerged"
    NODE_REMOVED = "NodeRemoved"  # its last source memory was deleted or quarantined
    EDGE_REMOVED = "EdgeRemoved"


@dataclass(frozen=True)
class GraphEvent:
    seq: int  # 1, 2, ... per user: the SSE id (Last-Event-ID)
    user_id: str
    type: GraphEventType
    data: dict[str, Any]
    created_at: float
