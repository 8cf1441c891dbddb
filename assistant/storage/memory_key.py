"""The memory key's life: opening a store's sealer, and rotating the key (resumable).

:func:`open_store_sealer` is how the server opens the key: it first settles a rotation that was
interrupted, then checks the key against the store (:func:`assistant.crypto.open_sealer`), then
binds associated data to values sealed before m014 (:func:`finish_pending_reseal`).

Rotation (``assistant keys rotate-memory-key``; stop the server first, it holds the old key):

1. a new random key is written, fsynced, to ``<key>.new`` (mode 0600);
2. one SQLite transaction opens every sealed value with the old key and seals it with the new one,
   and replaces the store's key check with the new key's;
3. ``<key>.new`` is renamed over the key file (atomic), and the directory fsynced.

The store's key check is the marker: killed during step 2, SQLite rolls the transaction back and
the check still matches the old key, so the next start (or a rerun) deletes ``<key>.new``; killed
between 2 and 3, the check matches the new key, so the next start finishes the rename. Either way
every value opens with the key file that is left.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from nacl.utils import random as random_bytes

from assistant.crypto import KEY_BYTES, Sealer, open_sealer
from assistant.errors import ConfigError
from assistant.storage.sealed import finish_pending_reseal, open_in_place, reseal

if TYPE_CHECKING:
    from assistant.storage.db import Database


@dataclass(frozen=True)
class RotationReport:
    rows: int
    key_path: Path


def pending_key_path(key_path: Path) -> Path:
    return key_path.with_name(key_path.name + ".new")


def write_key_file(path: Path, key: bytes) -> None:
    """Write ``key`` to ``path`` (mode 0600) durably: a temporary file, fsync, atomic rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recover_rotation(db: Database, key_path: Path) -> str | None:
    """Settle a rotation that was interrupted: ``"finished"`` (the store already uses the new
    key: rename it into place), ``"rolled back"`` (it does not: drop it) or None (none pending)."""
    key_path = Path(key_path).expanduser()
    new_path = pending_key_path(key_path)
    if not new_path.exists():
        return None
    check = db.scalar("SELECT value FROM meta WHERE key = 'memory_key_check'")
    new_key = new_path.read_bytes()
    if check is not None and len(new_key) == KEY_BYTES and Sealer(new_key).verify(bytes.fromhex(check)):
        os.replace(new_path, key_path)
        _fsync_dir(key_path.parent)
        return "finished"
    new_path.unlink()
    return "rolled back"


def open_store_sealer(db: Database, key_path: Path, *, enabled: bool = True) -> Sealer:
    """The store's sealer, after settling an interrupted rotation and binding associated data to
    values sealed before m014. Raises ConfigError like :func:`open_sealer`."""
    if enabled:
        recover_rotation(db, key_path)
    sealer = open_sealer(db, key_path, enabled=enabled)
    finish_pending_reseal(db, sealer)
    return sealer


def rotate_memory_key(db: Database, key_path: Path, *,
                      after_row: Callable[[int], None] | None = None) -> RotationReport:
    """Re-encrypt every sealed value with a new key, in one transaction; see the module docstring.

    ``after_row(n)`` runs after each re-sealed row (tests kill the process there)."""
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
        db.execute("UPDATE meta SET value = ? WHERE key = 'memory_key_check'", (new.check_value().hex(),))
    os.replace(new_path, key_path)
    _fsync_dir(key_path.parent)
    return RotationReport(rows, key_path)
