"""SQLite persistence of the knowledge graph (tables of migration m018).

Names, aliases, relations and event payloads are sealed like memory text, bound to their table,
column, row and user; equality lookups go through keyed digests (:meth:`Sealer.token`) of the
normalised name (``kg_names``) and of the relation (``kg_edges.relation_token``), so a stolen
database file names no entity. Plaintext lives only in memory (:mod:`assistant.graph.view`).

This module reads and writes rows; what they mean (resolution, contradictions, recall) is
:mod:`assistant.graph.service`'s.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Sequence
from uuid import uuid4

import numpy as np

from assistant.crypto import SealContext, Sealer
from assistant.errors import NotFoundError
from assistant.graph.types import Edge, Node, NodeKind
from assistant.storage.db import Database

_SPACE = re.compile(r"\s+")
_EDGE = ("e.id, e.user_id, e.subject_id, e.object_id, e.relation_sealed, e.weight, e.valid_ts, e.invalid_ts, "
         "e.invalidated_by, e.created_ts, e.last_seen_ts, e.recalls, e.stability")


def normalise_name(name: str) -> str:
    """How names are compared: NFKC, case-folded, without a leading article or possessive, spaces
    collapsed (``"The  Eiffel Tower"`` and ``"eiffel tower"`` are one name)."""
    text = unicodedata.normalize("NFKC", name).casefold().strip(" \t\n.,;:!?\"'()[]")
    text = re.sub(r"^(the|a|an)\s+", "", text)
    text = re.sub(r"['’]s$", "", text)
    return _SPACE.sub(" ", text).strip()


def normalise_relation(relation: str) -> str:
    """``"Lives in"`` -> ``lives_in``: lower snake case of letters and digits."""
    text = unicodedata.normalize("NFKC", relation).casefold()
    return re.sub(r"[^0-9a-z]+", "_", text).strip("_") or "related_to"


class GraphStore:
    def __init__(self, db: Database, sealer: Sealer):
        self.db = db
        self.sealer = sealer

    # --- sealing ---------------------------------------------------------------------------------

    def _seal(self, table: str, column: str, row_id: str, user_id: str, text: str) -> bytes:
        return self.sealer.seal(text, SealContext(table, column, row_id, user_id))

    def _open(self, table: str, column: str, row_id: str, user_id: str, sealed: bytes) -> str:
        return self.sealer.open(sealed, SealContext(table, column, row_id, user_id))

    def name_token(self, user_id: str, name: str) -> bytes:
        """Keyed digest of a normalised name, per user (one user's digest says nothing of another's)."""
        return self.sealer.token(f"{user_id}\x00name\x00{normalise_name(name)}")

    def relation_token(self, user_id: str, relation: str) -> bytes:
        return self.sealer.token(f"{user_id}\x00rel\x00{normalise_relation(relation)}")

    # --- nodes -----------------------------------------------------------------------------------

    def node_from_row(self, row: dict, *, with_embedding: bool = False) -> Node:
        user = row["user_id"]
        embedding = None
        if with_embedding and row.get("embedding") is not None:
            embedding = np.frombuffer(row["embedding"], dtype=np.float32)
        return Node(
            id=row["id"], user_id=user,
            name=self._open("kg_nodes", "name_sealed", row["id"], user, row["name_sealed"]),
            kind=NodeKind(row["kind"]),
            aliases=tuple(json.loads(self._open("kg_nodes", "aliases_sealed", row["id"], user, row["aliases_sealed"]))),
            created_at=row["created_ts"], last_seen=row["last_seen_ts"], mention_count=row["mention_count"],
            recalls=row["recalls"], stability=row["stability"], embedding=embedding,
        )

    def node(self, user_id: str, node_id: str, *, with_embedding: bool = False) -> Node:
        row = self.db.one("SELECT * FROM kg_nodes WHERE id = ? AND user_id = ?", (str(node_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"node {node_id} not found")
        return self.node_from_row(row, with_embedding=with_embedding)

    def node_rows(self, user_id: str, ids: Sequence[str] | None = None) -> list[dict]:
        if ids is None:
            return self.db.query("SELECT * FROM kg_nodes WHERE user_id = ? ORDER BY rowid", (str(user_id),))
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self.db.query(f"SELECT * FROM kg_nodes WHERE user_id = ? AND id IN ({marks})", (str(user_id), *ids))

    def find_by_name(self, user_id: str, names: Iterable[str]) -> dict[str, str]:
        """Normalised name -> node id, for the names (or aliases) that have a node."""
        by_token = {self.name_token(user_id, n): normalise_name(n) for n in names if normalise_name(n)}
        if not by_token:
            return {}
        marks = ",".join("?" * len(by_token))
        rows = self.db.query(f"SELECT token, node_id FROM kg_names WHERE user_id = ? AND token IN ({marks})",
                             (str(user_id), *by_token))
        return {by_token[r["token"]]: r["node_id"] for r in rows}

    def insert_node(self, db: Database, user_id: str, name: str, kind: NodeKind, now: float, stability: float,
                    embedding: np.ndarray | None = None) -> str:
        node_id = str(uuid4())
        user = str(user_id)
        db.execute(
            "INSERT INTO kg_nodes (id, user_id, name_sealed, aliases_sealed, kind, embedding, created_ts, "
            "last_seen_ts, mention_count, recalls, stability) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?)",
            (node_id, user, self._seal("kg_nodes", "name_sealed", node_id, user, name),
             self._seal("kg_nodes", "aliases_sealed", node_id, user, "[]"), kind.value,
             None if embedding is None else np.asarray(embedding, dtype=np.float32).tobytes(), now, now, stability),
        )
        db.execute("INSERT OR IGNORE INTO kg_names (user_id, token, node_id) VALUES (?, ?, ?)",
                   (user, self.name_token(user, name), node_id))
        return node_id

    def add_alias(self, db: Database, node: Node, alias: str) -> bool:
        """Record ``alias`` for ``node`` unless it is its name or a known alias; True if added."""
        key = normalise_name(alias)
        if not key or key == normalise_name(node.name) or key in {normalise_name(a) for a in node.aliases}:
            return False
        aliases = json.dumps([*node.aliases, alias.strip()])
        db.execute("UPDATE kg_nodes SET aliases_sealed = ? WHERE id = ?",
                   (self._seal("kg_nodes", "aliases_sealed", node.id, node.user_id, aliases), node.id))
        db.execute("INSERT OR IGNORE INTO kg_names (user_id, token, node_id) VALUES (?, ?, ?)",
                   (node.user_id, self.name_token(node.user_id, alias), node.id))
        return True

    def embeddings(self, user_id: str) -> tuple[list[str], np.ndarray | None]:
        """Node ids and their name embeddings (rows with none are left out)."""
        rows = self.db.query("SELECT id, embedding FROM kg_nodes WHERE user_id = ? AND embedding IS NOT NULL",
                             (str(user_id),))
        if not rows:
            return [], None
        return [r["id"] for r in rows], np.vstack([np.frombuffer(r["embedding"], dtype=np.float32) for r in rows])

    # --- edges -----------------------------------------------------------------------------------

    def edge_from_row(self, row: dict, sources: Sequence[str] = ()) -> Edge:
        return Edge(
            id=row["id"], user_id=row["user_id"], subject_id=row["subject_id"],
            relation=self._open("kg_edges", "relation_sealed", row["id"], row["user_id"], row["relation_sealed"]),
            object_id=row["object_id"], weight=row["weight"], valid_at=row["valid_ts"], invalid_at=row["invalid_ts"],
            created_at=row["created_ts"], last_seen=row["last_seen_ts"], recalls=row["recalls"],
            stability=row["stability"], source_memory_ids=tuple(sources), invalidated_by=row["invalidated_by"],
        )

    def edge_rows(self, user_id: str) -> list[dict]:
        return self.db.query(f"SELECT {_EDGE} FROM kg_edges e WHERE e.user_id = ? ORDER BY e.rowid", (str(user_id),))

    def edges_of(self, user_id: str, node_id: str) -> list[Edge]:
        """Every edge touching the node, valid or not, with its source memories."""
        rows = self.db.query(
            f"SELECT {_EDGE} FROM kg_edges e WHERE e.user_id = ? AND (e.subject_id = ? OR e.object_id = ?) "
            "ORDER BY e.valid_ts", (str(user_id), str(node_id), str(node_id)))
        sources = self.sources([r["id"] for r in rows])
        return [self.edge_from_row(r, sources.get(r["id"], ())) for r in rows]

    def sources(self, edge_ids: Sequence[str]) -> dict[str, list[str]]:
        if not edge_ids:
            return {}
        marks = ",".join("?" * len(edge_ids))
        out: dict[str, list[str]] = {}
        for r in self.db.query(f"SELECT edge_id, memory_id FROM kg_edge_sources WHERE edge_id IN ({marks})",
                               list(edge_ids)):
            out.setdefault(r["edge_id"], []).append(r["memory_id"])
        return out

    def current_edges(self, db: Database, user_id: str, subject_id: str, relation: str) -> list[dict]:
        """Valid (not invalidated) edges of ``subject_id`` with ``relation``."""
        return db.query(
            f"SELECT {_EDGE} FROM kg_edges e WHERE e.user_id = ? AND e.subject_id = ? AND e.relation_token = ? "
            "AND e.invalid_ts IS NULL", (str(user_id), subject_id, self.relation_token(user_id, relation)))

    def find_edge(self, db: Database, user_id: str, subject_id: str, relation: str, object_id: str) -> dict | None:
        return db.one(
            f"SELECT {_EDGE} FROM kg_edges e WHERE e.user_id = ? AND e.subject_id = ? AND e.relation_token = ? "
            "AND e.object_id = ? AND e.invalid_ts IS NULL",
            (str(user_id), subject_id, self.relation_token(user_id, relation), object_id))

    def insert_edge(self, db: Database, user_id: str, subject_id: str, relation: str, object_id: str, *,
                    weight: float, valid_at: float, now: float, stability: float, origin: str = "extraction") -> str:
        edge_id = str(uuid4())
        user = str(user_id)
        db.execute(
            "INSERT INTO kg_edges (id, user_id, subject_id, object_id, relation_sealed, relation_token, weight, "
            "valid_ts, created_ts, last_seen_ts, recalls, stability, origin) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
            (edge_id, user, subject_id, object_id,
             self._seal("kg_edges", "relation_sealed", edge_id, user, normalise_relation(relation)),
             self.relation_token(user, relation), weight, valid_at, now, now, stability, origin),
        )
        return edge_id

    # --- events ----------------------------------------------------------------------------------

    def append_event(self, db: Database, user_id: str, kind: str, data: dict, now: float, keep: int) -> int:
        user = str(user_id)
        seq = int(db.scalar("SELECT coalesce(max(seq), 0) + 1 FROM kg_events WHERE user_id = ?", (user,)))
        db.execute("INSERT INTO kg_events (user_id, seq, type, data_sealed, created_ts) VALUES (?, ?, ?, ?, ?)",
                   (user, seq, kind, self._seal("kg_events", "data_sealed", f"{user}:{seq}", user,
                                                json.dumps(data, ensure_ascii=False)), now))
        if seq > keep and seq % 100 == 0:  # trim now and then, not at every event
            db.execute("DELETE FROM kg_events WHERE user_id = ? AND seq <= ?", (user, seq - keep))
        return seq

    def events(self, user_id: str, after: int = 0, limit: int = 1000) -> list[tuple[int, str, dict, float]]:
        user = str(user_id)
        rows = self.db.query("SELECT seq, type, data_sealed, created_ts FROM kg_events WHERE user_id = ? AND seq > ? "
                             "ORDER BY seq LIMIT ?", (user, int(after), int(limit)))
        return [(r["seq"], r["type"],
                 json.loads(self._open("kg_events", "data_sealed", f"{user}:{r['seq']}", user, r["data_sealed"])),
                 r["created_ts"]) for r in rows]

    def last_event(self, user_id: str) -> int:
        return int(self.db.scalar("SELECT coalesce(max(seq), 0) FROM kg_events WHERE user_id = ?", (str(user_id),)))
