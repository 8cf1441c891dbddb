"""This server's own tools, beside the registered assistant tools: memory search (with the relevance
breakdown ``GET /v1/memories/search`` gives) and store, snippets (list or search, get, create) and dream
insights (list, confirm, dismiss).

They are :func:`assistant.tools.base.tool` functions (schema from the signature, arguments validated the
same way); their context's backends are the services' stores (``memory``, ``snippets``, ``dream``), so a
disabled part answers "the ... capability is not configured" as a tool error. Every call is for the
context's user: another user's snippet or insight is not found, exactly as an unknown one.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from pydantic import Field

from assistant.dream.types import InsightStatus, InsightType
from assistant.memory.types import CREATABLE, Memory, MemoryType
from assistant.tools.base import Tool, ToolContext, ToolError, tool

TYPES = [t.request_value for t in CREATABLE]


def memory_json(m: Memory) -> dict[str, Any]:
    """A memory as ``GET /v1/memories/{id}`` shows it."""
    return {"id": m.id, "content": m.content, "summary": m.summary, "memory_type": m.memory_type.value,
            "importance": m.importance, "access_count": m.access_count, "tags": list(m.tags),
            "created_at": m.created_at, "updated_at": m.updated_at}


def _touch(ctx: ToolContext) -> None:
    """The user is active (dream mode's idle gate), as a memory written over HTTP says."""
    dream = ctx.backends.get("dream")
    if dream is not None:
        dream.activity.touch(str(ctx.user_id))


@tool("mcp", icon="🔎")
def memory_search(
    ctx: ToolContext,
    query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for.")],
    limit: Annotated[int, Field(ge=1, le=100, description="How many memories at most.")] = 10,
) -> list[dict]:
    """Search the user's memories, most relevant first, each with its relevance breakdown.

    relevance = similarity x 0.50 + importance x 0.20 + freshness x 0.30; similarity fuses the dense cosine
    and the BM25 keyword score (both given). Quarantined memories are never returned."""
    found = ctx.backend("memory").search(str(ctx.user_id), query, limit)
    return [{**memory_json(s.memory), "relevance": round(s.relevance, 6), "similarity": round(s.similarity, 6),
             "keyword_score": round(s.keyword, 6), "freshness": round(s.freshness, 6)} for s in found]


@tool("mcp", icon="🧠")
def memory_store(
    ctx: ToolContext,
    content: Annotated[str, Field(min_length=1, max_length=20_000, description="The memory's text, in full.")],
    memory_type: Annotated[str, Field(description=f"One of {', '.join(TYPES)}.")] = "context",
    importance: Annotated[float, Field(ge=0.0, le=1.0, description="0.0 to 1.0")] = 0.5,
    summary: Annotated[str | None, Field(max_length=20_000, description="A short summary (default: made from "
                                                                          "the content).")] = None,
    tags: Annotated[list[str], Field(max_length=20, description="Labels.")] = [],  # noqa: B006 - pydantic copies
) -> dict:
    """Store a memory for the user (sealed at rest, embedded now); returns it with its id."""
    if not content.strip():
        raise ToolError("content must not be blank")
    memory = ctx.backend("memory").add(str(ctx.user_id), content, summary, MemoryType.parse(memory_type),
                                       importance, tags)
    _touch(ctx)
    return memory_json(memory)


def _snippet(s: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(s).items() if k != "user_id"}


@tool("mcp", icon="📋")
def snippet_list(
    ctx: ToolContext,
    query: Annotated[str | None, Field(max_length=500, description="Only snippets whose title contains "
                                                                     "this (ignoring case).")] = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0,
) -> dict:
    """The user's snippets by title A to Z, or those whose title contains ``query`` (exact matches first);
    ``total`` counts all that match."""
    store = ctx.backend("snippets")
    user = str(ctx.user_id)
    page = store.search(user, query, limit, offset) if query and query.strip() else store.list(user, limit, offset)
    return {"snippets": [_snippet(s) for s in page.snippets], "total": page.total, "limit": limit, "offset": offset}


@tool("mcp", icon="📋")
def snippet_get(
    ctx: ToolContext,
    snippet_id: Annotated[str, Field(min_length=1, max_length=64, description="The snippet's id.")],
    resolved: Annotated[bool, Field(description="Expand the snippets it references by title.")] = False,
) -> dict:
    """One of the user's snippets (another user's is not found)."""
    store = ctx.backend("snippets")
    if resolved:
        return dataclasses.asdict(store.resolved(str(ctx.user_id), snippet_id))
    return _snippet(store.get(str(ctx.user_id), snippet_id))


@tool("mcp", icon="📋")
def snippet_create(
    ctx: ToolContext,
    title: Annotated[str, Field(min_length=1, max_length=200, description="A title, unique for the user.")],
    content: Annotated[str, Field(max_length=100_000, description="The text.")] = "",
) -> dict:
    """Create a snippet for the user; returns it with its id."""
    return _snippet(ctx.backend("snippets").create(str(ctx.user_id), title, content))


def _choice(kind: type, value: str | None) -> Any:
    if value is None:
        return None
    for member in kind:
        if member.value.lower() == value.strip().lower():
            return member
    raise ToolError(f"must be one of {', '.join(m.value for m in kind)} (got {value!r})")


@tool("mcp", icon="💭")
def insight_list(
    ctx: ToolContext,
    insight_type: Annotated[str | None, Field(max_length=20, description="pattern, connection, suggestion or "
                                                                          "hypothesis.")] = None,
    status: Annotated[str | None, Field(max_length=20, description="active, confirmed, dismissed or "
                                                                    "expired.")] = None,
    limit: Annotated[int, Field(ge=1, le=1000)] = 100,
    offset: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0,
) -> dict:
    """The user's dream insights, newest first; ``total`` counts all that match the filters."""
    found, total = ctx.backend("dream").insights.list(
        str(ctx.user_id), insight_type=_choice(InsightType, insight_type), status=_choice(InsightStatus, status),
        limit=limit, offset=offset)
    return {"insights": [i.to_json() for i in found], "total": total, "limit": limit, "offset": offset}


@tool("mcp", icon="💭")
def insight_confirm(
    ctx: ToolContext,
    insight_id: Annotated[str, Field(min_length=1, max_length=64, description="The insight's id.")],
) -> dict:
    """Confirm an active insight (a hypothesis is merged into memory at once, if confident enough)."""
    return ctx.backend("dream").insights.confirm(str(ctx.user_id), insight_id).to_json()


@tool("mcp", icon="💭")
def insight_dismiss(
    ctx: ToolContext,
    insight_id: Annotated[str, Field(min_length=1, max_length=64, description="The insight's id.")],
) -> dict:
    """Dismiss an active or expired insight (final)."""
    return ctx.backend("dream").insights.dismiss(str(ctx.user_id), insight_id).to_json()


SERVICE_TOOLS: tuple[Tool, ...] = (memory_search, memory_store, snippet_list, snippet_get, snippet_create,
                                   insight_list, insight_confirm, insight_dismiss)
