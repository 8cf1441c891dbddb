"""Rotating the memory key: every sealed value re-encrypted, and every keyed token recomputed, in
one transaction; resumable if the process is killed (see :mod:`assistant.storage.memory_key` for
the steps and how an interrupted rotation is settled on the next open).

The keyed tokens (:meth:`assistant.crypto.Sealer.token`) derive from the key too: the memory keyword
index, snippet title keys and agent-profile name tokens are recomputed from the opened values with
the new key, through the stores' own functions, so search, title uniqueness and ``@name`` lookups
keep working. It lives above ``storage`` because it needs those stores.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from nacl.utils import random as random_bytes

from assistant.agents.profiles import ProfileStore
from assistant.crypto import KEY_BYTES, Sealer
from assistant.errors import ConfigError
from assistant.memory.keywords import KeywordIndex
from assistant.memory.records import sealed_at
from assistant.snippets import SnippetStore
from assistant.snippets import sealed_at as snippet_at
from assistant.storage.db import Database
from assistant.storage.memory_key import fsync_dir, open_store_sealer, pending_key_path, write_key_file
from assistant.storage.sealed import PAGE, open_in_place, reseal


@dataclass(frozen=True)
class RotationReport:
    rows: int
    key_path: Path


def retoken(db: Database, sealer: Sealer) -> None:
    """Recompute every keyed token with ``sealer`` (whose values are already sealed with it). Run it
    inside the caller's transaction."""
    keywords = KeywordIndex(db, sealer)
    db.execute("DELETE FROM memory_terms")
    last = -1
    while rows := db.query("SELECT rowid, id, user_id, content FROM memories WHERE rowid > ? ORDER BY rowid "
                           f"LIMIT {PAGE}", (last,)):
        keywords.add((r["rowid"], r["user_id"], sealer.open(r["content"], sealed_at("content", r["id"], r["user_id"])))
                     for r in rows)
        last = rows[-1]["rowid"]
    snippets = SnippetStore(db, sealer)
    for r in db.query("SELECT id, user_id, title_sealed FROM snippets"):
        title = sealer.open(r["title_sealed"], snippet_at("title_sealed", r["id"], r["user_id"]))
        db.execute("UPDATE snippets SET title_key = ? WHERE id = ?", (snippets.title_key(r["user_id"], title), r["id"]))
    profiles = ProfileStore(db, sealer)
    for r in db.query("SELECT * FROM agent_profiles"):
        name = profiles._profile(r).name
        db.execute("UPDATE agent_profiles SET name_token = ? WHERE id = ?", (profiles._token(name), r["id"]))


def rotate_memory_key(db: Database, key_path: Path, *,
                      after_row: Callable[[int], None] | None = None) -> RotationReport:
    """Re-encrypt every sealed value with a new key and recompute the keyed tokens, in one
    transaction. ``after_row(n)`` runs after each re-sealed row (tests kill the process there)."""
    key_path = Path(key_path).expanduser()
    if db.scalar("SELECT value FROM meta WHERE key = 'memory_encryption'") == "none":
        raise ConfigError("memory encryption is off for this store: there is no memory key to rotate")
    if not key_path.exists():
        raise ConfigError(f"the memory key file {key_path} is missing; nothing can be re-encrypted without it")
    old = open_store_sealer(db, key_path)
    new_key = random_bytes(KEY_BYTES)
    new_path = pending_key_path(key_path)
    write_key_file(new_path, new_key)
    new = Sealer(new_key)
    with db.transaction():
        rows = reseal(db, open_in_place(old), new, after_row=after_row)
        retoken(db, new)
        db.execute("UPDATE meta SET value = ? WHERE key = 'memory_key_check'", (new.check_value().hex(),))
    os.replace(new_path, key_path)
    fsync_dir(key_path.parent)
    return RotationReport(rows, key_path)
