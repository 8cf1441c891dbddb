"""Sealing text at rest with XChaCha20-Poly1305 (libsodium through PyNaCl), and the key file.

The ``cryptography`` package has no XChaCha20; PyNaCl binds libsodium's
``crypto_aead_xchacha20poly1305_ietf_*``. Each value gets a fresh random 24-byte nonce, stored in
front of the ciphertext. The key file holds 32 random bytes, created with mode 0600 when missing.

A store remembers that it is encrypted by sealing a known check value in its ``meta`` table; on
open, a key that cannot open it is refused (never garbage, never a silent new key), and a missing
key file for a store that has one is refused too.

Associated data: every sealed value is bound to where it lives, a :class:`SealContext` (table,
column, row id, owning user) passed as the AEAD's associated data. A ciphertext copied to another
row, column or user does not open there: :meth:`Sealer.open` raises :class:`SealedValueMismatch`
(an integrity error naming the table, column and row), never the other row's text. Stores sealed
before associated data existed are re-sealed once with it (assistant/storage/sealed.py, m014).

Keyed tokens: :meth:`Sealer.token` maps a normalised word to a short keyed BLAKE2b digest (a
subkey derived from the same key), so a keyword index can match equal words without storing them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from nacl import bindings
from nacl.exceptions import CryptoError
from nacl.utils import random as random_bytes

from assistant.errors import AssistantError, ConfigError

log = logging.getLogger(__name__)

KEY_BYTES = bindings.crypto_aead_xchacha20poly1305_ietf_KEYBYTES  # 32
NONCE_BYTES = bindings.crypto_aead_xchacha20poly1305_ietf_NPUBBYTES  # 24
CHECK_PLAINTEXT = b"assistant-memory-key-check-v1"
TOKEN_BYTES = 12


class KeyMismatchError(ConfigError):
    """The key cannot open data sealed in this store."""


@dataclass(frozen=True)
class SealContext:
    """Where a sealed value lives: bound to it as associated data, so it opens nowhere else.

    ``row_id`` is the row's stable id (a UUID, or ``task_id:seq`` for keyed rows); ``user_id`` the
    user who owns the row (``""`` for rows without one, such as server-wide audit entries)."""

    table: str
    column: str
    row_id: str
    user_id: str | None = ""

    def aad(self) -> bytes:
        """The associated data: a JSON array, so no two places share one (fields cannot run together)."""
        parts = ["assistant-seal-v1", self.table, self.column, str(self.row_id), str(self.user_id or "")]
        return json.dumps(parts, separators=(",", ":")).encode("utf-8")

    def describe(self) -> str:
        return f"{self.table}.{self.column} of row {self.row_id}"


class SealedValueMismatch(AssistantError):
    """A sealed value does not open where it is stored: it was copied from another row, column or
    user, or altered. Reading it fails (500 ``INTERNAL_ERROR``, logged) rather than show anything."""

    code = "INTERNAL_ERROR"

    def __init__(self, context: SealContext):
        super().__init__(
            f"data integrity error: the sealed value {context.describe()} does not belong to that row "
            "(moved, copied or altered in the database file); it was not opened",
            {"table": context.table, "column": context.column, "row_id": str(context.row_id)},
        )
        self.context = context


def load_or_create_key(path: Path, *, create: bool = True) -> bytes:
    """Read the 32-byte key at ``path``; create it (0600) if missing and ``create``."""
    path = Path(path).expanduser()
    if path.exists():
        key = path.read_bytes()
        if len(key) != KEY_BYTES:
            raise ConfigError(f"encryption key file {path} holds {len(key)} bytes, expected {KEY_BYTES}")
        return key
    if not create:
        raise ConfigError(f"encryption key file {path} is missing")
    path.parent.mkdir(parents=True, exist_ok=True)
    key = random_bytes(KEY_BYTES)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    return key


class Sealer:
    """Seal and open UTF-8 text; ``None`` key means encryption is disabled (text stored as UTF-8)."""

    def __init__(self, key: bytes | None):
        if key is not None and len(key) != KEY_BYTES:
            raise ValueError(f"key must be {KEY_BYTES} bytes")
        self._key = key
        token_key = key if key is not None else b"assistant-unencrypted-token-key!"
        self._token_key = hashlib.blake2b(b"keyword-index", key=token_key, digest_size=32).digest()

    @property
    def encrypted(self) -> bool:
        return self._key is not None

    def seal_bytes(self, data: bytes, aad: bytes | None = None) -> bytes:
        if self._key is None:
            return data
        nonce = random_bytes(NONCE_BYTES)
        return nonce + bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(data, aad, nonce, self._key)

    def open_bytes(self, sealed: bytes, aad: bytes | None = None) -> bytes:
        if self._key is None:
            return bytes(sealed)
        nonce, ciphertext = bytes(sealed[:NONCE_BYTES]), bytes(sealed[NONCE_BYTES:])
        return bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(ciphertext, aad, nonce, self._key)

    def seal(self, text: str, at: SealContext) -> bytes:
        """``text`` sealed for the place ``at`` (it opens only there)."""
        return self.seal_data(text.encode("utf-8"), at)

    def open(self, sealed: bytes, at: SealContext) -> str:
        """The text sealed for ``at``; SealedValueMismatch if it was sealed for another place."""
        return self.open_data(sealed, at).decode("utf-8")

    def seal_data(self, data: bytes, at: SealContext) -> bytes:
        return self.seal_bytes(data, at.aad())

    def open_data(self, sealed: bytes, at: SealContext) -> bytes:
        try:
            return self.open_bytes(sealed, at.aad())
        except CryptoError:
            log.error("sealed value %s (user %s) failed its integrity check", at.describe(), at.user_id)
            raise SealedValueMismatch(at) from None

    def token(self, word: str) -> bytes:
        """A keyed digest of a normalised word: equal words give equal tokens, nothing else leaks."""
        return hashlib.blake2b(word.encode("utf-8"), key=self._token_key, digest_size=TOKEN_BYTES).digest()

    def check_value(self) -> bytes:
        return self.seal_bytes(CHECK_PLAINTEXT)

    def verify(self, check: bytes) -> bool:
        try:
            return self.open_bytes(check) == CHECK_PLAINTEXT
        except CryptoError:
            return False


def open_sealer(db, key_path: Path, *, enabled: bool = True) -> Sealer:  # noqa: ANN001 - Database
    """The store's sealer: checks the key against the store, creating key and check on first use.

    Refuses (ConfigError) a wrong key, a missing key for an encrypted store, and a store that was
    encrypted being opened with encryption disabled (or the reverse).
    """
    check = db.scalar("SELECT value FROM meta WHERE key = 'memory_key_check'")
    mode = db.scalar("SELECT value FROM meta WHERE key = 'memory_encryption'")
    wanted = "xchacha20poly1305" if enabled else "none"
    if mode is not None and mode != wanted:
        raise ConfigError(
            f"this store was created with memory encryption {'on' if mode != 'none' else 'off'}; "
            f"memory.enable_encryption must stay {'true' if mode != 'none' else 'false'}"
        )
    if not enabled:
        sealer = Sealer(None)
    else:
        key_path = Path(key_path).expanduser()
        if check is not None and not key_path.exists():
            raise ConfigError(
                f"the memory store is encrypted but the key file {key_path} is missing; restore it "
                "(memories sealed with a lost key cannot be recovered)"
            )
        sealer = Sealer(load_or_create_key(key_path))
    if check is None:
        with db.transaction():
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('memory_key_check', ?)",
                       (sealer.check_value().hex(),))
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('memory_encryption', ?)", (wanted,))
    elif not sealer.verify(bytes.fromhex(check)):
        raise KeyMismatchError(f"the encryption key at {key_path} does not open this memory store (wrong key)")
    return sealer
