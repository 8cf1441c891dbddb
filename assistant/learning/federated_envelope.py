"""The signed envelope of a federated update, and the checks a received one must pass.

A signed body is ``{"envelope": {...}, "signature": "<base64 Ed25519>"}``. The envelope
(:class:`EnvelopeFields`) holds: ``version`` (1), ``kind`` (``update`` from the instance that starts a
round, ``reply`` from the peer), ``sender`` and ``recipient`` (instance ids: a signed envelope cannot be
replayed to another instance), ``round`` (the initiating user's round number, increasing), ``base_model``,
``lora`` (``r``, ``lora_alpha``, sorted ``target_modules``), ``tensors`` (``[{name, shape}]`` in sorted
name order), ``encoding`` (``float32-le-base64``), ``samples`` (the sender's sample count: FedAvg's
weight), ``payload``, ``timestamp`` (Unix seconds), ``nonce`` (16 random bytes, hex), ``in_reply_to``
(a reply: the update's nonce; an update: null) and ``privacy`` (the mechanism the payload went through:
``epsilon``, ``delta``, ``clip_norm``, ``noise_multiplier``; informational). The signature covers the
envelope as received (:func:`assistant.learning.federated_identity.canonical`).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assistant.errors import AssistantError
from assistant.learning.federated_payload import ENCODING, MAX_DIMS, MAX_TENSORS, TENSOR_NAME

VERSION = 1
HEX_ID = r"^[0-9a-f]{32}$"
MAX_ROUND = 2**53


class Rejection(AssistantError):
    """A refused envelope; ``reason`` is the check that failed (the rejection log keeps it). The code sets the
    status: 400 ``BAD_REQUEST`` (malformed, wrong recipient, stale, shape or base-model mismatch), 401
    ``UNAUTHORIZED`` (unknown key, bad signature), 409 ``CONFLICT`` (replayed nonce or old round, no active
    adapter), 413 ``PAYLOAD_TOO_LARGE``."""

    def __init__(self, code: str, reason: str, message: str, fields: list[dict[str, str]] | None = None):
        details: dict[str, Any] = {"reason": reason}
        if fields:
            details["fields"] = fields
        super().__init__(message, details, code=code)
        self.reason = reason


def bad_request(reason: str, message: str, fields: list[dict[str, str]] | None = None) -> Rejection:
    return Rejection("BAD_REQUEST", reason, message, fields)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TensorSpec(_Strict):
    name: str = Field(pattern=TENSOR_NAME.pattern)
    shape: list[int] = Field(min_length=1, max_length=MAX_DIMS)


class LoraSpec(_Strict):
    r: int = Field(ge=1, le=4096)
    lora_alpha: float = Field(gt=0, le=1e6)
    target_modules: list[str] = Field(max_length=256)


class PrivacySpec(_Strict):
    epsilon: float = Field(gt=0)
    delta: float = Field(gt=0, lt=1)
    clip_norm: float = Field(gt=0)
    noise_multiplier: float = Field(ge=0)


class EnvelopeFields(_Strict):
    version: Literal[1]
    kind: Literal["update", "reply"]
    sender: str = Field(pattern=HEX_ID)
    recipient: str = Field(pattern=HEX_ID)
    round: int = Field(ge=1, le=MAX_ROUND)
    base_model: str = Field(min_length=1, max_length=300)
    lora: LoraSpec
    tensors: list[TensorSpec] = Field(min_length=1, max_length=MAX_TENSORS)
    encoding: Literal["float32-le-base64"]
    samples: int = Field(ge=1, le=10**12)
    payload: str = Field(min_length=1)
    timestamp: float
    nonce: str = Field(pattern=HEX_ID)
    in_reply_to: str | None = Field(default=None, pattern=HEX_ID)
    privacy: PrivacySpec


def _fields(error: ValidationError, prefix: str) -> list[dict[str, str]]:
    return [{"field": ".".join([prefix, *(str(p) for p in e["loc"])]), "error": e["msg"]} for e in error.errors()]


def parse_signed(data: Any) -> tuple[dict[str, Any], EnvelopeFields, bytes]:
    """(the envelope as received, its checked fields, the signature); a 400 :class:`Rejection` naming
    every wrong field otherwise. Nothing about who signed it is checked here."""
    if not isinstance(data, dict) or set(data) != {"envelope", "signature"}:
        keys = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise bad_request("malformed", f"a signed update is exactly {{envelope, signature}} (got {keys})",
                          [{"field": "body", "error": "must have exactly the keys envelope and signature"}])
    raw, signature = data["envelope"], data["signature"]
    if not isinstance(signature, str):
        raise bad_request("malformed", "signature must be a base64 string",
                          [{"field": "signature", "error": "must be a base64 string"}])
    try:
        sig = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request("malformed", "signature is not valid base64",
                          [{"field": "signature", "error": "not valid base64"}]) from None
    try:
        fields = EnvelopeFields.model_validate(raw)
    except ValidationError as exc:
        found = _fields(exc, "envelope")
        raise bad_request("malformed", f"the envelope is malformed: {found[0]['field']}: {found[0]['error']}"
                          + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""), found) from None
    for index, tensor in enumerate(fields.tensors):
        if any(d < 1 or d > 10**7 for d in tensor.shape):
            raise bad_request("malformed", f"tensor {tensor.name} has a dimension outside 1..10,000,000",
                              [{"field": f"envelope.tensors.{index}.shape", "error": "dimensions are 1..10,000,000"}])
    return raw, fields, sig


def signed_body(envelope: dict[str, Any], signature: bytes) -> bytes:
    return json.dumps({"envelope": envelope, "signature": base64.b64encode(signature).decode("ascii")},
                      separators=(",", ":"), allow_nan=False).encode("utf-8")


def new_envelope(*, kind: str, sender: str, recipient: str, round_number: int, base_model: str,
                 lora: dict[str, Any], tensors: list[dict[str, Any]], samples: int, payload: str, timestamp: float,
                 nonce: str, in_reply_to: str | None, privacy: dict[str, float]) -> dict[str, Any]:
    return {"version": VERSION, "kind": kind, "sender": sender, "recipient": recipient, "round": round_number,
            "base_model": base_model, "lora": lora, "tensors": tensors, "encoding": ENCODING, "samples": samples,
            "payload": payload, "timestamp": timestamp, "nonce": nonce, "in_reply_to": in_reply_to,
            "privacy": privacy}
