"""API keys: hashed at rest, mapped to user ids, with a scope.

Keys are 256-bit random tokens, so a single SHA-256 is enough to store them (a slow password hash
protects low-entropy secrets; these are not). Keys from the config file are hashed when loaded and
only the hashes are kept. A ``read`` scope permits only safe methods (GET/HEAD/OPTIONS): anything
else with such a key is 403 FORBIDDEN.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from uuid import UUID, uuid4

from assistant.clock import iso
from assistant.errors import NotFoundError, ValidationFailed
from assistant.storage.db import Database

Scope = Literal["full", "read"]
KEY_PREFIX = "ak_"
HASH_PREFIX = "sha256:"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def hash_key(key: str) -> str:
    if key.startswith(HASH_PREFIX):
        return key
    return HASH_PREFIX + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    user_id: UUID
    scope: Scope
    key_name: str

    def may(self, method: str) -> bool:
        return self.scope == "full" or method.upper() in SAFE_METHODS


class KeyStore:
    def __init__(self, db: Database, configured: Mapping[str, UUID] | None = None):
        self.db = db
        self._configured = {hash_key(k): v for k, v in (configured or {}).items()}

    def authenticate(self, key: str | None) -> Principal | None:
        if not key:
            return None
        digest = hash_key(key) if not key.startswith(HASH_PREFIX) else None  # never accept a hash as a key
        if digest is None:
            return None
        user = self._configured.get(digest)
        if user is not None:
            return Principal(user, "full", "config")
        row = self.db.one("SELECT user_id, scope, name FROM api_keys WHERE key_hash = ?", (digest,))
        if row is None:
            return None
        return Principal(UUID(row["user_id"]), row["scope"], row["name"])

    def owner_user_id(self) -> UUID:
        """The user id of this installation's owner, created once."""
        with self.db.transaction() as db:
            value = db.scalar("SELECT value FROM meta WHERE key = 'owner_user_id'")
            if value is None:
                value = str(uuid4())
                db.execute("INSERT INTO meta (key, value) VALUES ('owner_user_id', ?)", (value,))
        return UUID(value)

    def create(
        self, name: str, *, user_id: UUID | None = None, scope: Scope = "full", replace: bool = False
    ) -> tuple[str, Principal]:
        """Create a key; returns it (shown once) and its principal. Only the hash is stored.

        With ``replace`` an existing key of the same name is revoked first and its user id kept.
        """
        if not name.strip():
            raise ValidationFailed("key name is empty", [{"field": "name", "error": "must not be empty"}])
        if scope not in ("full", "read"):
            raise ValidationFailed("unknown scope", [{"field": "scope", "error": "must be 'full' or 'read'"}])
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        with self.db.transaction() as db:
            existing = db.query("SELECT user_id FROM api_keys WHERE name = ?", (name,))
            if existing and not replace:
                raise ValidationFailed(
                    f"a key named {name!r} exists", [{"field": "name", "error": "already exists (use replace)"}]
                )
            if existing and user_id is None:
                user_id = UUID(existing[0]["user_id"])
            db.execute("DELETE FROM api_keys WHERE name = ?", (name,))
            user_id = user_id or self.owner_user_id()
            db.execute(
                "INSERT INTO api_keys (key_hash, user_id, name, scope, created_at) VALUES (?, ?, ?, ?, ?)",
                (hash_key(key), str(user_id), name, scope, iso()),
            )
        return key, Principal(user_id, scope, name)

    def revoke(self, name: str) -> None:
        if self.db.scalar("SELECT count(*) FROM api_keys WHERE name = ?", (name,)) == 0:
            raise NotFoundError(f"no key named {name!r}")
        self.db.execute("DELETE FROM api_keys WHERE name = ?", (name,))

    def list(self) -> list[dict[str, str]]:
        return self.db.query("SELECT name, user_id, scope, created_at FROM api_keys ORDER BY created_at")

    def count(self) -> int:
        return len(self._configured) + int(self.db.scalar("SELECT count(*) FROM api_keys"))
