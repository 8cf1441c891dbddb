"""Sanitation: the caller's run results, their dynamic defence patterns, the quality assessment, and a
run on demand.

Every route needs a key (`Authorization: Bearer <key>` or `X-API-Key: <key>`, as for dream mode);
reads need any role (`read-only` included), changes a `user` key. Everything is the caller's: another
user's dream session or pattern is 404, exactly as an unknown one. While sanitation is off
(`sanitation.enabled = false`, or the memory store off) every route is 503 `SERVICE_UNAVAILABLE`
naming the key, checked before the parameters. The work is
:class:`assistant.sanitation.service.SanitationService`'s; this module only maps HTTP.

Beyond the spec's table: `GET /v1/sanitation/results` (the caller's run history, which the quality
dashboard plots) and `POST /v1/sanitation/run` (one run now, for the caller).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Query

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.dream import NoBody
from api.schemas.sanitation import (
    DefencePatternList,
    DefencePatternOut,
    QualityOut,
    SanitationResultList,
    SanitationResultOut,
)
from assistant.errors import ServiceUnavailableError
from assistant.sanitation.service import SanitationService

PREFIX = "/v1/sanitation"
DISABLED = "sanitation is disabled (sanitation.enabled = false, or memory.enabled = false)"
SANITATION = service("sanitation", DISABLED)
Sanitation = Annotated[SanitationService, SANITATION]
router = APIRouter(prefix=PREFIX, tags=["sanitation"], dependencies=[SANITATION])

READ, CHANGE = ROLE_READ, ROLE_CHANGE
OWNER = "Only the caller's: another user's is 404, as an unknown one."
READS = error_responses(*AUTH_ERRORS, 503)
ONE = error_responses(*AUTH_ERRORS, 404, 422, 503)
HISTORY_LIMIT = 500

RECORD = """

**The result record.** `counts` per verdict (`ok`, `stale`, `poisoned`, `contradicted`, plus `judged` and
`purged`), `quarantined` (each memory set aside with its verdict and reason; in a contradiction the loser,
with `winner_id`), `purged`, `graph` (orphan nodes, dangling edges, edges whose sources are all
quarantined: fixed and counted), `patterns_added`, `patterns_rejected` and `defence` (defence evolution and
the defence score after it), `drift`
(settings clamped back into their bounds), `quality`, `anomalies`, `rolled_back` with `failed_step` and
`error` (a critical failure rolls every change of the run back: the database is as before), `judge_failures`
and `duration_ms`."""


def unavailable(fn: Callable[..., Any], *args: Any) -> Any:
    """Call the service; a part of it not in this build yet is 503 naming what is missing, never a 500."""
    try:
        return fn(*args)
    except NotImplementedError as exc:
        raise ServiceUnavailableError(f"sanitation is not available in this build ({exc or 'not implemented'})") \
            from exc


@router.get("/latest", response_model=SanitationResultOut, responses=error_responses(*AUTH_ERRORS, 404, 503),
            summary="The caller's latest sanitation result",
            description="The latest run for the caller (in a dream cycle or on demand); 404 `NOT_FOUND` before "
                        "the first." + RECORD + READ)
def latest(user: CurrentPrincipal, sanitation: Sanitation) -> SanitationResultOut:
    return SanitationResultOut.of(sanitation.latest(str(user.user_id)))


@router.get("/results", response_model=SanitationResultList, responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="The caller's run history",
            description="Not in the spec's table: the caller's latest `limit` runs, oldest first (the quality "
                        "dashboard plots the score and its components from them)." + RECORD + READ + OWNER)
def history(user: CurrentPrincipal, sanitation: Sanitation,
            limit: Annotated[int, Query(ge=1, le=HISTORY_LIMIT, description=f"How many of the latest runs, 1 to "
                                                                            f"{HISTORY_LIMIT}.")] = 100,
            ) -> SanitationResultList:
    found = sanitation.store.history(str(user.user_id), limit)
    return SanitationResultList(results=[SanitationResultOut.of(r) for r in found], total=len(found))


@router.get("/results/{session_id}", response_model=SanitationResultList, responses=ONE,
            summary="The sanitation results of a dream session",
            description="Every run of one of the caller's dream sessions (one per cycle), in order. A session "
                        "that is not the caller's is 404, as an unknown one; an id that is not a UUID is 422."
                        + RECORD + READ + OWNER)
def results(session_id: UUID, user: CurrentPrincipal, sanitation: Sanitation) -> SanitationResultList:
    found = sanitation.results(str(user.user_id), str(session_id))
    return SanitationResultList(results=[SanitationResultOut.of(r) for r in found], total=len(found))


@router.get("/defense-patterns", response_model=DefencePatternList, responses=READS,
            summary="The caller's active dynamic defence patterns",
            description="The patterns sanitation evolved from attack texts (normalised, generalised, "
                        "deduplicated by hash, validated against benign text before activation), with how many "
                        "texts each flagged (`hits`). Deactivated ones are not listed." + READ + OWNER)
def patterns(user: CurrentPrincipal, sanitation: Sanitation) -> DefencePatternList:
    found = sanitation.patterns(str(user.user_id))
    return DefencePatternList(patterns=[DefencePatternOut.of(p) for p in found], total=len(found))


@router.delete("/defense-patterns/{pattern_id}", response_model=DefencePatternOut,
               responses=error_responses(*AUTH_ERRORS, 404, 422, 503), summary="Deactivate a defence pattern",
               description="The pattern stops flagging at once and is returned (`active: false`, "
                           "`deactivated_at`); it is kept, so a later run does not add it again. A pattern that is "
                           "not the caller's, or not active, is 404; an id that is not a UUID is 422." + CHANGE
                           + OWNER)
def deactivate(pattern_id: UUID, user: CurrentPrincipal, sanitation: Sanitation) -> DefencePatternOut:
    return DefencePatternOut.of(sanitation.deactivate_pattern(str(user.user_id), str(pattern_id)))


@router.get("/quality", response_model=QualityOut, responses=READS, summary="The caller's quality assessment",
            description="score = 1 − (re_ask_rate × `sanitation.quality_re_ask_weight` (0.4) + correction_rate × "
                        "`quality_correction_weight` (0.4) + abandonment_rate × `quality_abandonment_weight` "
                        "(0.2)), over the caller's conversations since their last completed run; `trend` "
                        "(`Improving`, `Stable`, `Degrading`) from the run history and `recommendations` from the "
                        "components. Read only: it does not start a run nor publish events." + READ)
def quality(user: CurrentPrincipal, sanitation: Sanitation) -> QualityOut:
    return QualityOut.of(unavailable(sanitation.quality, str(user.user_id)))


@router.post("/run", response_model=SanitationResultOut, responses=error_responses(400, *AUTH_ERRORS, 413, 422, 503),
             summary="Run sanitation now",
             description="Not in the spec's table: one run for the caller now (`trigger: manual`, no dream "
                         "session), answered when it is over. It waits for a run of the caller under way (a dream "
                         "cycle's). A failed step does not fail the request: the run is rolled back and the record "
                         "says so (`status: rolled_back`, `failed_step`, `error`). No body, or `{}`."
                         + RECORD + CHANGE)
def run(user: CurrentPrincipal, sanitation: Sanitation,
        body: Annotated[NoBody | None, Body(description="None, or an empty JSON object.")] = None,
        ) -> SanitationResultOut:
    return SanitationResultOut.of(unavailable(sanitation.run, str(user.user_id)))
