"""Precache prediction: the caller's predicted queries, what is precomputed for them, and the hits.

Beyond the spec's table (it names the feature and its settings, not routes): `GET /api/v1/precache/status`
and `POST /api/v1/precache/refresh`. Both need a key (`Authorization: Bearer <key>` or `X-API-Key`); the
status any role, the refresh a `user` key. Everything shown is the caller's own: their predicted queries
(their own wording), entries, hits and statistics; another user's never appear. While the feature is off
(`precache_prediction.enabled = false`) both are 503 `SERVICE_UNAVAILABLE` naming the key, checked before
anything else. The work is :class:`assistant.extended.precache.Precache`'s.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.dream import NoBody
from api.schemas.precache import PrecacheStatusOut
from assistant.extended.precache import Precache

PREFIX = "/api/v1/precache"
DISABLED = "precache prediction is disabled (precache_prediction.enabled = false)"
PRECACHE = service("precache", DISABLED)
PrecacheDep = Annotated[Precache, PRECACHE]
router = APIRouter(prefix=PREFIX, tags=["extended"], dependencies=[PRECACHE])

OWNER = "Owner rule: the caller's own predictions, entries and counters only; another user's never appear."
HOW = """

**How.** Every `precache_prediction.check_interval_minutes` (15) the server reads the CPU temperature
(`/sys/class/thermal`, `/sys/class/hwmon`; a `ThermalUpdate` signal) and, unless it is above
`thermal_pause_celsius` (65.0), predicts from each user's real message history the queries with probability
≥ `min_probability` (0.7) in the hours up to the next check (by hour of day, and by hour of the week with
four weeks of history), keeps at most `max_precached_queries` (20) across users, and precomputes for each the
memory retrieval and the read-only tool calls its answers usually made (the weather, a web search). Those
stay in memory for one check interval. A chat message that matches a fresh entry (same canonical form, or
embedding cosine ≥ 0.95 with the same numbers and time words) is answered from it: a hit (`PrecacheHit`
signal, with the time saved); every other message is a miss."""


@router.get("/status", response_model=PrecacheStatusOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The caller's precache: predictions, entries, hits",
            description="Not in the spec's table. The caller's predicted queries of the latest refresh (with "
                        "probability, slot and counts), which are precomputed and until when, hits, misses, hit "
                        "rate and the time saved, the latest refresh and the next, and the temperature now "
                        "(`paused` when above the threshold, `no sensor` without one)." + HOW + ROLE_READ + OWNER)
def status(user: CurrentPrincipal, precache: PrecacheDep) -> PrecacheStatusOut:
    return PrecacheStatusOut.model_validate(precache.status(str(user.user_id)))


@router.post("/refresh", response_model=PrecacheStatusOut, responses=error_responses(400, *AUTH_ERRORS, 413, 422, 503),
             summary="Refresh the caller's precache now",
             description="Not in the spec's table. One refresh now for the caller: the predictions are made over "
                         "every user (the cap is across users) and the caller's among them are precomputed; other "
                         "users' entries are left as they are. Too hot (above `thermal_pause_celsius`): nothing is "
                         "computed and `last_refresh.status` is `paused` (still 200). Answers the caller's status "
                         "after it. No body, or `{}`." + HOW + ROLE_CHANGE + OWNER)
def refresh(user: CurrentPrincipal, precache: PrecacheDep,
            body: Annotated[NoBody | None, Body(description="None, or an empty JSON object.")] = None,
            ) -> PrecacheStatusOut:
    precache.refresh(str(user.user_id))
    return PrecacheStatusOut.model_validate(precache.status(str(user.user_id)))
