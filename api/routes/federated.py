"""Federated adapter sync: `POST /api/v1/federated/sync` (the spec's), and beyond the spec's table
`GET /api/v1/federated/identity` (this instance's public key) and `GET /api/v1/federated/status` (the
caller's rounds and the rejection log).

While `federated.enabled = false` (the default) every route is 503 `SERVICE_UNAVAILABLE` naming the key,
checked before the body. The sync route's body is bounded by `federated.max_payload_bytes` before it is
read (413). The work is :class:`assistant.learning.federated.FederatedSync`'s; this module maps HTTP.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, ErrorEnvelope, error_responses
from api.schemas.federated import FederatedStatusOut, IdentityOut, RoundIn, RoundOut, SignedUpdate
from assistant.errors import AssistantError, BadRequestError, ValidationFailed
from assistant.learning.federated import FederatedSync

DISABLED = "federated sync is disabled (federated.enabled = false)"
FEDERATED = service("federated", DISABLED)
Federated = Annotated[FederatedSync, FEDERATED]
router = APIRouter(prefix="/api/v1/federated", tags=["extended"], dependencies=[FEDERATED])

OWNER = ("Owner rule: the caller's adapter, budget, rounds and rejection log only; a peer's update is answered "
         "with the adapter of the key's user, and only a peer configured for that user (`federated.peers[].user_id`) "
         "is accepted.")

SYNC = """The user's own instances of this service exchange their LoRA adapters: FedAvg weighted by sample
counts, each update clipped and noised (Gaussian mechanism) and charged to the privacy budget, signed with
Ed25519 and accepted only from configured peers.

**Two request shapes**, told apart by the top-level key `envelope`:

1. **Start a round** (a user): no body, `{}`, or `{"peers": ["laptop"]}` (names in `federated.peers` with
   the caller's `user_id`; an unknown name is 422 naming it). Answers the round (`RoundOut`). The caller's
   active adapter (none: 409) is read; its LoRA weights, one vector, are clipped to L2 norm
   `federated.clip_norm` and get Gaussian noise for (`federated.epsilon`, `privacy.delta`), charged to the
   caller's privacy budget first (exhausted: 429 `RATE_LIMITED` with `Retry-After`, and nothing is sent).
   Each released update is the adapter's weights themselves, not a delta against an earlier round: no state
   need be shared between instances, so a failed round never leaves them disagreeing. The same release goes,
   signed, to each peer's `POST {url}/api/v1/federated/sync` with the caller's key on that peer
   (`federated.peers[].api_key`), within `federated.timeout_secs`. Each peer answers its own signed, clipped
   and noised update, checked like an inbound one (a failure is logged as a `reply` rejection). The caller's
   exact weights (they never leave the instance) and the accepted peers' noised weights are averaged,
   `sum(n_i w_i) / sum(n_i)` with `n_i` the sample counts, factor by factor (LoRA A and B separately), written
   as a peft adapter and submitted to training (`source: federated`), which converts, evaluates and activates
   it only if it is better on the user's held-back feedback and not worse on the regression set (the rule of
   every adapter; see `GET /api/training/status`). No peer completed: 502 `UPSTREAM_ERROR` with
   `details.peers`, nothing submitted, the budget stays charged.
2. **A peer's signed update** (the instance that started a round, with the key of ITS user's on this
   instance): `{"envelope": {...}, "signature": "<base64>"}`. Envelope fields: `version` 1, `kind` `update`,
   `sender` and `recipient` instance ids (`GET /api/v1/federated/identity`), `round` (the initiating user's
   round number), `base_model`, `lora` {`r`, `lora_alpha`, `target_modules`}, `tensors` [{`name`, `shape`}]
   in sorted name order, `encoding` `float32-le-base64` (the tensors flattened in that order as
   little-endian float32, base64), `samples`, `payload`, `timestamp` (Unix seconds), `nonce` (32 hex),
   `in_reply_to` (null), `privacy` {`epsilon`, `delta`, `clip_norm`, `noise_multiplier`}. Checked in this
   order, each refusal logged (`GET /api/v1/federated/status`, and a warning line) with nothing applied:
   a readable body of that shape (400 `BAD_REQUEST`, `details.reason: malformed`, `details.fields`); a
   `sender` among the caller's configured peers (401 `UNAUTHORIZED`, `unknown_key`); the signature by that
   peer's key (401, `bad_signature`: an envelope whose signature does not verify does not authenticate its
   sender, so 401 rather than 400); `kind` `update` for this instance (400, `wrong_recipient`); a timestamp
   within `federated.max_clock_skew_secs` (400, `stale`); a nonce never accepted from that sender and a
   round after the last one accepted (409 `CONFLICT`, `replayed`); an active adapter of the caller here
   (409, `no_adapter`); the same base model, LoRA r/alpha/targets, tensor names and shapes, and a payload of
   exactly that many finite float32 values (400: `base_model_mismatch`, `lora_mismatch`, `shape_mismatch`,
   `not_finite`); the caller's budget (429, `budget_exhausted`). Answers this instance's own signed update
   (`kind` `reply`, `in_reply_to` the update's nonce; same shape) and submits the average as above.

A body over `federated.max_payload_bytes` (16 MiB; this route's limit instead of `server.max_body_bytes`) is
413 `PAYLOAD_TOO_LARGE` before it is read. Post-quantum and homomorphic protection are not implemented
(`pqc.enabled`/`homomorphic.enabled` refuse to start): payloads are signed, not encrypted, and travel over
the peer URL's transport (use https between machines); their content is already noised."""

SYNC_BODY = {"requestBody": {"required": False, "content": {"application/json": {"schema": {"oneOf": [
    RoundIn.model_json_schema(ref_template="#/components/schemas/{model}"),
    {"$ref": "#/components/schemas/SignedUpdate"}]}}}}}
SYNC_ERRORS = {
    **error_responses(*AUTH_ERRORS, 409, 413, 422, 502, 503),
    400: {"model": ErrorEnvelope, "description": "Unreadable JSON, or a peer's envelope that is malformed, "
                                                 "misaddressed, stale or does not fit this adapter (BAD_REQUEST; "
                                                 "details.reason)"},
    401: {"model": ErrorEnvelope, "description": "Missing or invalid API key, or a peer's envelope signed by an "
                                                 "unknown key or with a bad signature (UNAUTHORIZED; details.reason)"},
}


def _json(body: bytes, content_type: str | None) -> Any:
    media = (content_type or "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        raise BadRequestError(f"the body must be JSON (Content-Type: application/json), not {media}")
    if not body.strip():
        return {}
    try:
        return json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequestError(f"the body is not valid JSON: {exc}") from None


@router.post("/sync", response_model=RoundOut | SignedUpdate, responses=SYNC_ERRORS, openapi_extra=SYNC_BODY,
             summary="Start a federated round, or answer a peer's signed update",
             description=SYNC + ROLE_CHANGE + OWNER)
async def sync(request: Request, user: CurrentPrincipal, federated: Federated) -> RoundOut | JSONResponse:
    limit = federated.settings.max_payload_bytes
    chunks, size = [], 0
    async for chunk in request.stream():  # the middleware bounds it already; never hold more than the limit
        size += len(chunk)
        if size > limit:
            raise AssistantError(f"request body exceeds {limit} bytes (federated.max_payload_bytes)",
                                 code="PAYLOAD_TOO_LARGE")
        chunks.append(chunk)
    data = _json(b"".join(chunks), request.headers.get("content-type"))
    user_id = str(user.user_id)
    if isinstance(data, dict) and "envelope" in data:
        reply = await run_in_threadpool(federated.answer, user_id, data)
        return JSONResponse(reply)  # as signed: a re-serialisation could change what the signature covers
    try:
        body = RoundIn.model_validate(data)
    except ValidationError as exc:
        fields = [{"field": ".".join(str(p) for p in e["loc"]) or "body", "error": e["msg"]} for e in exc.errors()]
        raise ValidationFailed(f"invalid round request: {fields[0]['field']}: {fields[0]['error']}", fields) from None
    return RoundOut.of(await run_in_threadpool(federated.start_round, user_id, body.peers))


@router.get("/identity", response_model=IdentityOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="This instance's federated public key",
            description="Not in the spec's table: this instance's Ed25519 public key and instance id, to put in a "
                        "peer's `federated.peers` entry. The key pair is made at first use in `federated.key_path` "
                        "(mode 0600, in the data directory). Nothing of any user's is shown." + ROLE_READ
                        + "Owner rule: none (the instance's public key only).")
def identity(user: CurrentPrincipal, federated: Federated) -> IdentityOut:
    me = federated.identity
    return IdentityOut(instance_id=me.instance_id, public_key=me.public_key_b64, public_key_hex=me.public_key.hex(),
                       algorithm="Ed25519")


@router.get("/status", response_model=FederatedStatusOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The caller's federated peers, rounds and rejection log",
            description="Not in the spec's table: this instance's identity, the caller's peers (names, URLs, "
                        "instance ids; never their keys), the privacy parameters of a round, the caller's latest "
                        "rounds (as initiator or responder, with each peer's outcome and the averaged adapter's "
                        "training run) and every refused envelope or reply of the caller's (which check failed, the "
                        "status, the message)." + ROLE_READ + OWNER)
def status(user: CurrentPrincipal, federated: Federated) -> FederatedStatusOut:
    return FederatedStatusOut(**federated.status(str(user.user_id)))
