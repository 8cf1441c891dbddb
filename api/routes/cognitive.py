"""The caller's cognitive load now: `GET /api/v1/cognitive-load` (beyond the spec's table).

The weighted estimate (0.3 circadian, 0.25 session duration, 0.2 response latency, 0.15 message
complexity, 0.1 multitasking) from the caller's stored messages, and the answer format it gives
chat (:mod:`assistant.extended.cognitive`). Role: any key (`read-only` included). Owner rule: the
caller's own activity only. 503 while `cognitive_load.enabled = false`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter

from api.deps import ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.explain import CognitiveLoadOut
from assistant.extended.cognitive import CognitiveLoad

DISABLED = "cognitive load is disabled (cognitive_load.enabled = false)"
COGNITIVE = service("cognitive", DISABLED)
Cognitive = Annotated[CognitiveLoad, COGNITIVE]
router = APIRouter(prefix="/api/v1", tags=["extended"], dependencies=[COGNITIVE])


@router.get("/cognitive-load", response_model=CognitiveLoadOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The caller's cognitive load now",
            description="Not in the spec's table: the caller's estimated cognitive load now, its five components "
                        "(each 0..1: `circadian` from the local time in `tool_calling.timezone`, `duration` of the "
                        "session beyond `cognitive_load.fatigue_onset_minutes`, reply `latency`, message "
                        "`complexity`, `multitask` across conversations), the weights, the measured inputs, and the "
                        "answer format chat uses at this load: `TlDrFirst` at ≥ 0.7, `BulletPoints` at ≥ 0.4, "
                        "`Narrative` below. A session is the run of messages without a gap over 30 minutes. Each "
                        "answer also publishes a `CognitiveLoadEstimate` signal (`GET /api/v1/signals`). 503 while "
                        "`cognitive_load.enabled = false`." + ROLE_READ + "Only the caller's own activity is read.")
def cognitive_load(user: CurrentPrincipal, cognitive: Cognitive) -> CognitiveLoadOut:
    return CognitiveLoadOut.of(cognitive.estimate(user.user_id))
