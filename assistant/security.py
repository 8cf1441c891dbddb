"""API keys: hashed at rest, mapped to user ids, with a role.

Keys are 256-bit random tokens, so a single SHA-256 is enough to store them (a slow password hash
protects low-entropy secrets; these are not). Keys from the config file are hashed when loaded and
only the hashes are kept.

Roles: ``admin`` may do everything, including what changes the server for every user (catalog
entries) and deciding approval requests; ``user`` may use and change their own data; ``read-only``
permits only safe methods (GET/HEAD/OPTIONS): anything else with such a key is 403 FORBIDDEN.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID, uuid4

from assistant.clock import iso
from assistant.config import KEY_ROLES, ConfiguredKey
from assistant.config.core import KeyRole
from assistant.errors import NotFoundError, ValidationFailed
from assistant.storage.db import Database

Role = KeyRole
ROLES = KEY_ROLES
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
    role: Role
    key_name: str

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def read_only(self) -> bool:
        return self.role == "read-only"

    def may(self, method: str) -> bool:
        """Whether this key may use ``method`` at all (read-only keys: safe methods only)."""
        return not self.read_only or method.upper() in SAFE_METHODS

    def owner_filter(self) -> str | None:
        """The user id whose resources this caller sees, or None for all (an admin)."""
        return None if self.is_admin else str(self.user_id)


def check_role(role: str) -> Role:
    if role not in ROLES:
        error = f"must be one of {', '.join(ROLES)} (got {role!r})"
        raise ValidationFailed(f"role {error}", [{"field": "role", "error": error}])
    return role  # type: ignore[return-value]


class KeyStore:
    def __init__(self, db: Database, configured: Mapping[str, ConfiguredKey | UUID] | None = None):
        self.db = db
        self._configured: dict[str, ConfiguredKey] = {
            hash_key(k): v if isinstance(v, ConfiguredKey) else ConfiguredKey(user_id=v)
            for k, v in (configured or {}).items()
        }

    def authenticate(self, key: str | None) -> Principal | None:
        if not key or key.startswith(HASH_PREFIX):  # never accept a hash as a key
            return None
        digest = hash_key(key)
        found = self._configured.get(digest)
        if found is not None:
            return Principal(found.user_id, found.role, "config")
        row = self.db.one("SELECT user_id, role, name FROM api_keys WHERE key_hash = ?", (digest,))
        if row is None:
            return None
        return Principal(UUID(row["user_id"]), row["role"], row["name"])

    def owner_user_id(self) -> UUID:
        """The user id of this installation's owner, created once."""
        with self.db.transaction() as db:
            value = db.scalar("SELECT value FROM meta WHERE key = 'owner_user_id'")
            if value is None:
                value = str(uuid4())
                db.execute("INSERT INTO meta (key, value) VALUES ('owner_user_id', ?)", (value,))
        return UUID(value)

    def create(
        self, name: str, *, user_id: UUID | None = None, role: Role = "user", replace: bool = False
    ) -> tuple[str, Principal]:
        """Create a key; returns it (shown once) and its principal. Only the hash is stored.

        With ``replace`` an existing key of the same name is revoked first and its user id kept.
        """
        if not name.strip():
            raise ValidationFailed("key name is empty", [{"field": "name", "error": "must not be empty"}])
        role = check_role(role)
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
                "INSERT INTO api_keys (key_hash, user_id, name, role, created_at) VALUES (?, ?, ?, ?, ?)",
                (hash_key(key), str(user_id), name, role, iso()),
            )
        return key, Principal(user_id, role, name)

    def revoke(self, name: str) -> None:
        if self.db.scalar("SELECT count(*) FROM api_keys WHERE name = ?", (name,)) == 0:
            raise NotFoundError(f"no key named {name!r}")
        self.db.execute("DELETE FROM api_keys WHERE name = ?", (name,))

    def list(self) -> list[dict[str, str]]:
        return self.db.query("SELECT name, user_id, role, created_at FROM api_keys ORDER BY created_at")

    def count(self) -> int:
        return len(self._configured) + int(self.db.scalar("SELECT count(*) FROM api_keys"))
