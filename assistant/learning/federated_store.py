"""The federated tables (m029): rounds, the replay guard (senders' last rounds and nonces), rejections."""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from assistant.clock import iso

log = logging.getLogger("assistant.federated")
LIST_LIMIT = 50


def _iso(ts: float | None) -> str | None:
    return None if ts is None else iso(datetime.fromtimestamp(ts, UTC))


@dataclass
class PeerOutcome:
    """What one peer did in a round: ``completed``, ``refused`` (the peer answered an error), ``rejected``
    (its reply failed our checks) or ``unreachable``."""

    name: str
    instance_id: str | None
    status: str
    http_status: int | None = None
    samples: int | None = None
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "instance_id": self.instance_id, "status": self.status,
                "http_status": self.http_status, "samples": self.samples, "error": self.error}


@dataclass
class Round:
    """One round a user took part in (``role``: ``initiator`` or ``responder``)."""

    id: str
    user_id: str
    round: int
    role: str
    status: str
    base_model: str | None
    samples: int | None
    total_samples: int | None = None
    epsilon: float | None = None
    epsilon_spent: float | None = None
    clipped: bool = False
    peers: list[PeerOutcome] = field(default_factory=list)
    adapter_dir: str | None = None
    run_id: str | None = None
    run_state: str | None = None
    error: str | None = None
    created_ts: float = 0.0
    finished_ts: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "round": self.round, "role": self.role, "status": self.status,
                "base_model": self.base_model, "samples": self.samples, "total_samples": self.total_samples,
                "epsilon": self.epsilon, "epsilon_spent": self.epsilon_spent, "clipped": self.clipped,
                "peers": [p.as_dict() for p in self.peers],
                "adapter": None if self.run_id is None and self.run_state is None else
                {"run_id": self.run_id, "state": self.run_state},
                "error": self.error, "created_at": _iso(self.created_ts), "finished_at": _iso(self.finished_ts)}


class FederatedStore:
    def __init__(self, db: Any):
        self.db = db

    # --- rounds ----------------------------------------------------------------------------------

    def next_round(self, user_id: str) -> int:
        last = self.db.scalar("SELECT MAX(round) FROM federated_rounds WHERE user_id = ? AND role = 'initiator'",
                              (user_id,))
        return int(last or 0) + 1

    def save_round(self, r: Round) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO federated_rounds (id, user_id, round, role, status, base_model, samples, "
            "total_samples, epsilon, epsilon_spent, clipped, peers, adapter_dir, run_id, run_state, error, created_ts, "
            "finished_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (r.id, r.user_id, r.round, r.role, r.status, r.base_model, r.samples, r.total_samples, r.epsilon,
             r.epsilon_spent, int(r.clipped), json.dumps([p.as_dict() for p in r.peers]), r.adapter_dir, r.run_id,
             r.run_state, r.error, r.created_ts, r.finished_ts))

    def rounds(self, user_id: str, limit: int = LIST_LIMIT) -> list[Round]:
        rows = self.db.query("SELECT * FROM federated_rounds WHERE user_id = ? ORDER BY created_ts DESC, rowid DESC "
                             "LIMIT ?", (user_id, limit))
        return [_round(row) for row in rows]

    # --- the replay guard ------------------------------------------------------------------------

    def replayed(self, sender: str, user_id: str, round_number: int, nonce: str) -> str | None:
        """Why an update from ``sender`` to ``user_id`` is a replay (a nonce seen before, or a round not
        after the last accepted one), or None."""
        if self.db.scalar("SELECT 1 FROM federated_nonces WHERE sender = ? AND nonce = ?", (sender, nonce)):
            return f"nonce {nonce} was already accepted from this sender: a replayed envelope"
        last = self.db.scalar("SELECT last_round FROM federated_peer_rounds WHERE sender = ? AND user_id = ?",
                              (sender, user_id))
        if last is not None and round_number <= int(last):
            return f"round {round_number} is not after round {last}, the last accepted from this sender"
        return None

    def accept(self, sender: str, user_id: str, round_number: int, nonce: str, now: float, forget_before: float) -> None:
        """Remember an accepted update (and forget nonces older than ``forget_before``: their timestamps are
        refused anyway)."""
        with self.db.transaction() as tx:
            tx.execute("INSERT INTO federated_nonces (sender, nonce, seen_ts) VALUES (?, ?, ?)", (sender, nonce, now))
            tx.execute("INSERT INTO federated_peer_rounds (sender, user_id, last_round, updated_ts) VALUES (?, ?, ?, ?) "
                       "ON CONFLICT (sender, user_id) DO UPDATE SET last_round = excluded.last_round, "
                       "updated_ts = excluded.updated_ts", (sender, user_id, round_number, now))
            tx.execute("DELETE FROM federated_nonces WHERE seen_ts < ?", (forget_before,))

    # --- rejections ------------------------------------------------------------------------------

    def reject(self, user_id: str, direction: str, reason: str, status: int, message: str, *, peer: str | None = None,
               sender: str | None = None, round_number: int | None = None, now: float) -> None:
        """Log a refused envelope (``inbound``) or peer reply (``reply``): a row and a warning line."""
        source = f"peer {peer!r}" if peer else f"instance {sender}" if sender else "an unknown sender"
        log.warning("federated: %s from %s refused (%s, %d) for user %s: %s",
                    "update" if direction == "inbound" else "reply", source, reason, status, user_id, message)
        self.db.execute(
            "INSERT INTO federated_rejections (id, user_id, direction, peer, sender, round, reason, status, message, "
            "created_ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (str(uuid.uuid4()), user_id, direction, peer, sender, round_number, reason, status, message[:1000], now))

    def rejections(self, user_id: str, limit: int = LIST_LIMIT) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT * FROM federated_rejections WHERE user_id = ? ORDER BY created_ts DESC, "
                             "rowid DESC LIMIT ?", (user_id, limit))
        return [{"id": r["id"], "direction": r["direction"], "peer": r["peer"], "sender": r["sender"],
                 "round": r["round"], "reason": r["reason"], "status": r["status"], "message": r["message"],
                 "created_at": _iso(r["created_ts"])} for r in rows]


def _round(row: dict[str, Any]) -> Round:
    peers = [PeerOutcome(**p) for p in json.loads(row["peers"] or "[]")]
    return Round(row["id"], row["user_id"], row["round"], row["role"], row["status"], row["base_model"],
                 row["samples"], row["total_samples"], row["epsilon"], row["epsilon_spent"], bool(row["clipped"]),
                 peers, row["adapter_dir"], row["run_id"], row["run_state"], row["error"], row["created_ts"],
                 row["finished_ts"])
