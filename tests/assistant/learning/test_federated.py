"""Federated sync between two in-process instances: real Ed25519 keys, real SQLite, the real privacy budget
(dp-accounting), synthetic peft adapters, and an in-process transport in place of HTTP."""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from assistant.config import FederatedSettings, PrivacySettings
from assistant.errors import ConfigError, ConflictError, UpstreamError, ValidationFailed
from assistant.extended.privacy import BudgetExhausted, PrivacyBudget
from assistant.learning.federated import FederatedSync
from assistant.learning.federated_envelope import Rejection
from assistant.learning.federated_identity import canonical, instance_id, load_identity, verify
from assistant.learning.federated_payload import PayloadError, decode, encode, fedavg, read_adapter
from assistant.learning.federated_transport import PeerUnreachable
from assistant.storage.db import Database
from assistant.testing.federated import InProcessTransport, StaticAdapters, write_peft_adapter

UA, UB = "00000000-0000-0000-0000-0000000000aa", "00000000-0000-0000-0000-0000000000bb"
KEY_A, KEY_B = "key-of-a-user-on-a", "key-of-b-user-on-b"  # each user's key on their own instance


class ZeroRng:
    """A generator whose Gaussian noise is zero: the round's arithmetic can be checked exactly."""

    def normal(self, loc: float, scale: float, shape: object) -> np.ndarray:
        return np.zeros(shape)


@pytest.fixture
def no_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("assistant.extended.privacy.fresh_rng", lambda: ZeroRng())


@dataclass
class Side:
    sync: FederatedSync
    adapters: StaticAdapters
    budget: PrivacyBudget
    db: Database
    user: str


@pytest.fixture
def pair(tmp_path: Path):  # noqa: ANN201
    """Instances A (user UA) and B (user UB), each the other's peer, joined by an in-process transport."""
    transport = InProcessTransport()
    ids = {n: load_identity(tmp_path / n / "fed.key") for n in "ab"}
    made: list[Database] = []

    def side(name: str, user: str, other: str, other_user_key: str, privacy_epsilon: float = 1.0,
             **overrides: object) -> Side:
        settings = FederatedSettings(enabled=True, key_path=tmp_path / name / "fed.key", peers=[{
            "name": other, "url": f"http://{other}.test", "api_key": other_user_key,
            "public_key": ids[other].public_key_b64, "user_id": user}], **overrides)
        db = Database(tmp_path / name / "assistant.db")
        made.append(db)
        budget = PrivacyBudget(PrivacySettings(epsilon=privacy_epsilon), db)
        adapters = StaticAdapters()
        sync = FederatedSync(settings, tmp_path / name, db, budget, adapters, transport=transport)
        transport.register(f"http://{name}.test", sync, {KEY_A if name == "a" else KEY_B: user})
        return Side(sync, adapters, budget, db, user)

    def make(a: dict | None = None, b: dict | None = None) -> tuple[Side, Side, InProcessTransport]:
        return side("a", UA, "b", KEY_B, **(a or {})), side("b", UB, "a", KEY_A, **(b or {})), transport

    yield make
    for db in made:
        db.close()


def give(side: Side, tmp_path: Path, name: str, samples: int, **adapter: object) -> None:
    side.adapters.set_active(side.user, write_peft_adapter(tmp_path / name, **adapter), samples)


# --- pure parts -------------------------------------------------------------------------------------


def test_fedavg_weights_by_sample_counts() -> None:
    merged = fedavg([(np.array([1.0, 10.0]), 30), (np.array([3.0, -10.0]), 10)])
    assert merged.tolist() == [1.5, 5.0]  # (30x1 + 10x3) / 40, (30x10 - 10x10) / 40
    assert fedavg([(np.array([2.0]), 1), (np.array([4.0]), 1), (np.array([9.0]), 2)]).tolist() == [6.0]
    with pytest.raises(ValueError, match="positive"):
        fedavg([(np.array([1.0]), 0)])


def test_payload_decoding_is_strict(tmp_path: Path) -> None:
    local = read_adapter(write_peft_adapter(tmp_path / "x"))
    assert local.size == 2 * (4 * 16 + 16 * 4 + 4 * 16 + 8 * 4) == 448
    assert np.allclose(decode(encode(local.values), local), local.values, atol=1e-6)
    with pytest.raises(PayloadError, match="not valid base64"):
        decode("***", local)
    with pytest.raises(PayloadError, match="1788 bytes; 448 float32 values are 1792"):
        decode(base64.b64encode(b"\0" * 1788).decode(), local)
    nan = local.values.copy()
    nan[[3, 7]] = [np.nan, np.inf]
    with pytest.raises(PayloadError, match="2 values that are NaN or infinite"):
        decode(encode(nan), local)


def test_identity_is_made_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "fed.key"
    first = load_identity(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_identity(path) == first and len(first.instance_id) == 32
    assert first.instance_id == instance_id(first.public_key)
    envelope = {"round": 1, "payload": "AAAA"}
    signature = first.sign(envelope)
    assert verify(first.public_key, envelope, signature)
    assert not verify(first.public_key, {**envelope, "round": 2}, signature)
    assert not verify(load_identity(tmp_path / "other.key").public_key, envelope, signature)
    assert canonical({"b": 1, "a": [1.5]}).endswith(b'{"a":[1.5],"b":1}')
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_identity(path)


def test_settings_refuse_a_bad_public_key() -> None:
    peer = {"name": "b", "url": "http://b.test", "api_key": "k", "user_id": UA}
    with pytest.raises(ValueError, match="decodes to 16 bytes"):
        FederatedSettings(peers=[{**peer, "public_key": base64.b64encode(b"x" * 16).decode()}])
    with pytest.raises(ValueError, match="unique"):
        FederatedSettings(peers=[{**peer, "public_key": "ab" * 32}] * 2)


# --- a round ----------------------------------------------------------------------------------------


def test_a_round_averages_both_sides_by_sample_counts(pair, tmp_path: Path, no_noise: None) -> None:
    a, b, transport = pair()
    give(a, tmp_path, "wa", 30, fill=0.01)
    give(b, tmp_path, "wb", 10, fill=0.03)
    r = a.sync.start_round(UA)
    assert (r.status, r.round, r.samples, r.total_samples) == ("completed", 1, 30, 40)
    assert [(p.name, p.status, p.samples) for p in r.peers] == [("b", "completed", 10)]
    assert len(transport.sent) == 1
    merged_a = read_adapter(a.adapters.submitted[0].peft_dir).values
    merged_b = read_adapter(b.adapters.submitted[0].peft_dir).values
    assert np.allclose(merged_a, 0.015) and np.allclose(merged_b, 0.015)  # (30 x 0.01 + 10 x 0.03) / 40
    assert (a.adapters.submitted[0].samples, a.adapters.submitted[0].source) == (40, "federated")
    assert b.adapters.submitted[0].samples == 40
    # each side charged its own user's budget once
    assert [e.query for e in a.budget.entries(UA)] == ["federated_update"]
    assert [e.query for e in b.budget.entries(UB)] == ["federated_update"]
    assert b.sync.store.rounds(UB)[0].role == "responder"
    assert a.sync.start_round(UA).round == 2


def test_updates_are_clipped_to_clip_norm(pair, tmp_path: Path, no_noise: None) -> None:
    a, b, transport = pair(a={"clip_norm": 1.0})
    give(a, tmp_path, "wa", 1, fill=0.5)  # norm 0.5 x sqrt(448) = 10.6 > 1
    give(b, tmp_path, "wb", 1, fill=0.0)
    r = a.sync.start_round(UA)
    assert r.clipped
    sent = json.loads(transport.sent[0][1])["envelope"]
    released = decode(sent["payload"], read_adapter(tmp_path / "wa"))
    assert np.linalg.norm(released) == pytest.approx(1.0, rel=1e-6)
    assert sent["privacy"]["clip_norm"] == 1.0
    assert a.budget.entries(UA)[0].parameters["sensitivity"] == 1.0
    # the own contribution is exact (it never leaves the instance), the peer's the noised one
    assert np.allclose(read_adapter(a.adapters.submitted[0].peft_dir).values, 0.25)


def test_the_noise_is_the_gaussian_mechanism_of_the_budget(pair, tmp_path: Path) -> None:
    a, b, transport = pair(a={"epsilon": 0.5, "clip_norm": 2.0})
    give(a, tmp_path, "wa", 1, fill=0.0)
    give(b, tmp_path, "wb", 1, fill=0.0)
    a.sync.start_round(UA)
    sent = json.loads(transport.sent[0][1])["envelope"]
    released = decode(sent["payload"], read_adapter(tmp_path / "wa"))
    sigma = sent["privacy"]["noise_multiplier"] * 2.0
    assert sent["privacy"]["epsilon"] == 0.5 and 5 < sent["privacy"]["noise_multiplier"] < 10
    assert np.std(released) == pytest.approx(sigma, rel=0.15)  # 448 draws of N(0, sigma^2)


def test_budget_exhaustion_sends_nothing(pair, tmp_path: Path) -> None:
    a, b, transport = pair(a={"privacy_epsilon": 0.4})  # federated.epsilon 0.5 > the whole budget
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    with pytest.raises(BudgetExhausted, match="privacy budget exhausted: federated_update"):
        a.sync.start_round(UA)
    assert transport.sent == [] and a.sync.store.rounds(UA) == [] and a.adapters.submitted == []


def test_a_peer_out_of_budget_answers_429_and_applies_nothing(pair, tmp_path: Path) -> None:
    a, b, transport = pair(b={"privacy_epsilon": 0.4})
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    with pytest.raises(UpstreamError, match="no peer completed the exchange: b: RATE_LIMITED"):
        a.sync.start_round(UA)
    assert b.adapters.submitted == [] and a.adapters.submitted == []
    assert [(x["reason"], x["status"]) for x in b.sync.store.rejections(UB)] == [("budget_exhausted", 429)]
    assert a.sync.store.rounds(UA)[0].peers[0].http_status == 429


def test_no_active_adapter_is_409(pair, tmp_path: Path) -> None:
    a, b, transport = pair()
    with pytest.raises(ConflictError, match="no active LoRA adapter"):
        a.sync.start_round(UA)
    give(a, tmp_path, "wa", 1)
    with pytest.raises(UpstreamError, match="b: CONFLICT: this user has no active LoRA adapter"):
        a.sync.start_round(UA)
    assert b.sync.store.rejections(UB)[0]["reason"] == "no_adapter"


def test_unknown_peer_names_are_422(pair) -> None:
    a, _, _ = pair()
    with pytest.raises(ValidationFailed) as caught:
        a.sync.start_round(UA, ["b", "nope"])
    assert caught.value.details["fields"][0]["field"] == "peers.1"


# --- what a responder refuses -----------------------------------------------------------------------


def signed_update(a: Side, tmp_path: Path) -> bytes:
    """A's signed update for B, as it goes on the wire (captured from a round B cannot answer)."""
    transport: InProcessTransport = a.sync.transport  # type: ignore[assignment]
    def unsent(body: bytes) -> bytes:
        raise PeerUnreachable("kept for the test")

    transport.tamper = unsent
    with pytest.raises(UpstreamError, match="kept for the test"):
        a.sync.start_round(UA)
    transport.tamper = None
    return transport.sent[-1][1]


def answer(b: Side, body: bytes | dict) -> dict:
    return b.sync.answer(UB, json.loads(body) if isinstance(body, bytes) else body)


def refused(b: Side, body: bytes | dict, status: int, reason: str) -> Rejection | PayloadError:
    applied = len(b.adapters.submitted)
    with pytest.raises((Rejection, PayloadError)) as caught:
        answer(b, body)
    assert caught.value.reason == reason
    assert b.sync.store.rejections(UB)[0]["reason"] == reason and b.sync.store.rejections(UB)[0]["status"] == status
    assert len(b.adapters.submitted) == applied  # nothing applied
    return caught.value


def test_a_tampered_payload_is_a_bad_signature(pair, tmp_path: Path) -> None:
    a, b, _ = pair()
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    body = json.loads(signed_update(a, tmp_path))
    values = bytearray(base64.b64decode(body["envelope"]["payload"]))
    values[0] ^= 1
    body["envelope"]["payload"] = base64.b64encode(bytes(values)).decode()
    error = refused(b, body, 401, "bad_signature")
    assert error.code == "UNAUTHORIZED" and b.budget.entries(UB) == []


def test_an_unknown_key_is_401(pair, tmp_path: Path) -> None:
    a, b, _ = pair()
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    body = json.loads(signed_update(a, tmp_path))
    stranger = load_identity(tmp_path / "stranger.key")
    envelope = {**body["envelope"], "sender": stranger.instance_id}
    forged = {"envelope": envelope, "signature": base64.b64encode(stranger.sign(envelope)).decode()}
    error = refused(b, forged, 401, "unknown_key")
    assert "not among this user's federated.peers" in error.message
    assert b.sync.store.rejections(UB)[0]["sender"] == stranger.instance_id


def test_a_replayed_round_is_409(pair, tmp_path: Path) -> None:
    a, b, _ = pair()
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    body = signed_update(a, tmp_path)
    assert answer(b, body)["envelope"]["kind"] == "reply"
    error = refused(b, body, 409, "replayed")
    assert "already accepted" in error.message
    assert len(b.adapters.submitted) == 1 and len(b.budget.entries(UB)) == 1


def test_an_old_round_with_a_fresh_nonce_is_409(pair, tmp_path: Path) -> None:
    a, b, _ = pair()
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    a.sync.start_round(UA)  # round 1 accepted
    a.sync.store.db.execute("DELETE FROM federated_rounds")  # A forgets: its next round is numbered 1 again
    with pytest.raises(UpstreamError, match="round 1 is not after round 1"):
        a.sync.start_round(UA)
    assert b.sync.store.rejections(UB)[0]["reason"] == "replayed"


def test_a_wrong_shape_or_base_model_is_400(pair, tmp_path: Path) -> None:
    a, b, _ = pair()
    give(a, tmp_path, "wa", 1, hidden=32)
    give(b, tmp_path, "wb", 1, hidden=16)
    body = signed_update(a, tmp_path)
    error = refused(b, body, 400, "shape_mismatch")
    assert "shape [4, 32] in the update and [4, 16] here" in error.message and b.budget.entries(UB) == []
    b.adapters.set_active(UB, tmp_path / "wb", 1, base_model="another-model")
    refused(b, signed_update(a, tmp_path), 400, "base_model_mismatch")


def test_a_stale_or_misaddressed_envelope_is_400(pair, tmp_path: Path) -> None:
    a, b, _ = pair(b={"max_clock_skew_secs": 60})
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)
    body = signed_update(a, tmp_path)
    b.sync.clock = lambda: json.loads(body)["envelope"]["timestamp"] + 61
    assert "at most 60 s" in refused(b, body, 400, "stale").message
    a.sync.transport.sent.clear()
    body = json.loads(signed_update(a, tmp_path))
    envelope = {**body["envelope"], "recipient": "0" * 32}
    resigned = {"envelope": envelope, "signature": base64.b64encode(a.sync.identity.sign(envelope)).decode()}
    b.sync.clock = lambda: envelope["timestamp"]
    b.db.execute("DELETE FROM federated_rejections")  # the stale one is logged at B's shifted clock, later
    refused(b, resigned, 400, "wrong_recipient")


def test_a_malformed_envelope_is_400_with_the_fields(pair, tmp_path: Path) -> None:
    a, b, _ = pair()
    give(b, tmp_path, "wb", 1)
    body = {"envelope": {"version": 1, "kind": "update", "round": "7"}, "signature": "AAAA"}
    error = refused(b, body, 400, "malformed")
    fields = {f["field"] for f in error.details["fields"]}
    assert {"envelope.round", "envelope.sender", "envelope.payload"} <= fields


def test_a_tampered_reply_is_rejected_and_logged_by_the_initiator(pair, tmp_path: Path) -> None:
    a, b, transport = pair()
    give(a, tmp_path, "wa", 1)
    give(b, tmp_path, "wb", 1)

    class Tampering(InProcessTransport):
        def exchange(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            answered = transport.exchange(*args, **kwargs)
            reply = json.loads(answered.body)
            reply["envelope"]["samples"] = 10_000  # claims more weight than it signed
            return type(answered)(200, json.dumps(reply).encode())

    a.sync.transport = Tampering()
    with pytest.raises(UpstreamError, match="b: the reply is not signed by b's key"):
        a.sync.start_round(UA)
    assert [(x["direction"], x["reason"], x["peer"]) for x in a.sync.store.rejections(UA)] == [
        ("reply", "bad_signature", "b")]
    assert a.adapters.submitted == [] and a.sync.store.rounds(UA)[0].status == "failed"
