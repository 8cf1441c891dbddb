"""The caller's knowledge graph: the graph, its live events, a node with its facts and sources, search.

Every route answers 503 `SERVICE_UNAVAILABLE` while the graph is disabled (checked before the
parameters). A user sees only their own graph: another user's node is 404, exactly as an unknown
one. The graph itself comes from :class:`assistant.graph.service.KnowledgeGraph`, whose cached view
renders the JSON once per request without rebuilding anything: the route sends those bytes as they
are (``benchmarks/graph_api.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, FastAPI, Query, Response
from sse_starlette import EventSourceResponse

from api.deps import CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.knowledge import (
    FactOut,
    KnowledgeGraphOut,
    KnowledgeNodeDetail,
    KnowledgeNodeOut,
    KnowledgeSearchHit,
    SourceMemoryOut,
)
from api.sse import LastEventId, event_id, event_stream
from assistant.errors import ValidationFailed
from assistant.graph.service import KnowledgeGraph
from assistant.graph.types import NodeKind
from assistant.graph.view import GraphQuery

PREFIX = "/api/v1/knowledge"
DISABLED = "the knowledge graph is disabled ([knowledge_graph] enabled = false, or memory.enabled = false)"
GRAPH = service("graph", DISABLED)
Graph = Annotated[KnowledgeGraph, GRAPH]
router = APIRouter(prefix=PREFIX, tags=["knowledge graph"], dependencies=[GRAPH])
MAX_SOURCES = 200

RETENTION = """
**Retention.** Each node and edge has an Ebbinghaus retention R = e^(−t/S): `t` days since it was
last seen (mentioned or recalled), `S` its stability in days, starting at
`memory.ebbinghaus_base_stability` (1.0) and multiplied by `memory.recall_bonus` (1.5) at each recall
(a memory that mentions it is written again, or retrieved into a prompt). Nodes under
`min_retention` (default `knowledge_visualization.min_retention_threshold`, 0.1) are hidden, not
deleted (dream mode prunes or merges them); an edge is shown when both its ends are.
"""

GRAPH_DOC = """The caller's knowledge graph: entities (nodes) and the facts between them (edges), with
retention, weight, kind, mention count and validity. The answer is capped, never paged: at most
`limit` nodes (default and maximum `knowledge_visualization.max_nodes`, 5,000; a larger `limit` is 422
naming the maximum). When more nodes match, `truncated` is true and the **most retained** nodes are
kept (ties: the most mentioned), plus the centre; `total_nodes` says how many matched.
""" + RETENTION + """
**Neighbourhood.** `center` (a node id) with `depth` (1 to 3 hops, default 1) keeps only the nodes within
`depth` edges of it (over the edges valid at the time shown); the centre itself is shown whatever its
retention. An unknown centre, or another user's, is 404.

**Time travel.** `as_of` shows the graph as it was then: nodes created by then; edges whose `valid_at` is
at or before it and that were not invalidated by then (a contradicting fact sets `invalid_at` on the
old edge instead of deleting it: `lives_in Berlin` → `lives_in Reykjavik`). `include_invalid` also shows
the edges invalidated by then. Approximations: names, aliases, mention counts, weights and stabilities
are today's (a recall after `as_of` already counts), a node or edge seen after `as_of` counts as seen at
`as_of` (retention 1.0), and what was deleted since (a memory deleted or quarantined takes its nodes and
edges with it) is not shown.

`kind` keeps the nodes of one kind. Nodes come in storage (creation) order; numbers have at most 4
decimals.
"""


def check_limit(limit: int | None, maximum: int) -> int:
    """``limit`` (default: the maximum); over the maximum is 422 naming it."""
    if limit is None:
        return maximum
    if limit > maximum:
        error = f"must be at most {maximum} (knowledge_visualization.max_nodes) (got {limit})"
        raise ValidationFailed(f"request validation failed: limit: {error}", [{"field": "limit", "error": error}])
    return limit


def epoch(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


@router.get(
    "/graph",
    response_class=Response,
    responses={200: {"model": KnowledgeGraphOut, "description": "The graph (nodes, edges, counts).",
                     "content": {"application/json": {}}},
               **error_responses(*AUTH_ERRORS, 404, 422, 503)},
    summary="The caller's knowledge graph",
    description=GRAPH_DOC,
)
def get_graph(
    user: CurrentPrincipal,
    graph: Graph,
    min_retention: Annotated[float | None, Query(
        ge=0.0, le=1.0, description="Hide nodes whose retention is below this (0 to 1; default "
                                    "`knowledge_visualization.min_retention_threshold`, 0.1).")] = None,
    limit: Annotated[int | None, Query(
        ge=1, description="At most this many nodes (1 to `knowledge_visualization.max_nodes`, which is also the "
                          "default; more is 422 naming the maximum).")] = None,
    center: Annotated[UUID | None, Query(description="A node id: only its neighbourhood (404 if unknown).")] = None,
    depth: Annotated[int, Query(ge=1, le=3, description="Hops from `center`, 1 to 3.")] = 1,
    as_of: Annotated[datetime | None, Query(
        description="Show the graph as it was at this time (ISO 8601; without an offset: UTC).")] = None,
    kind: Annotated[NodeKind | None, Query(description="Only nodes of this kind.")] = None,
    include_invalid: Annotated[bool, Query(
        description="Also the edges a contradiction invalidated (by the time shown).")] = False,
) -> Response:
    shown = graph.visualization
    query = GraphQuery(
        min_retention=shown.min_retention_threshold if min_retention is None else min_retention,
        limit=check_limit(limit, shown.max_nodes),
        center=None if center is None else str(center),
        depth=depth,
        as_of=epoch(as_of),
        kind=None if kind is None else kind.value,
        include_invalid=include_invalid,
    )
    return Response(graph.graph_json(str(user.user_id), query), media_type="application/json")


STREAM_DOC = """Server-Sent Events of the caller's graph (another user's events never): first the stored
events after `Last-Event-ID` (the log keeps the last `knowledge_graph.event_retention` events per user,
10,000), then the live ones, until the client disconnects. A comment line (`: ping`) every 15 s keeps
proxies from closing an idle stream. Each event has the name of its type, an `id` (1, 2, ... per user:
send it back as `Last-Event-ID` to resume after it) and JSON data:

| event | data |
|---|---|
| `NodeCreated` | `{id, name, kind}`: a new entity |
| `NodeDecayed` | `{id, retention, threshold}`: its retention fell under `min_retention_threshold` (once, until recalled) |
| `EdgeCreated` | `{id, source, target, relation, weight}`: a new fact (or co-occurrence); `origin: "dream"` when consolidation connected the two |
| `EdgeInvalidated` | `{id, invalidated_by, relation, invalid_at}`: a contradicting fact replaced it (`invalid_at` ISO 8601) |
| `NodeMerged` | `{id, merged_id, name, aliases}`: dream mode merged node `merged_id` into `id` (its name became an alias) |
| `NodeRemoved` | `{id}`: its last source memory was deleted or quarantined |
| `EdgeRemoved` | `{id}`: its last source memory was deleted or quarantined; `reason: "pruned"` when dream mode pruned it |

Events are delivered after the change is committed, so a node named by an event can be read at once.
"""


@router.get(
    "/graph/stream",
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"},
               **error_responses(*AUTH_ERRORS, 422, 503)},
    summary="Stream the caller's knowledge-graph events",
    description=STREAM_DOC,
)
async def stream_graph(user: CurrentPrincipal, graph: Graph, last_event_id: LastEventId = None) -> EventSourceResponse:
    return event_stream(graph.events.follow(str(user.user_id), after=event_id(last_event_id)))


NODE_DOC = """A node of the caller's graph: its fields (retention now), its **facts** (every edge touching
it, valid or invalidated, oldest first: relation, direction, the other node, weight, validity, source
memories) and its **source memories** (the memories that mention it, newest first, with their decrypted
summaries; at most `sources_limit`: `sources_total` and `sources_truncated` say how many there are).
An unknown node, or another user's, is 404.
""" + RETENTION


@router.get("/nodes/{node_id}", response_model=KnowledgeNodeDetail,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503), summary="A knowledge-graph node",
            description=NODE_DOC)
def get_node(
    node_id: UUID,
    user: CurrentPrincipal,
    graph: Graph,
    sources_limit: Annotated[int, Query(ge=1, le=MAX_SOURCES, description=(
        f"At most this many source memories, 1 to {MAX_SOURCES}."))] = 20,
) -> KnowledgeNodeDetail:
    owner, ident = str(user.user_id), str(node_id)
    now = graph.clock()
    node = graph.node(owner, ident)  # 404 unknown or another user's
    facts = graph.facts(owner, ident)
    names = _names(graph, owner, {e.subject_id for e in facts} | {e.object_id for e in facts})
    sources = graph.sources(owner, ident, sources_limit)
    return KnowledgeNodeDetail(
        **KnowledgeNodeOut.of(node, now).model_dump(),
        facts=[FactOut.of(e, ident, names, now) for e in facts],
        sources=[SourceMemoryOut(id=m.id, summary=m.summary, created_at=m.created_at) for m in sources],
        sources_total=max(node.mention_count, len(sources)),
        sources_truncated=node.mention_count > len(sources),
    )


def _names(graph: KnowledgeGraph, user: str, ids: set[str]) -> dict[str, str]:
    """Node names from the cached view; any it does not hold yet (a change since) from the store."""
    names = graph.views.names(user, sorted(ids))
    missing = sorted(ids - names.keys())
    if missing:
        names.update((r["id"], graph.store.node_from_row(r).name) for r in graph.store.node_rows(user, missing))
    return names


SEARCH_DOC = """Entities of the caller's graph by name: fuzzy matching on names and aliases (typos and word
order forgiven; rapidfuzz WRatio, kept from 0.6) and by meaning (cosine of the name embeddings with the
memory store's embedder, kept from 0.5); each node once with its best score, highest first. Hidden
(low-retention) nodes are found too: their `retention` says so.
"""


@router.get("/search", response_model=list[KnowledgeSearchHit], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="Find knowledge-graph entities", description=SEARCH_DOC)
def search_nodes(
    user: CurrentPrincipal,
    graph: Graph,
    q: Annotated[str, Query(min_length=1, max_length=500, description="A name, part of one, or a description.")],
    limit: Annotated[int, Query(ge=1, le=100, description="At most this many entities, 1 to 100.")] = 10,
) -> list[KnowledgeSearchHit]:
    now = graph.clock()
    return [KnowledgeSearchHit(**KnowledgeNodeOut.of(node, now).model_dump(), score=min(1.0, round(score, 4)))
            for node, score in graph.search(str(user.user_id), q, limit)]


def document_limits(app: FastAPI, max_nodes: int, min_retention: float) -> None:
    """Write this installation's bounds into the OpenAPI document: `limit` of the graph is at most
    `knowledge_visualization.max_nodes` (checked per request), the defaults are the settings'."""
    original: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = original()  # FastAPI keeps it in app.openapi_schema: edited once, here
            operation = document.get("paths", {}).get(f"{PREFIX}/graph", {}).get("get", {})
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "limit":
                    parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": max_nodes,
                                           "default": max_nodes, "title": "Limit"}
                elif parameter["name"] == "min_retention":
                    parameter["schema"] = {"type": "number", "minimum": 0.0, "maximum": 1.0,
                                           "default": min_retention, "title": "Min Retention"}
            return document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
