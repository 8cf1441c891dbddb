"""The caller's quarantined memories: the list with reasons, and restore (beyond the spec, documented).

Sanitation quarantines suspect memories (stale, poisoned, the loser of a contradiction): they never
reach a prompt, and are purged after `sanitation.quarantine_ttl_days`. The user reviews them here and
may give one back its type. A router of its own, registered before `/v1/memories/{memory_id}` (so
`/v1/memories/quarantine` is never read as a memory id). With sanitation off the memory store still
answers (a memory quarantined earlier can be restored); only the memory store being off is 503.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Body, Query

from api.deps import CurrentPrincipal, Offset, ServicesDep
from api.routes.memories import Activity, Store
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.dream import NoBody
from api.schemas.sanitation import QuarantinedMemoryOut, QuarantineList
from assistant.memory import quarantine as Q

router = APIRouter(prefix="/v1/memories", tags=["memories"])
PAGE = 200


@router.get("/quarantine", response_model=QuarantineList, responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="The caller's quarantined memories",
            description="Newest quarantine first, each with `quarantined_at`, `quarantine_reason` (the sanitation "
                        "verdict: stale, poisoned, contradicted, and why) and the type it had; paged by `limit` "
                        "and `offset`, `total` counts them all. They are purged `sanitation.quarantine_ttl_days` "
                        "(7) after their quarantine.\n\nRole: any key (`read-only` included). Only the caller's.")
def quarantined(services: ServicesDep, user: CurrentPrincipal, store: Store,
                limit: Annotated[int, Query(ge=1, le=PAGE, description=f"Page size, 1 to {PAGE}.")] = 50,
                offset: Offset = 0) -> QuarantineList:
    owner = str(user.user_id)
    if services.sanitation is not None:
        found, total = services.sanitation.quarantined(owner, limit, offset)
    else:
        found, total = Q.quarantined(store, owner, limit, offset)
    return QuarantineList(memories=[QuarantinedMemoryOut.of(m) for m in found], total=total, limit=limit,
                          offset=offset)


@router.post("/{memory_id}/restore", response_model=QuarantinedMemoryOut, dependencies=[Activity],
             responses=error_responses(400, *AUTH_ERRORS, 404, 409, 413, 422, 503), summary="Restore a memory",
             description="Give a quarantined memory back its former type (`Archived` again if it had been "
                         "archived); it is retrieved again and its facts return to the knowledge graph. A memory "
                         "that is not quarantined is 409 `CONFLICT` naming its type; one already purged is 404 "
                         "`NOT_FOUND` saying when and why it was purged; another user's is 404, as an unknown one; "
                         "an id that is not a UUID is 422. No body, or `{}`.\n\nRole: a `user` key (a `read-only` "
                         "key is 403).")
def restore(memory_id: UUID, services: ServicesDep, user: CurrentPrincipal, store: Store,
            body: Annotated[NoBody | None, Body(description="None, or an empty JSON object.")] = None,
            ) -> QuarantinedMemoryOut:
    owner = str(user.user_id)
    if services.sanitation is not None:
        return QuarantinedMemoryOut.of(services.sanitation.restore(owner, str(memory_id)))
    return QuarantinedMemoryOut.of(Q.restore(store, owner, str(memory_id)))
