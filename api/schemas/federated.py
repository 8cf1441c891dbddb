"""Bodies of the federated-sync routes (``/api/v1/federated``); built from the package's ``as_dict()``
shapes (:mod:`assistant.learning.federated`, :mod:`assistant.learning.federated_store`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assistant.learning.federated_envelope import EnvelopeFields

PEER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class RoundIn(BaseModel):
    """Shape 1, a user starting a round: ``{}`` (or no body) for every peer of the caller, or the peers named."""

    model_config = ConfigDict(extra="forbid")

    peers: list[str] | None = Field(None, min_length=1, max_length=64,
                                    description="Names of the caller's peers (`federated.peers` entries with the "
                                                "caller's `user_id`) to exchange with; omitted or null: all of them.",
                                    json_schema_extra={"items": {"type": "string", "pattern": PEER_NAME}})


class SignedUpdate(BaseModel):
    """Shape 2, a peer's update (and the shape of its answer): an envelope and its Ed25519 signature."""

    model_config = ConfigDict(extra="forbid")

    envelope: EnvelopeFields = Field(description="The update: see the route's description for every field.")
    signature: str = Field(description="Ed25519 signature (64 bytes, base64) of `assistant-federated-sync-v1\\n` + "
                                       "the envelope's canonical JSON (keys sorted, no whitespace, ASCII), by the "
                                       "sender instance's key.")


class PeerOutcomeOut(BaseModel):
    name: str = Field(description="The peer's name in `federated.peers`.")
    instance_id: str | None = Field(description="Its instance id (first 16 bytes of SHA-256 of its public key, hex).")
    status: str = Field(description="`completed` (its update was averaged in), `refused` (it answered an error: "
                                    "`http_status` and `error`), `rejected` (its reply failed our checks: logged in "
                                    "`rejections`) or `unreachable` (connection, timeout or an oversize answer).",
                        json_schema_extra={"enum": ["completed", "refused", "rejected", "unreachable"]})
    http_status: int | None = Field(description="The status the peer answered, if it answered.")
    samples: int | None = Field(description="Its sample count, FedAvg's weight (completed only).")
    error: str | None = Field(description="Why it did not complete.")


class AdapterRunOut(BaseModel):
    run_id: str | None = Field(description="The training run that converts, evaluates and may activate the averaged "
                                           "adapter (`GET /api/training/status`).")
    state: str | None = Field(description="Its state when submitted, or `not_submitted` (see `error`).")


class RoundOut(BaseModel):
    """A round the caller took part in."""

    id: str = Field(description="The round's id.")
    round: int = Field(ge=1, description="The initiating user's round number (increasing per user).")
    role: str = Field(description="`initiator` (the caller started it) or `responder` (a peer's update reached "
                                  "the caller).", json_schema_extra={"enum": ["initiator", "responder"]})
    status: str = Field(description="`completed` (an averaged adapter was made) or `failed` (no peer completed).",
                        json_schema_extra={"enum": ["completed", "failed", "running"]})
    base_model: str | None = Field(description="The base model of the adapters averaged.")
    samples: int | None = Field(description="The caller's adapter's sample count.")
    total_samples: int | None = Field(description="The sum of the averaged adapters' sample counts (the averaged "
                                                  "adapter's sample count).")
    epsilon: float | None = Field(description="The epsilon the caller's update was noised to (`federated.epsilon`).")
    epsilon_spent: float | None = Field(description="What the privacy budget's accountant charged for it.")
    clipped: bool = Field(description="Whether the caller's adapter's L2 norm exceeded `federated.clip_norm`.")
    peers: list[PeerOutcomeOut] = Field(description="Each peer's outcome.")
    adapter: AdapterRunOut | None = Field(description="The averaged adapter's training run (null when none was made).")
    error: str | None = Field(description="Why the round failed, or why its adapter was not submitted.")
    created_at: str | None = Field(description="When it started (ISO 8601, UTC).")
    finished_at: str | None = Field(description="When it ended (ISO 8601, UTC).")

    @classmethod
    def of(cls, r: Any) -> RoundOut:
        return cls(**r.as_dict())


class RejectionOut(BaseModel):
    id: str = Field(description="The log entry's id.")
    direction: str = Field(description="`inbound` (a peer's update to this instance) or `reply` (a peer's answer "
                                       "to the caller's update).", json_schema_extra={"enum": ["inbound", "reply"]})
    peer: str | None = Field(description="The configured peer's name, when the sender is one.")
    sender: str | None = Field(description="The instance id the envelope claimed.")
    round: int | None = Field(description="The round number it claimed.")
    reason: str = Field(description="The check that failed: `malformed`, `unknown_key`, `bad_signature`, "
                                    "`wrong_recipient`, `wrong_reply`, `stale`, `replayed`, `no_adapter`, "
                                    "`base_model_mismatch`, `lora_mismatch`, `shape_mismatch`, `not_finite`, "
                                    "`budget_exhausted`, ...")
    status: int = Field(description="The HTTP status it was answered with (inbound) or would have been (reply).")
    message: str = Field(description="The precise message.")
    created_at: str | None = Field(description="When (ISO 8601, UTC).")


class PeerOut(BaseModel):
    name: str = Field(description="The peer's name.")
    url: str = Field(description="Its base URL.")
    instance_id: str = Field(description="Its instance id, from its configured public key.")


class FederatedStatusOut(BaseModel):
    instance_id: str = Field(description="This instance's id.")
    public_key: str = Field(description="This instance's Ed25519 public key (base64).")
    peers: list[PeerOut] = Field(description="The caller's peers (never their API keys).")
    epsilon: float = Field(description="`federated.epsilon`: charged to the budget per round.")
    clip_norm: float = Field(description="`federated.clip_norm`: the L2 norm updates are clipped to.")
    max_payload_bytes: int = Field(description="`federated.max_payload_bytes`: the largest sync body.")
    rounds: list[RoundOut] = Field(description="The caller's latest 50 rounds, newest first.")
    rejections: list[RejectionOut] = Field(description="The latest 50 refused envelopes and replies of the "
                                                       "caller's rounds, newest first.")


class IdentityOut(BaseModel):
    instance_id: str = Field(description="First 16 bytes of SHA-256 of the raw public key, hex: how envelopes name "
                                         "this instance.")
    public_key: str = Field(description="The Ed25519 public key, base64: put it in a peer's `federated.peers` "
                                        "entry (`public_key`).")
    public_key_hex: str = Field(description="The same key in hex.")
    algorithm: str = Field(description="`Ed25519`.")
