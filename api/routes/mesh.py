"""Mesh inference: `POST /api/v1/mesh/inference` (the spec's) and, beyond the spec's table, the peers'
state `GET /api/v1/mesh/peers`.

While `mesh.enabled = false` (the default) both are 503 `SERVICE_UNAVAILABLE` naming the key, checked
before the body. Inference needs a `user` key: it runs the engine (a peer's or this one's) for the
caller, as `POST /v1/chat/completions` does; nothing is stored. The peers' state is a server-wide view
(the peers' URLs and failures): admin. The work is :class:`assistant.mesh.Mesh`'s; this module only
maps HTTP.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from api.deps import ROLE_CHANGE, AdminPrincipal, CurrentPrincipal, service
from api.schemas.common import ADMIN_ONLY, AUTH_ERRORS, ErrorEnvelope, error_responses
from api.schemas.mesh import MeshInferenceIn, MeshInferenceOut, MeshPeersOut, PeerStatusOut
from assistant.mesh import Mesh

DISABLED = "mesh inference is disabled (mesh.enabled = false)"
MESH = service("mesh", DISABLED)
MeshDep = Annotated[Mesh, MESH]
router = APIRouter(prefix="/api/v1/mesh", tags=["extended"], dependencies=[MESH])


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    responses = error_responses(*statuses)
    if 502 in responses:
        responses[502]["description"] = ("The chosen peer failed and `allow_fallback` is false (UPSTREAM_ERROR), or the "
                                         "local engine answered with an error")
    if 503 in responses:
        responses[503]["description"] = ("`mesh.enabled = false`; no peer available and `allow_fallback` false; or the "
                                         "local engine unavailable (SERVICE_UNAVAILABLE)")
    responses[504] = {"model": ErrorEnvelope, "description": (
        "The chosen peer did not answer within `mesh.timeout_secs` and `allow_fallback` is false (GATEWAY_TIMEOUT)")}
    return responses


INFERENCE = """Forwards a chat request to a peer instance of this service (its OpenAI-compatible
`POST /v1/chat/completions`, with the peer's key from `mesh.peers`), or answers it with the local engine.

**Choice of the peer.** Peers whose health is older than `mesh.health_interval_secs` are probed first
(`GET {url}/ready`, each within `mesh.health_timeout_secs`; a failed probe marks the peer down for
`mesh.down_secs`). Among the healthy peers, `peer` (when given) comes first, then the lowest latency:
an exponentially weighted moving average (`mesh.latency_alpha`) of the peer's successful forwards (a
peer not measured yet counts as 0 ms and is tried). Each peer takes at most `max_concurrency` forwards at
once: a full peer is skipped, never waited for. One peer is tried per request, within
`mesh.timeout_secs`; a failure or a timeout marks it down.

**Fallback.** The local engine (the path of `POST /v1/chat/completions`) answers when `local_only`, when
no peer is configured or available, or when the forward fails or times out, unless `allow_fallback` is
false: then 504 `GATEWAY_TIMEOUT` (timeout), 502 `UPSTREAM_ERROR` (failed forward) or 503
`SERVICE_UNAVAILABLE` (no peer available), each with `details.route`. The answer says who served it
(`served_by`: the peer's name or `local`), why the local engine did (`fallback_reason`), the latency
and the route (each peer considered and its outcome).

**What a peer receives and what is taken from it.** The messages, the model, `max_tokens`,
`temperature`, `stream: false` and the memory extension off (`{"retrieve": false, "learn": false}`):
the peer's memories belong to its key's user, and nothing of the caller's is learned there. The local
fallback likewise uses no memory, so the answer does not depend on who served it. No tools are ever
sent (a body with `tools`, `tool_choice` or `stream` is 422: unknown fields are refused), and a peer's
answer is data: only its text (`choices[0].message.content`), `finish_reason`, `model` and `usage` are
read, nothing is executed, an answer without text (e.g. tool calls) or larger than
`mesh.max_answer_bytes` counts as a failed forward.

422 for a bad body (`details.fields`: no user message, an unknown `peer`, `local_only` with
`allow_fallback: false`, a temperature outside 0.0..2.0)."""

OWNER = ("Owner rule: the answer goes to the caller only; nothing is stored (no conversation, no memory) here "
         "or, through the memory extension, on the peer.")


@router.post("/inference", response_model=MeshInferenceOut, summary="Inference on a mesh peer, or locally",
             responses=_errors(400, *AUTH_ERRORS, 413, 422, 502, 503), description=INFERENCE + ROLE_CHANGE + OWNER)
async def inference(body: MeshInferenceIn, user: CurrentPrincipal, mesh: MeshDep) -> MeshInferenceOut:
    return MeshInferenceOut.of(await mesh.infer(user.user_id, body.request()))


@router.get("/peers", response_model=MeshPeersOut, summary="The mesh peers' health, latency and load",
            responses={**error_responses(*AUTH_ERRORS, 422, 503), **ADMIN_ONLY},
            description="Not in the spec's table: every configured peer (`mesh.peers`, in order) with its health, the "
                        "period it is marked down for, its last failure, the latency EWMA of its successful forwards, "
                        "its forwards in flight against its `max_concurrency`, and counts since the start. Reading "
                        "probes nothing unless `refresh=true` (every peer now, down ones too). Keys are never shown."
                        "\n\nRole: an `admin` key (a server-wide view: the peers' URLs and failures). Nothing here is "
                        "per user.")
async def peers(admin: AdminPrincipal, mesh: MeshDep, refresh: Annotated[bool, Query(description=(
        "Probe every peer's health now (down ones too) before answering."))] = False) -> MeshPeersOut:
    if refresh:
        await mesh.refresh(force=True)
    settings = mesh.settings
    return MeshPeersOut(peers=[PeerStatusOut.of(s) for s in mesh.status()], timeout_secs=settings.timeout_secs,
                        health_interval_secs=settings.health_interval_secs, down_secs=settings.down_secs)
