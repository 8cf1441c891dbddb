"""The immune status: `GET /api/v1/immune/status`, one audit view of the caller's defences.

Role: any key (`read-only` included); the caller's own red-team and sanitation results, patterns and
quarantine only (the anomalies, restarts and gauges are server-wide and hold no user data). It answers
whether the red team and sanitation are on or not (they are then reported `disabled`); while
`sovereign_intelligence.enabled = false` it is 503 `SERVICE_UNAVAILABLE` naming the key. The work is
:class:`assistant.extended.immune.ImmuneView`'s.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from api.deps import ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.immune import ImmuneStatusOut
from assistant.extended.immune import ImmuneView

DISABLED = "the immune status is disabled (sovereign_intelligence.enabled = false)"
IMMUNE = service("immune", DISABLED)
Immune = Annotated[ImmuneView, IMMUNE]
router = APIRouter(prefix="/api/v1/immune", tags=["extended"], dependencies=[IMMUNE])


@router.get("/status", response_model=ImmuneStatusOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The immune system's audit status",
            description="One view of what protects the caller's assistant, read now from the running system: the "
                        "defence's layers in order (normalisation, static rules, the caller's evolved patterns, the "
                        "classifier, the engine judge), which are active and what they hold; the caller's latest "
                        "red-team run (or `disabled` while `red_team.enabled = false`) and latest sanitation run, "
                        "with their scores and times; the caller's quarantined and purged memories; the anomalies "
                        "detected and the supervisor's component restarts; the `defense_score_x100` and "
                        "`quality_score_x100` gauges. Read only." + ROLE_READ
                        + "The caller's own runs, patterns and memories only; anomalies, restarts and gauges are "
                          "server-wide (no user data).")
def status(user: CurrentPrincipal, immune: Immune) -> ImmuneStatusOut:
    return ImmuneStatusOut.of(immune.status(str(user.user_id)))
