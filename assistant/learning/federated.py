"""Federated adapter sync: a user's own instances exchange their LoRA adapters (FedAvg), each update
clipped and noised (Gaussian mechanism, charged to the user's privacy budget), signed (Ed25519) and
accepted only from the peers the configuration names.

**A round** (:meth:`FederatedSync.start_round`, ``POST /api/v1/federated/sync`` with ``{}`` or
``{"peers": [names]}``), for one user:

1. the user's active adapter (``services.training``) is read: its LoRA tensors, its base model and its
   sample count (none: 409);
2. its weights, as one vector, are clipped to L2 norm ``federated.clip_norm`` and get Gaussian noise
   calibrated to ``federated.epsilon`` at ``privacy.delta`` (:meth:`PrivacyBudget.release_vector`, which
   charges the user's budget first: exhausted -> 429 and nothing is sent). One release serves every peer
   of the round (sending the same noised vector twice costs nothing more);
3. to each peer, a signed envelope (:mod:`assistant.learning.federated_envelope`) goes to
   ``POST {peer.url}/api/v1/federated/sync`` with the user's key on that peer;
4. the peer checks it (:meth:`FederatedSync.answer`) and answers its own signed, clipped and noised
   update (charged to ITS user's budget); we check the reply the same way;
5. FedAvg: the user's own weights (exact: they never leave the instance) and each accepted peer's noised
   weights, weighted by sample counts; the result is written as a peft directory and submitted to training
   (``submit_adapter(..., source="federated")``), which converts, evaluates and activates it under the same
   rule as a trained adapter (better on held-back samples, not worse on the regression set). The peer does
   the same with our update. No peer completed: 502, nothing submitted (the budget stays charged: the noised
   vector was released to at least the transport).

**What a peer's envelope must pass**, in this order (each refusal is logged, in ``federated_rejections``
and a warning line, and nothing is applied): a readable signed body (400 ``malformed``); a sender instance
among the caller's configured peers (401 ``unknown_key``); a valid Ed25519 signature by that peer's key
(401 ``bad_signature``); ``kind`` ``update`` and this instance as ``recipient`` (400); a timestamp within
``federated.max_clock_skew_secs`` of now (400 ``stale``); a nonce never accepted from that sender and a
round after the last accepted one (409 ``replayed``); an active adapter here (409 ``no_adapter``); the same
base model and LoRA shape (r, alpha, target modules; 400 ``base_model_mismatch``/``lora_mismatch``), tensor
names and shapes (400 ``shape_mismatch``), a payload of finite float32 values of exactly that size (400);
the caller's budget (429 ``budget_exhausted``). A body over ``federated.max_payload_bytes`` is 413 before it
is read.

**Privacy, honestly.** The noise has standard deviation ``sigma x clip_norm`` on every coordinate (sigma =
7.03 at epsilon 0.5, delta 1e-5) while the whole update has norm at most ``clip_norm``: with one user's
adapter per release (hundreds of thousands of coordinates) the noise dominates, and the averaged adapter is
then refused by the activation rule, which changes nothing. That is the price of user-level differential
privacy with two participants; the benchmark ``benchmarks/federated.py`` measures it.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from assistant.errors import (
    AssistantError,
    ConfigError,
    ConflictError,
    ServiceUnavailableError,
    UpstreamError,
    ValidationFailed,
)
from assistant.extended.privacy import BudgetExhausted, PrivacyBudget
from assistant.learning.federated_envelope import Rejection, bad_request, new_envelope, parse_signed
from assistant.learning.federated_identity import (
    Identity,
    decode_public_key,
    instance_id,
    load_identity,
    resolve_key_path,
    verify,
)
from assistant.learning.federated_payload import (
    AdapterTensors,
    PayloadError,
    decode,
    encode,
    fedavg,
    read_adapter,
    write_adapter,
)
from assistant.learning.federated_store import FederatedStore, PeerOutcome, Round
from assistant.learning.federated_transport import HttpPeerTransport, PeerTransport, PeerUnreachable, error_message
from assistant.learning.types import AdapterRecord
from assistant.observability.signals import SignalKind

QUERY = "federated_update"  # the privacy ledger's name for a released update
STATUS_OF = {"BAD_REQUEST": 400, "UNAUTHORIZED": 401, "CONFLICT": 409, "PAYLOAD_TOO_LARGE": 413, "VALIDATION_ERROR": 422,
             "RATE_LIMITED": 429, "INTERNAL_ERROR": 500, "SERVICE_UNAVAILABLE": 503}


class Adapters(Protocol):
    """What federated sync needs of training (``services.training``)."""

    def active_adapter(self, user_id: str) -> AdapterRecord | None: ...

    def submit_adapter(self, user_id: str, peft_dir: Path, samples: int, source: str) -> object: ...


@dataclass(frozen=True)
class KnownPeer:
    name: str
    url: str
    api_key: str
    public_key: bytes
    instance_id: str
    user_id: str


class FederatedSync:
    """Rounds for this instance's users. ``settings`` is the ``[federated]`` section."""

    def __init__(self, settings: Any, data_dir: Path, db: Any, privacy: PrivacyBudget, adapters: Adapters | None, *,
                 identity: Identity | None = None, transport: PeerTransport | None = None,
                 clock: Callable[[], float] = time.time, signals: Any = None):
        self.settings = settings
        self.data_dir = Path(data_dir)
        self.privacy = privacy
        self.adapters = adapters
        self.store = FederatedStore(db)
        self.transport: PeerTransport = transport or HttpPeerTransport()
        self.clock = clock
        self.signals = signals
        self._identity = identity
        self._lock = threading.Lock()
        self.peers = [KnownPeer(p.name, p.url, p.api_key, raw, instance_id(raw), str(p.user_id))
                      for p in settings.peers for raw in [decode_public_key(p.public_key)]]

    @property
    def identity(self) -> Identity:
        """This instance's key pair, created at first use."""
        with self._lock:
            if self._identity is None:
                self._identity = load_identity(resolve_key_path(self.data_dir, self.settings.key_path))
            return self._identity

    def peers_of(self, user_id: str) -> list[KnownPeer]:
        return [p for p in self.peers if p.user_id == str(user_id)]

    # --- the initiator -------------------------------------------------------------------------------

    def start_round(self, user_id: str, peer_names: list[str] | None = None) -> Round:
        """Run a round with ``peer_names`` (default: every peer of the user); see the module docstring."""
        user_id = str(user_id)
        adapters = self._adapters()
        peers = self._chosen(user_id, peer_names)
        record = self._active(adapters, user_id)
        local = read_adapter(record.peft_dir)
        release = self.privacy.release_vector(user_id, QUERY, local.values, self.settings.epsilon,
                                              self.settings.clip_norm)  # BudgetExhausted: nothing is sent
        r = Round(str(uuid.uuid4()), user_id, self.store.next_round(user_id), "initiator", "running",
                  record.base_model, record.samples, epsilon=release.mechanism.epsilon,
                  epsilon_spent=release.charge.epsilon_spent, clipped=release.clipped, created_ts=self.clock())
        payload, privacy = encode(release.values), _privacy(release, self.settings.clip_norm)
        contributions = [(local.values, record.samples)]
        for peer in peers:
            outcome, values = self._exchange(peer, r, record, local, payload, privacy)
            r.peers.append(outcome)
            if values is not None and outcome.samples:
                contributions.append((values, outcome.samples))
        if len(contributions) == 1:
            r.status, r.finished_ts = "failed", self.clock()
            r.error = "no peer completed the exchange: " + "; ".join(f"{p.name}: {p.error}" for p in r.peers)
            self.store.save_round(r)
            self._publish(r)
            raise UpstreamError(r.error, {"round_id": r.id, "round": r.round, "peers": [p.as_dict() for p in r.peers]})
        self._merge(adapters, r, record, local, contributions)
        return r

    def _exchange(self, peer: KnownPeer, r: Round, record: AdapterRecord, local: AdapterTensors, payload: str,
                  privacy: dict[str, float]) -> tuple[PeerOutcome, np.ndarray | None]:
        me = self.identity
        envelope = new_envelope(kind="update", sender=me.instance_id, recipient=peer.instance_id,
                                round_number=r.round, base_model=record.base_model, lora=local.lora,
                                tensors=local.spec, samples=record.samples, payload=payload,
                                timestamp=self.clock(), nonce=secrets.token_hex(16), in_reply_to=None, privacy=privacy)
        body = _body(envelope, me.sign(envelope))
        try:
            answer = self.transport.exchange(peer.url, peer.api_key, body, timeout=self.settings.timeout_secs,
                                             max_bytes=self.settings.max_payload_bytes)
        except PeerUnreachable as exc:
            return PeerOutcome(peer.name, peer.instance_id, "unreachable", error=str(exc)), None
        if answer.status != 200:
            return PeerOutcome(peer.name, peer.instance_id, "refused", answer.status, error=error_message(answer)), None
        try:
            try:
                data = json.loads(answer.body)
            except ValueError:
                raise bad_request("malformed", "the reply is not JSON") from None
            raw, fields, signature = parse_signed(data)
            if fields.sender != peer.instance_id or not verify(peer.public_key, raw, signature):
                raise Rejection("UNAUTHORIZED", "bad_signature", f"the reply is not signed by {peer.name}'s key")
            if (fields.kind, fields.recipient, fields.in_reply_to, fields.round) != (
                    "reply", me.instance_id, envelope["nonce"], r.round):
                raise bad_request("wrong_reply", "the reply does not answer this round's update (kind, recipient, "
                                                 "in_reply_to or round differ)")
            _compatible(fields, local, record)
            values = decode(fields.payload, local)
        except (Rejection, PayloadError) as exc:
            self.store.reject(r.user_id, "reply", exc.reason, STATUS_OF.get(exc.code, 400), exc.message,
                              peer=peer.name, sender=peer.instance_id, round_number=r.round, now=self.clock())
            return PeerOutcome(peer.name, peer.instance_id, "rejected", 200, error=exc.message), None
        return PeerOutcome(peer.name, peer.instance_id, "completed", 200, samples=fields.samples), values

    # --- the responder -------------------------------------------------------------------------------

    def answer(self, user_id: str, data: Any) -> dict[str, Any]:
        """A peer's signed update for ``user_id``: checked, answered with our signed update, averaged and
        submitted. Every refusal is logged and raised (a :class:`Rejection`, ``PayloadError``,
        ``BudgetExhausted``, ...); nothing is applied then."""
        user_id, now = str(user_id), self.clock()
        sender = _claimed_sender(data)
        try:
            return self._answer(user_id, data, now)
        except AssistantError as exc:
            reason = "budget_exhausted" if isinstance(exc, BudgetExhausted) else getattr(exc, "reason", exc.code.lower())
            peer = next((p.name for p in self.peers_of(user_id) if p.instance_id == sender), None)
            self.store.reject(user_id, "inbound", reason, STATUS_OF.get(exc.code, 400), exc.message, peer=peer,
                              sender=sender, round_number=_claimed_round(data), now=now)
            raise

    def _answer(self, user_id: str, data: Any, now: float) -> dict[str, Any]:
        raw, fields, signature = parse_signed(data)
        peer = next((p for p in self.peers_of(user_id) if p.instance_id == fields.sender), None)
        if peer is None:
            raise Rejection("UNAUTHORIZED", "unknown_key", f"instance {fields.sender} is not among this user's "
                            "federated.peers: add its public key (GET /api/v1/federated/identity on it)")
        if not verify(peer.public_key, raw, signature):
            raise Rejection("UNAUTHORIZED", "bad_signature", f"the envelope's signature is not {peer.name}'s")
        me = self.identity
        if fields.kind != "update" or fields.recipient != me.instance_id:
            raise bad_request("wrong_recipient", f"this instance ({me.instance_id}) answers updates addressed to it; "
                                                 f"got a {fields.kind} for {fields.recipient}")
        skew = self.settings.max_clock_skew_secs
        if abs(now - fields.timestamp) > skew:
            raise bad_request("stale", f"the envelope's timestamp is {abs(now - fields.timestamp):.0f} s from this "
                                       f"instance's clock (at most {skew} s: federated.max_clock_skew_secs)")
        adapters = self._adapters()
        with self._lock:
            why = self.store.replayed(fields.sender, user_id, fields.round, fields.nonce)
            if why is not None:
                raise Rejection("CONFLICT", "replayed", why)
            record = adapters.active_adapter(user_id)
            if record is None:
                raise Rejection("CONFLICT", "no_adapter", NO_ADAPTER)
            local = read_adapter(record.peft_dir)
            _compatible(fields, local, record)
            theirs = decode(fields.payload, local)
            release = self.privacy.release_vector(user_id, QUERY, local.values, self.settings.epsilon,
                                                  self.settings.clip_norm)
            self.store.accept(fields.sender, user_id, fields.round, fields.nonce, now, now - 2 * skew)
        reply = new_envelope(kind="reply", sender=me.instance_id, recipient=fields.sender, round_number=fields.round,
                             base_model=record.base_model, lora=local.lora, tensors=local.spec, samples=record.samples,
                             payload=encode(release.values), timestamp=self.clock(), nonce=secrets.token_hex(16),
                             in_reply_to=fields.nonce, privacy=_privacy(release, self.settings.clip_norm))
        signature_out = me.sign(reply)
        r = Round(str(uuid.uuid4()), user_id, fields.round, "responder", "running", record.base_model, record.samples,
                  epsilon=release.mechanism.epsilon, epsilon_spent=release.charge.epsilon_spent,
                  clipped=release.clipped, created_ts=now,
                  peers=[PeerOutcome(peer.name, peer.instance_id, "completed", 200, fields.samples)])
        self._merge(adapters, r, record, local, [(local.values, record.samples), (theirs, fields.samples)])
        return {"envelope": reply, "signature": base64.b64encode(signature_out).decode("ascii")}

    # --- both ----------------------------------------------------------------------------------------

    def _merge(self, adapters: Adapters, r: Round, record: AdapterRecord, local: AdapterTensors,
               contributions: list[tuple[np.ndarray, int]]) -> None:
        """FedAvg, a peft directory, submitted to training; the round saved (and published)."""
        merged = fedavg(contributions)
        r.total_samples = sum(n for _, n in contributions)
        out = self.data_dir / "federated" / r.user_id / r.id
        write_adapter(out, record.peft_dir, local, merged, {"source": "federated", "round": str(r.round)})
        r.adapter_dir = str(out)
        try:
            run = adapters.submit_adapter(r.user_id, out, r.total_samples, "federated")
            r.run_id = _text(getattr(run, "id", None) or getattr(run, "run_id", None))
            r.run_state = _text(getattr(run, "state", None) or getattr(run, "status", None)) or "submitted"
        except AssistantError as exc:
            r.run_state = "not_submitted"
            r.error = f"the averaged adapter was not submitted: {exc.message}"
        r.status, r.finished_ts = "completed", self.clock()
        self.store.save_round(r)
        self._publish(r)

    def status(self, user_id: str) -> dict[str, Any]:
        me = self.identity
        return {"instance_id": me.instance_id, "public_key": me.public_key_b64,
                "peers": [{"name": p.name, "url": p.url, "instance_id": p.instance_id} for p in self.peers_of(user_id)],
                "epsilon": self.settings.epsilon, "clip_norm": self.settings.clip_norm,
                "max_payload_bytes": self.settings.max_payload_bytes,
                "rounds": [r.as_dict() for r in self.store.rounds(str(user_id))],
                "rejections": self.store.rejections(str(user_id))}

    def _adapters(self) -> Adapters:
        if self.adapters is None or not getattr(self.adapters, "enabled", True):
            raise ServiceUnavailableError("federated sync exchanges LoRA adapters, and LoRA training is off on this "
                                          "instance (lora.enabled = false)")
        return self.adapters

    def _chosen(self, user_id: str, names: list[str] | None) -> list[KnownPeer]:
        mine = {p.name: p for p in self.peers_of(user_id)}
        unknown = [(i, n) for i, n in enumerate(names or []) if n not in mine]
        if unknown:
            error = f"is not one of this user's peers ({', '.join(sorted(mine)) or 'none configured'})"
            raise ValidationFailed(f"peers.{unknown[0][0]} {error}",
                                   [{"field": f"peers.{i}", "error": error} for i, _ in unknown])
        if not mine:
            raise ConflictError("no federated peer is configured for this user (federated.peers entries with "
                                f"user_id = {user_id})")
        return [mine[n] for n in dict.fromkeys(names)] if names else list(mine.values())

    @staticmethod
    def _active(adapters: Adapters, user_id: str) -> AdapterRecord:
        record = adapters.active_adapter(user_id)
        if record is None:
            raise ConflictError(NO_ADAPTER)
        return record

    def _publish(self, r: Round) -> None:
        if self.signals is not None:
            self.signals.publish(SignalKind.TRAINING_PROGRESS, {"feature": "federated", "phase": r.role,
                                                                "status": r.status, "round": r.round,
                                                                "peers": [p.status for p in r.peers]},
                                 user_id=r.user_id, value=float(r.status == "completed"))


NO_ADAPTER = ("this user has no active LoRA adapter on this instance: federated sync averages active adapters, so "
              "one must be trained first (feedback through POST /api/training/feedback until a run activates an "
              "adapter: GET /api/training/status), then sync again")


def _compatible(fields: Any, local: AdapterTensors, record: AdapterRecord) -> None:
    from assistant.learning.federated_payload import check_spec

    if fields.base_model != record.base_model:
        raise PayloadError("base_model_mismatch", f"the update is for base model {fields.base_model!r}; this "
                                                  f"instance's adapter is for {record.base_model!r}")
    theirs = {"r": fields.lora.r, "lora_alpha": float(fields.lora.lora_alpha),
              "target_modules": sorted(fields.lora.target_modules)}
    if theirs != local.lora:
        raise PayloadError("lora_mismatch", f"the update's LoRA configuration {theirs} differs from this adapter's "
                                            f"{local.lora}")
    check_spec(local, [t.model_dump() for t in fields.tensors])


def _privacy(release: Any, clip_norm: float) -> dict[str, float]:
    mechanism = release.mechanism
    return {"epsilon": float(mechanism.epsilon), "delta": float(mechanism.delta), "clip_norm": float(clip_norm),
            "noise_multiplier": float(mechanism.noise_multiplier)}


def _body(envelope: dict[str, Any], signature: bytes) -> bytes:
    from assistant.learning.federated_envelope import signed_body

    return signed_body(envelope, signature)


def _claimed_sender(data: Any) -> str | None:
    envelope = data.get("envelope") if isinstance(data, dict) else None
    sender = envelope.get("sender") if isinstance(envelope, dict) else None
    return sender[:64] if isinstance(sender, str) else None


def _claimed_round(data: Any) -> int | None:
    envelope = data.get("envelope") if isinstance(data, dict) else None
    number = envelope.get("round") if isinstance(envelope, dict) else None
    return number if isinstance(number, int) and not isinstance(number, bool) and 0 <= number < 2**53 else None


def _text(value: Any) -> str | None:
    return None if value is None else str(getattr(value, "value", value))


def build_federated(settings: Any, db: Any, privacy: PrivacyBudget | None, adapters: Adapters | None,
                    signals: Any = None) -> FederatedSync | None:
    """The server's federated sync while ``federated.enabled``, else None (the routes answer 503). It
    needs the privacy budget: enabled without it refuses to start."""
    if not settings.federated.enabled:
        return None
    if privacy is None:
        raise ConfigError("federated.enabled needs privacy.enabled: every federated update is clipped, noised and "
                          "charged to the user's privacy budget")
    return FederatedSync(settings.federated, settings.data_dir, db, privacy, adapters, signals=signals)
