"""Migration m029_federated: federated rounds, peers' seen rounds and the rejection log (assistant/learning/federated*.py)."""

from __future__ import annotations

from assistant.storage.migrations.registry import Connection, migration


@migration
def m029_federated(db: Connection) -> None:
    """``federated_rounds``: one row per round a user took part in, as ``initiator`` (they started it) or
    ``responder`` (a peer's update reached them): its status (``completed``, ``failed``), the user's
    round number, base model, own and total sample counts, the epsilon requested and charged, whether
    the update was clipped, every peer's outcome (``peers``, JSON), the averaged adapter's directory
    and the training run it was submitted as. ``federated_peer_rounds`` and ``federated_nonces`` hold
    the last round and the nonces accepted from each sender instance for each local user (replays are
    refused). ``federated_rejections`` logs every refused envelope (inbound) or reply (from a peer):
    the check that failed, the status answered and the message. Nothing holds the user's text (names,
    shapes and numbers of adapters, the configured peer names), so nothing is sealed."""
    db.executescript(
        """
        CREATE TABLE federated_rounds (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            round INTEGER NOT NULL,
            role TEXT NOT NULL,
            status TEXT NOT NULL,
            base_model TEXT,
            samples INTEGER,
            total_samples INTEGER,
            epsilon REAL,
            epsilon_spent REAL,
            clipped INTEGER NOT NULL DEFAULT 0,
            peers TEXT NOT NULL DEFAULT '[]',
            adapter_dir TEXT,
            run_id TEXT,
            run_state TEXT,
            error TEXT,
            created_ts REAL NOT NULL,
            finished_ts REAL
        );
        CREATE INDEX federated_rounds_user ON federated_rounds (user_id, role, created_ts);
        CREATE TABLE federated_peer_rounds (
            sender TEXT NOT NULL,
            user_id TEXT NOT NULL,
            last_round INTEGER NOT NULL,
            updated_ts REAL NOT NULL,
            PRIMARY KEY (sender, user_id)
        );
        CREATE TABLE federated_nonces (
            sender TEXT NOT NULL,
            nonce TEXT NOT NULL,
            seen_ts REAL NOT NULL,
            PRIMARY KEY (sender, nonce)
        );
        CREATE TABLE federated_rejections (
            id TEXT PRIMARY KEY,
            user_id TEXT NOT NULL,
            direction TEXT NOT NULL,
            peer TEXT,
            sender TEXT,
            round INTEGER,
            reason TEXT NOT NULL,
            status INTEGER NOT NULL,
            message TEXT NOT NULL,
            created_ts REAL NOT NULL
        );
        CREATE INDEX federated_rejections_user ON federated_rejections (user_id, created_ts);
        """
    )
