"""What dream consolidation does to memories: merge a group into a new memory, archive, absorb duplicates.

The memory side of NREM (assistant/dream/nrem.py plans, journals and calls these). Each change
runs in one transaction (all or nothing) and is idempotent, because the dream journal replays an
operation a crash interrupted:

- :func:`write_consolidated` writes the merged memory of a group under an id chosen when the
  operation was planned: if that memory exists, the operation already ran and nothing changes.
  Content is merged on plaintext (opened in memory only, :func:`records.merge_text` in the order
  the sources were stored), sealed again, embedded again, indexed for keywords and vectors.
  The merged memory takes the highest-priority type (:func:`scoring.type_rank`), the highest
  importance, the union of the tags, the summed access counts, the earliest ``created_at`` (what it
  remembers was first said then) and the conversation of its sources when they share one. The
  sources are then archived (``archived_by_session``) or deleted.
- :func:`archive` sets memories aside as ``Archived`` (their type kept in ``original_memory_type``):
  they stay searchable at half their score (``scoring.ARCHIVED_FACTOR``).
- :func:`absorb_duplicates` archives duplicates of a kept memory, which gains their access counts.

:func:`normalise_text` is what "the same text" means for deduplication.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING

import numpy as np

from assistant.errors import ConflictError
from assistant.memory.records import (
    MAX_CONTENT_CHARS,
    MAX_TAGS,
    SUMMARY_CHARS,
    decay_type,
    iso_of,
    merge_text,
    sealed_at,
)
from assistant.memory.scoring import type_rank
from assistant.memory.types import MemoryType

if TYPE_CHECKING:
    from assistant.memory.store import MemoryStore

# Memories consolidation and deduplication leave alone: already set aside, or the dream's own.
NOT_CONSOLIDATED = (MemoryType.ARCHIVED, MemoryType.QUARANTINED, MemoryType.DREAM_INSIGHT, MemoryType.HYPOTHESIS)
NOT_ARCHIVED = (MemoryType.ARCHIVED, MemoryType.QUARANTINED, MemoryType.HYPOTHESIS)
CHUNK = 500  # ids per SQL statement
_PUNCT = re.compile(r"[^\w\s]+")
_SPACE = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """NFKC, case-folded, punctuation dropped, whitespace collapsed: ``"I live in  Lisbon!"`` and
    ``"i live in lisbon"`` are one text."""
    text = _PUNCT.sub(" ", unicodedata.normalize("NFKC", text).casefold())
    return _SPACE.sub(" ", text).strip()


def text_digest(user_id: str, text: str) -> str:
    """What identifies a text in memory (never stored): sha256 of user and text."""
    return hashlib.sha256(f"{user_id}\x00{text}".encode()).hexdigest()


def _marks(values: Sequence) -> str:
    return ",".join("?" * len(values))


def _skip(types: Sequence[MemoryType]) -> str:
    return ",".join(f"'{t.value}'" for t in types)


@dataclass
class Candidates:
    """A user's memories that may be consolidated: ids, rowids and unit embeddings, by rowid."""

    rowids: np.ndarray
    ids: list[str]
    vectors: np.ndarray
    conversations: np.ndarray  # a code per conversation_id, -1 for none


def candidates(store: MemoryStore, user_id: str, skip: Sequence[MemoryType] = NOT_CONSOLIDATED) -> Candidates:
    """The user's memories not of the ``skip`` types, with their embeddings (read from SQLite)."""
    rows = store.db.query(f"SELECT rowid, id, embedding, conversation_id FROM memories WHERE user_id = ? AND "
                          f"memory_type NOT IN ({_skip(skip)}) ORDER BY rowid", (str(user_id),))
    dim = store.settings.embedding_dimension
    vectors = np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32).reshape(len(rows), dim)
    codes: dict[str, int] = {}
    conversations = np.array([-1 if r["conversation_id"] is None else codes.setdefault(r["conversation_id"], len(codes))
                              for r in rows], dtype=np.int64)
    return Candidates(np.array([r["rowid"] for r in rows], dtype=np.int64), [r["id"] for r in rows], vectors,
                      conversations)


def rows_of(store: MemoryStore, user_id: str, ids: Sequence[str], skip: Sequence[MemoryType] = ()) -> list[dict]:
    """``memory_rows`` of ``ids`` (of the user; not of the ``skip`` types), in stored order."""
    out: list[dict] = []
    ids = list(ids)
    # "+column": not an index term, so that SQLite looks the ids up by their unique index instead of
    # scanning the user's rows through (user_id, memory_type) (measured: 4 ms a call at 40k memories)
    clause = f"AND +memory_type NOT IN ({_skip(skip)})" if skip else ""
    for start in range(0, len(ids), CHUNK):
        part = ids[start:start + CHUNK]
        out += store.db.query(f"SELECT * FROM memory_rows WHERE +user_id = ? AND id IN ({_marks(part)}) {clause}",
                              (str(user_id), *part))
    return sorted(out, key=lambda r: (r["created_at"], r["rowid"]))


def open_content(store: MemoryStore, row: dict) -> str:
    return store.sealer.open(row["content"], sealed_at("content", row["id"], row["user_id"]))


def brief(row: dict, content: str | None = None) -> dict:
    """A memory as a journal snapshot shows it: id, type, importance, a 200-character preview."""
    out = {"id": row["id"], "memory_type": row["memory_type"], "importance": round(float(row["importance"]), 4)}
    if content is not None:
        out["preview"] = content[:SUMMARY_CHARS]
    return out


def merged_text(store: MemoryStore, rows: Sequence[dict]) -> str:
    """The plaintext merge of ``rows`` (in stored order)."""
    return reduce(merge_text, (open_content(store, r) for r in rows))


@dataclass
class Consolidated:
    memory_id: str
    created: bool  # False: it already existed (a replay)
    sources: list[str]
    removed: list[str]  # archived (or deleted) by this call
    row: dict | None = None
    content: str | None = None


def write_consolidated(store: MemoryStore, user_id: str, memory_id: str, source_ids: Sequence[str], *,
                       session_id: str, archive: bool = True,
                       vector_for: Callable[[str], np.ndarray | None] | None = None) -> Consolidated | None:
    """Merge the sources into a new memory ``memory_id`` and archive (or delete) them; see the module
    doc. None when fewer than two sources are left to merge. Raises ConflictError (nothing written)
    when the sources changed while the merged text was being embedded."""
    user = str(user_id)
    if store.db.one("SELECT 1 FROM memories WHERE id = ? AND +user_id = ?", (memory_id, user)) is not None:
        return Consolidated(memory_id, False, list(source_ids), [])
    rows = rows_of(store, user, source_ids, NOT_CONSOLIDATED)
    if len(rows) < 2:
        return None
    content = merged_text(store, rows)
    if len(content) > MAX_CONTENT_CHARS:
        raise ConflictError(f"the merged text would be {len(content)} characters (at most {MAX_CONTENT_CHARS})")
    vector = vector_for(content) if vector_for is not None else None
    if vector is None:
        vector = store.embedder.embed([content])[0]
    vector = np.asarray(vector, dtype=np.float32).reshape(-1)
    kind = min((MemoryType(r["memory_type"]) for r in rows), key=type_rank)
    tags: list[str] = []
    for r in rows:
        tags += [t for t in json.loads(store.sealer.open(r["tags"], sealed_at("tags", r["id"], user))) if t not in tags]
    conversations = {r["conversation_id"] for r in rows}
    conversation = rows[0]["conversation_id"] if len(conversations) == 1 else None
    now = store.clock()
    seal = store.sealer.seal
    with store.db.transaction() as db:
        current = rows_of(store, user, source_ids, NOT_CONSOLIDATED)
        if [(r["id"], r["updated_at"]) for r in current] != [(r["id"], r["updated_at"]) for r in rows]:
            raise ConflictError("the memories to consolidate changed while they were merged")
        db.execute(
            "INSERT INTO memories (id, user_id, conversation_id, content, summary, tags, memory_type, created_at, "
            "updated_at, accessed_at, embedding, position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (memory_id, user, conversation, seal(content, sealed_at("content", memory_id, user)),
             seal(content[:SUMMARY_CHARS], sealed_at("summary", memory_id, user)),
             seal(json.dumps(tags[:MAX_TAGS]), sealed_at("tags", memory_id, user)), kind.value,
             min(r["created_at"] for r in rows), iso_of(now), max(r["accessed_at"] for r in rows), vector.tobytes(),
             # where its first source stood in the conversation (m020): its neighbours stay its sources'
             min(r["position"] if r["position"] is not None else r["rowid"] for r in rows)))
        rowid = int(db.scalar("SELECT rowid FROM memories WHERE id = ?", (memory_id,)))
        db.execute("INSERT INTO memory_scores (memory_rowid, user_id, decay_type, importance, access_count, "
                   "accessed_ts, decay_ts) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   (rowid, user, decay_type(kind), max(float(r["importance"]) for r in rows),
                    sum(int(r["access_count"]) for r in rows), max(float(r["accessed_ts"]) for r in rows), now))
        store.keywords.add([(rowid, user, content)])
        removed = _set_aside(store, user, [r["id"] for r in rows], session_id=session_id, archive=archive, now=now)
    store.indexes.add(user, np.array([rowid], dtype=np.int64), vector.reshape(1, -1))
    if not archive:
        store.indexes.remove(user, [r["rowid"] for r in rows])
        store._tell("memories_removed", user, removed)
    store._tell("memories_written", user, [memory_id])
    row = store.db.one("SELECT * FROM memory_rows WHERE rowid = ?", (rowid,))
    return Consolidated(memory_id, True, [r["id"] for r in rows], removed, row, content)


def _set_aside(store: MemoryStore, user: str, ids: Sequence[str], *, session_id: str | None, archive: bool,
               now: float) -> list[str]:
    """Archive (or delete) those of ``ids`` that are not yet set aside, inside the caller's
    transaction; returns their ids."""
    db = store.db
    done: list[str] = []
    for start in range(0, len(ids), CHUNK):
        part = list(ids[start:start + CHUNK])
        where = f"+user_id = ? AND id IN ({_marks(part)}) AND +memory_type NOT IN ({_skip(NOT_ARCHIVED)})"
        found = [r["id"] for r in db.query(f"SELECT id FROM memories WHERE {where}", (user, *part))]
        if not found:
            continue
        if archive:
            db.execute("UPDATE memories SET original_memory_type = memory_type, memory_type = ?, archived_at = ?, "
                       f"archived_by_session = ? WHERE {where}",
                       (MemoryType.ARCHIVED.value, iso_of(now), session_id, user, *part))
        else:
            db.execute(f"DELETE FROM memories WHERE {where}", (user, *part))
        done += found
    return done


def archive(store: MemoryStore, user_id: str, ids: Sequence[str], *, session_id: str | None) -> list[str]:
    """Archive those of ``ids`` not already Archived, Quarantined or Hypothesis; returns their ids."""
    with store.db.transaction():
        return _set_aside(store, str(user_id), ids, session_id=session_id, archive=True, now=store.clock())


def absorb_duplicates(store: MemoryStore, user_id: str, keep_id: str, duplicate_ids: Sequence[str], *,
                      session_id: str | None) -> list[str]:
    """Archive the duplicates of ``keep_id`` that are not yet archived; ``keep_id`` gains their
    access counts. Nothing happens when ``keep_id`` is gone or set aside. Returns the archived ids."""
    user = str(user_id)
    with store.db.transaction() as db:
        keep = db.one(f"SELECT rowid FROM memories WHERE id = ? AND +user_id = ? AND +memory_type NOT IN "
                      f"({_skip(NOT_ARCHIVED)})", (keep_id, user))
        if keep is None:
            return []
        live = rows_of(store, user, [i for i in duplicate_ids if i != keep_id], NOT_ARCHIVED)
        if not live:
            return []
        db.execute("UPDATE memory_scores SET access_count = access_count + ? WHERE memory_rowid = ?",
                   (sum(int(r["access_count"]) for r in live), keep["rowid"]))
        return _set_aside(store, user, [r["id"] for r in live], session_id=session_id, archive=True,
                          now=store.clock())
