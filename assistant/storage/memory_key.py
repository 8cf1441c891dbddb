"""Opening a store's memory key, and settling a key rotation that was interrupted.

:func:`open_store_sealer` is how the server opens the key: it first settles a rotation that was
interrupted (:func:`recover_rotation`), then checks the key against the store
(:func:`assistant.crypto.open_sealer`), then binds associated data to values sealed before m014
(:func:`finish_pending_reseal`).

Rotation (:mod:`assistant.rekey`, ``assistant keys rotate-memory-key``; stop the server first, it
holds the old key):

1. a new random key is written, fsynced, to ``<key>.new`` (mode 0600);
2. one SQLite transaction opens every sealed value with the old key and seals it with the new one,
   recomputes the keyed tokens (they derive from the key), and replaces the store's key check with
   the new key's;
3. ``<key>.new`` is renamed over the key file (atomic), and the directory fsynced.

The store's key check is the marker: killed during step 2, SQLite rolls the transaction back and
the check still matches the old key, so the next start (or a rerun) deletes ``<key>.new``; killed
between 2 and 3, the check matches the new key, so the next start finishes the rename. Either way
every value opens with the key file that is left.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from assistant.crypto import KEY_BYTES, Sealer, open_sealer
from assistant.storage.sealed import finish_pending_reseal

if TYPE_CHECKING:
    from assistant.storage.db import Database


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
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
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
        fsync_dir(key_path.parent)
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
