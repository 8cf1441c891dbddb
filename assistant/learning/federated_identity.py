"""This instance's federated identity: an Ed25519 key pair, and signing and verifying envelopes.

The private key is 32 raw bytes in ``federated.key_path`` (relative paths live in the data directory),
created at first use with mode 0600 (``O_EXCL``: two processes never both write one); a key file that
another user can read, or of the wrong length, is refused (:class:`ConfigError`). Its public key is
shown by ``GET /api/v1/federated/identity``; a peer's configuration names it (base64 or hex).

The **instance id** is the first 16 bytes of SHA-256 of the raw public key, in hex: envelopes name their
sender and recipient by it. A **signature** is Ed25519 over ``DOMAIN`` + the canonical JSON of the
envelope (keys sorted, no whitespace, ASCII): the same bytes on both sides whatever the JSON library.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant.errors import ConfigError

KEY_BYTES = 32
SIGNATURE_BYTES = 64
DOMAIN = b"assistant-federated-sync-v1\n"  # signatures of this protocol verify nowhere else


def decode_public_key(text: str) -> bytes:
    """The 32 raw bytes of an Ed25519 public key written in hex (64 digits) or base64; ValueError otherwise."""
    text = str(text).strip()
    raw: bytes | None = None
    if len(text) == 2 * KEY_BYTES:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = None
    if raw is None:
        padded = text + "=" * (-len(text) % 4)
        for altchars in (None, b"-_"):
            try:
                raw = base64.b64decode(padded, altchars=altchars, validate=True)
                break
            except (binascii.Error, ValueError):
                continue
    if raw is None:
        raise ValueError("must be an Ed25519 public key in hex (64 digits) or base64 (44 characters)")
    if len(raw) != KEY_BYTES:
        raise ValueError(f"must be a 32-byte Ed25519 public key (this one decodes to {len(raw)} bytes)")
    return raw


def instance_id(public_key: bytes) -> str:
    """The id envelopes name an instance by: SHA-256 of its raw public key, first 16 bytes, hex."""
    return hashlib.sha256(public_key).hexdigest()[:32]


def canonical(envelope: dict[str, Any]) -> bytes:
    """The bytes a signature covers."""
    return DOMAIN + json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                               allow_nan=False).encode("ascii")


def verify(public_key: bytes, envelope: dict[str, Any], signature: bytes) -> bool:
    """Whether ``signature`` is the key's signature of ``envelope``."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if len(signature) != SIGNATURE_BYTES:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, canonical(envelope))
    except (InvalidSignature, ValueError):
        return False
    return True


@dataclass(frozen=True)
class Identity:
    """This instance's key pair."""

    private_key: bytes
    public_key: bytes

    @property
    def instance_id(self) -> str:
        return instance_id(self.public_key)

    @property
    def public_key_b64(self) -> str:
        return base64.b64encode(self.public_key).decode("ascii")

    def sign(self, envelope: dict[str, Any]) -> bytes:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.from_private_bytes(self.private_key).sign(canonical(envelope))


def load_identity(path: Path, *, create: bool = True) -> Identity:
    """The key pair in ``path``; created (0600) when missing and ``create``."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    path = Path(path).expanduser()
    if not path.exists():
        if not create:
            raise ConfigError(f"the federated key file {path} is missing (federated.key_path)")
        path.parent.mkdir(parents=True, exist_ok=True)
        seed = os.urandom(KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: read theirs
            return load_identity(path, create=False)
        with os.fdopen(fd, "wb") as fh:
            fh.write(seed)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise ConfigError(f"the federated key file {path} is readable by others (mode {mode:o}): chmod 600 it "
                          "(federated.key_path)")
    seed = path.read_bytes()
    if len(seed) != KEY_BYTES:
        raise ConfigError(f"the federated key file {path} holds {len(seed)} bytes, expected {KEY_BYTES} "
                          "(federated.key_path)")
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return Identity(seed, public)


def resolve_key_path(data_dir: Path, key_path: Path) -> Path:
    key_path = Path(key_path).expanduser()
    return key_path if key_path.is_absolute() else Path(data_dir) / key_path
