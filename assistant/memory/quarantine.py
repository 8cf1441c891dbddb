"""Quarantined memories: the list a user reviews, restore, and the purge after ``quarantine_ttl_days``.

A restored memory is remembered (``memory_restores``, with the ``updated_at`` it had): sanitation
leaves it alone until its text changes. Quarantine itself is :meth:`MemoryStore.quarantine` (type ``Quarantined``, the former type kept in
``original_memory_type``): such a memory never reaches a prompt. Restore gives it back its type
(``Archived`` again when it had been archived before) and tells the listeners it was written, so the
knowledge graph takes its facts back. A purge deletes it for good; the caller keeps a tombstone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from assistant.clock import iso_at
from assistant.errors import ConflictError
from assistant.memory.records import MAX_TAGS, sealed_at
from assistant.memory.store import MemoryStore
from assistant.memory.types import Memory, MemoryType
from assistant.storage.db import Database

QUARANTINED = MemoryType.QUARANTINED.value


def quarantined(store: MemoryStore, user_id: str, limit: int = 50, offset: int = 0) -> tuple[list[Memory], int]:
    """The user's quarantined memories, newest quarantine first, and how many there are."""
    user = str(user_id)
    rows = store.db.query("SELECT * FROM memory_rows WHERE user_id = ? AND memory_type = ? "
                          "ORDER BY quarantined_at DESC, rowid DESC LIMIT ? OFFSET ?", (user, QUARANTINED, limit, offset))
    total = store.db.scalar("SELECT count(*) FROM memories WHERE user_id = ? AND memory_type = ?", (user, QUARANTINED))
    return [store._memory(r) for r in rows], int(total or 0)


def restore(store: MemoryStore, user_id: str, memory_id: str) -> Memory:
    """Bring a quarantined memory back (404 when it is not the user's, 409 when not quarantined)."""
    row = store._row(user_id, memory_id)
    if row["memory_type"] != QUARANTINED:
        raise ConflictError(f"memory {memory_id} is not quarantined (it is {row['memory_type']})")
    back = MemoryType.ARCHIVED.value if row["archived_at"] else (row["original_memory_type"] or MemoryType.CONTEXT.value)
    keep_original = row["original_memory_type"] if back == MemoryType.ARCHIVED.value else None
    with store.db.transaction() as db:
        db.execute("UPDATE memories SET memory_type = ?, original_memory_type = ?, quarantined_at = NULL, "
                   "quarantine_reason = NULL WHERE rowid = ?", (back, keep_original, row["rowid"]))
        # the user's decision stands: sanitation does not judge it again until its text changes
        db.execute("INSERT OR REPLACE INTO memory_restores (memory_id, user_id, updated_at, restored_at) "
                   "VALUES (?, ?, ?, ?)", (row["id"], row["user_id"], row["updated_at"], iso_at(store.clock())))
    store._tell("memories_written", user_id, [row["id"]])
    return store.get(user_id, memory_id)


def expired(store: MemoryStore, user_id: str, now: float, ttl_days: float) -> list[dict]:
    """Quarantined memories of the user older than ``ttl_days``: id, rowid, quarantined_at and the
    reason (opened: the caller seals it again for the tombstone)."""
    cutoff = iso_at(now - ttl_days * 86_400.0)
    rows = store.db.query("SELECT id, user_id, rowid, quarantined_at, quarantine_reason FROM memories WHERE "
                          "user_id = ? AND memory_type = ? AND quarantined_at IS NOT NULL AND quarantined_at < ? "
                          "ORDER BY rowid", (str(user_id), QUARANTINED, cutoff))
    return [{**r, "quarantine_reason": store.open_reason(r)} for r in rows]


def purge(db: Database, rows: Sequence[dict]) -> list[int]:
    """Delete ``rows`` (from :func:`expired`) inside the caller's transaction; returns their rowids,
    which the caller removes from the vector index once the transaction committed
    (``store.indexes.remove``)."""
    rowids = [int(r["rowid"]) for r in rows]
    if rowids:
        marks = ",".join("?" * len(rowids))
        db.execute(f"DELETE FROM memories WHERE rowid IN ({marks})", rowids)
    return rowids


def set_aside(db: Database, store: MemoryStore, user_id: str, items: Sequence[tuple[str, int, str, str, str]],
              when: float) -> list[str]:
    """Quarantine many memories inside the caller's transaction, telling no listener (the caller
    withdraws them from the graph in the same transaction and tells the rest after commit).
    ``items``: (id, rowid, the type and ``updated_at`` the caller judged, reason); a memory that
    changed since (deleted, restored, quarantined, merged with new text) is left alone. Reasons are
    sealed like the memory's text. Returns the ids quarantined."""
    done: list[str] = []
    stamp = iso_at(when)
    for memory_id, rowid, seen, updated, reason in items:
        sealed = store.seal_reason({"id": memory_id, "user_id": str(user_id)}, reason)
        rows = db.query("UPDATE memories SET original_memory_type = coalesce(original_memory_type, memory_type), "
                        "memory_type = ?, quarantined_at = ?, quarantine_reason = ? WHERE rowid = ? AND id = ? AND "
                        "memory_type = ? AND memory_type <> ? AND updated_at IS ? RETURNING id",
                        (QUARANTINED, stamp, sealed, int(rowid), memory_id, seen, QUARANTINED, updated))
        done += [r["id"] for r in rows]
    return done


def add_tag(db: Database, store: MemoryStore, user_id: str, memory_id: str, tag: str) -> bool:
    """Add ``tag`` to a memory inside the caller's transaction (tags are sealed: opened, extended,
    sealed again); False when the memory is gone, already has it, or has ``MAX_TAGS`` tags."""
    row = db.one("SELECT rowid, id, user_id, tags FROM memories WHERE id = ? AND user_id = ?",
                 (str(memory_id), str(user_id)))
    if row is None:
        return False
    tags = json.loads(store._open(row, "tags"))
    if tag in tags or len(tags) >= MAX_TAGS:
        return False
    sealed = store.sealer.seal(json.dumps([*tags, tag]), sealed_at("tags", row["id"], row["user_id"]))
    db.execute("UPDATE memories SET tags = ? WHERE rowid = ?", (sealed, row["rowid"]))
    return True
