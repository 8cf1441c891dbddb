"""The caller's memories: list (with filters), create, search, stats, decay, get, history, delete.

A user never sees, finds, counts or deletes another user's memories: those answer 404.

Writing or deleting a memory counts as the user's activity for dream mode's idle gate
(:mod:`assistant.dream.activity`): a dream running for the user pauses between two operations.
"""

from __future__ import annotations

import asyncio
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Response

from api.deps import ROLE_READ, CurrentPrincipal, Limit, Offset, ServicesDep, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.memories import (
    DecayResult,
    MemoryCreate,
    MemoryHistoryOut,
    MemoryOut,
    MemoryStats,
    RelevancePartsOut,
    ScoredMemoryOut,
)
from assistant.memory.browse import MemoryFilter
from assistant.memory.browse import list_memories as list_memories_where
from assistant.memory.browse import search_memories as search_where
from assistant.memory.history import memory_history as history_of
from assistant.memory.scoring import relevance_parts
from assistant.memory.store import MemoryStore
from assistant.memory.types import MemoryType

router = APIRouter(prefix="/v1/memories", tags=["memories"])


Store = Annotated[MemoryStore, service("memory", "the memory store is disabled (memory.enabled = false)")]


def active(services: ServicesDep, user: CurrentPrincipal) -> None:
    """The caller is active now (dream mode's idle gate), whatever the write's outcome."""
    if services.dream is not None:
        services.dream.activity.touch(str(user.user_id))


Activity = Depends(active)


def memory_filter(
    memory_type: Annotated[list[str] | None, Query(
        description="Only these types (repeat the parameter for several): stored or request form "
                    "(`Fact`, `tool_result`, `Archived`...). An addition.")] = None,
    min_importance: Annotated[float | None, Query(ge=0.0, le=1.0, description="Importance at least (an addition).")]
    = None,
    max_importance: Annotated[float | None, Query(ge=0.0, le=1.0, description="Importance at most (an addition).")]
    = None,
    created_after: Annotated[str | None, Query(max_length=40, description="Created at or after this ISO 8601 date "
                                                                          "or time (an addition).")] = None,
    created_before: Annotated[str | None, Query(max_length=40, description="Created before this ISO 8601 date or "
                                                                           "time, exclusive (an addition).")] = None,
) -> MemoryFilter:
    """The optional filters of the list and of search (422: an unknown type, a date that is not ISO 8601,
    ``min_importance`` above ``max_importance``)."""
    return MemoryFilter.of(memory_type or (), min_importance, max_importance, created_after, created_before)


Filters = Annotated[MemoryFilter, Depends(memory_filter)]


@router.get("", response_model=list[MemoryOut], responses=error_responses(*AUTH_ERRORS, 422, 503))
def list_memories(
    user: CurrentPrincipal,
    store: Store,
    where: Filters,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[MemoryOut]:
    """The caller's memories, newest first (by created_at), paged by `limit` and `offset`; optionally
    filtered by type, importance range and creation date (additions; an unknown type, a date that is not
    ISO 8601 or `min_importance` above `max_importance` is 422)."""
    return [MemoryOut.of(m) for m in list_memories_where(store, str(user.user_id), where, limit, offset)]


@router.post("", status_code=201, response_model=MemoryOut, dependencies=[Activity],
             responses=error_responses(400, *AUTH_ERRORS, 413, 422, 503))
async def create_memory(body: MemoryCreate, user: CurrentPrincipal, store: Store) -> MemoryOut:
    """Store a memory. The response is the stored memory (content, summary and tags are sealed
    with XChaCha20-Poly1305 at rest; the embedding is computed now)."""
    memory = await asyncio.to_thread(
        store.add, str(user.user_id), body.content, body.summary, MemoryType.parse(body.memory_type),
        body.importance, body.tags,
    )
    return MemoryOut.of(memory)


@router.get("/search", response_model=list[ScoredMemoryOut], responses=error_responses(*AUTH_ERRORS, 422, 503))
async def search_memories(
    user: CurrentPrincipal,
    store: Store,
    q: Annotated[str, Query(min_length=1, max_length=2000, description="What to look for.")],
    where: Filters,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> list[ScoredMemoryOut]:
    """Ranked by the spec's relevance (similarity x 0.50 + importance x 0.20 + freshness x 0.30),
    where similarity fuses dense cosine and keyword BM25. Quarantined memories are never returned;
    archived ones rank lower. Each hit carries `relevance_parts` (an addition): the three weighted
    terms and the archived factor, which give its relevance. The list's filters apply too (additions):
    the best 200 hits are searched and those that pass kept."""
    found = await asyncio.to_thread(search_where, store, str(user.user_id), q, where, limit)
    return [
        ScoredMemoryOut(**MemoryOut.of(s.memory).model_dump(), relevance=round(s.relevance, 6),
                        similarity=round(s.similarity, 6), keyword_score=round(s.keyword, 6),
                        freshness=round(s.freshness, 6),
                        relevance_parts=RelevancePartsOut(**relevance_parts(s, store.weights).as_dict()))
        for s in found
    ]


@router.get("/stats", response_model=MemoryStats, responses=error_responses(*AUTH_ERRORS, 503))
def memory_stats(user: CurrentPrincipal, store: Store) -> MemoryStats:
    """Count per type, with display names (`Tool Result`)."""
    return MemoryStats(**store.stats(str(user.user_id)))


@router.post("/decay", response_model=DecayResult, responses=error_responses(*AUTH_ERRORS, 503))
async def decay_memories(user: CurrentPrincipal, store: Store) -> DecayResult:
    """Run one decay cycle now over the caller's memories and say what changed. Time is counted
    from each memory's previous decay, so running it twice does not charge the idle time twice.
    Then the clean-up: a memory at or below `memory.min_importance` for
    `memory.cleanup_after_days` (30) days in a row is archived (`cleaned_up` counts them)."""
    report = await asyncio.to_thread(store.decay, str(user.user_id))
    return DecayResult(ran_at=report.ran_at, processed=report.processed, changed=report.changed,
                       cleaned_up=report.cleaned_up, changes=report.changes)


@router.get("/{memory_id}", response_model=MemoryOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def get_memory(memory_id: UUID, user: CurrentPrincipal, store: Store) -> MemoryOut:
    return MemoryOut.of(store.get(str(user.user_id), str(memory_id)))


@router.get("/{memory_id}/history", response_model=MemoryHistoryOut,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503), summary="A memory's history",
            description="The memory's life, oldest first (an addition): created (type, importance when still "
                        "the stored one), text merged, every dream journal entry naming it (consolidated, "
                        "deduplicated, archived, decayed; details and before/after snapshots), the last decay "
                        "run, the clean-up clock, archived, quarantined (the reason: sealed at rest, opened for "
                        "its owner), restored, and the last access with the access count (only the last one is "
                        "kept). `decay` applies the decay formula to it now: parameters, effective rate, "
                        "freshness, the importance day by day for `days` days of daily runs and when the clean-up "
                        "would archive it." + ROLE_READ + "Owner: only the caller's memories; another user's is "
                        "404, exactly as an unknown id.")
def memory_history(memory_id: UUID, user: CurrentPrincipal, store: Store, services: ServicesDep,
                   days: Annotated[int, Query(ge=1, le=3650, description="Days of decay projection.")] = 90,
                   ) -> MemoryHistoryOut:
    journal = services.dream.store.memory_journal if services.dream is not None else None
    found = history_of(store, str(user.user_id), str(memory_id), journal=journal, days=days)
    return MemoryHistoryOut(memory=MemoryOut.of(found.memory), **found.as_dict())


@router.delete("/{memory_id}", status_code=204, response_class=Response, dependencies=[Activity],
               responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def delete_memory(memory_id: UUID, user: CurrentPrincipal, store: Store) -> Response:
    store.delete(str(user.user_id), str(memory_id))
    return Response(status_code=204)
