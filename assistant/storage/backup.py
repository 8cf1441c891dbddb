"""``assistant backup`` and ``assistant restore``: the database and its memory key in one archive,
encrypted with a passphrase.

**What is in it.** A tar stream of ``manifest.json`` (format, time, what the store holds),
``assistant.db`` (a consistent copy made with SQLite's online backup API, so a running server keeps
serving while it is taken) and ``memory.key`` (when the store is encrypted: without it the sealed
values could never be read again).

**How it is encrypted.** The key comes from the passphrase through Argon2id (libsodium's
``crypto_pwhash``, PyNaCl ``nacl.pwhash.argon2id``): memory-hard, the winner of the Password Hashing
Competition and what libsodium recommends, so guessing passphrases of a stolen backup costs 256 MiB
and ~1 s of work per guess at the default (``MODERATE``) limits. The salt and limits are in the
file's header. The stream is sealed with libsodium's ``secretstream`` (XChaCha20-Poly1305 in 1 MiB
chunks, the header bound to every chunk as associated data): chunks cannot be reordered, altered
or dropped, and a truncated file is detected by its missing final tag. A large database is never
held in memory whole.

File layout: ``MAGIC | salt (16) | opslimit (u32) | memlimit (u64) | stream header (24)``, then
chunks, each ``length (u32) | ciphertext``.

**Restore** writes into the configured data directory and key path, and refuses to replace an
existing store unless ``force``. Everything is first unpacked into a staging directory next to the
database and verified (the archive's authentication, ``PRAGMA integrity_check``, the key opening
the store's key check) before anything in place is touched; then the files are renamed in.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import apsw
from nacl import bindings, pwhash
from nacl.exceptions import CryptoError
from nacl.utils import random as random_bytes

from assistant.clock import iso
from assistant.crypto import KEY_BYTES, Sealer
from assistant.errors import AssistantError
from assistant.storage.memory_key import write_key_file

MAGIC = b"ASSISTANT-BACKUP\x00v1\x00"
CHUNK = 1 << 20
FORMAT = 1
DB_FILE = "assistant.db"
KEY_FILE = "memory.key"
MANIFEST = "manifest.json"
MIN_PASSPHRASE = 8
MAX_OPSLIMIT = 20  # a header asking for more is not one of ours (or is meant to stall the restore)
MAX_MEMLIMIT = 1 << 30
COUNTED = ("memories", "snippets", "agent_profiles", "conversations")

_ss = bindings  # crypto_secretstream_xchacha20poly1305_*
TAG_MESSAGE = _ss.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
TAG_FINAL = _ss.crypto_secretstream_xchacha20poly1305_TAG_FINAL
ABYTES = _ss.crypto_secretstream_xchacha20poly1305_ABYTES
STREAM_HEADER = _ss.crypto_secretstream_xchacha20poly1305_HEADERBYTES
SALT = pwhash.argon2id.SALTBYTES
PREFIX = struct.Struct("<IQ")


class BackupError(AssistantError):
    """A backup cannot be written or restored (wrong passphrase, damaged file, a store in the way)."""

    code = "BAD_REQUEST"


@dataclass(frozen=True)
class KdfLimits:
    """Argon2id cost. ``MODERATE`` (default): 3 passes over 256 MiB; tests use ``MINIMUM``."""

    opslimit: int
    memlimit: int


MODERATE = KdfLimits(pwhash.argon2id.OPSLIMIT_MODERATE, pwhash.argon2id.MEMLIMIT_MODERATE)
MINIMUM = KdfLimits(pwhash.argon2id.OPSLIMIT_MIN, pwhash.argon2id.MEMLIMIT_MIN)


@dataclass(frozen=True)
class BackupReport:
    path: Path
    manifest: dict


def _derive(passphrase: str, salt: bytes, limits: KdfLimits) -> bytes:
    return pwhash.argon2id.kdf(KEY_BYTES, passphrase.encode("utf-8"), salt,
                               opslimit=limits.opslimit, memlimit=limits.memlimit)


# --- the encrypted stream -------------------------------------------------------------------------


class _SealingWriter(io.RawIOBase):
    """A write-only file object: buffers plaintext, writes it out in sealed chunks."""

    def __init__(self, out: BinaryIO, passphrase: str, limits: KdfLimits):
        salt = random_bytes(SALT)
        self._aad = MAGIC + salt + PREFIX.pack(limits.opslimit, limits.memlimit)
        self._state = _ss.crypto_secretstream_xchacha20poly1305_state()
        header = _ss.crypto_secretstream_xchacha20poly1305_init_push(self._state, _derive(passphrase, salt, limits))
        self._out = out
        self._out.write(self._aad + header)
        self._aad += header
        self._buffer = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # noqa: ANN001 - bytes-like
        self._buffer += data
        while len(self._buffer) >= CHUNK:
            self._push(bytes(self._buffer[:CHUNK]), TAG_MESSAGE)
            del self._buffer[:CHUNK]
        return len(data)

    def _push(self, chunk: bytes, tag: int) -> None:
        sealed = _ss.crypto_secretstream_xchacha20poly1305_push(self._state, chunk, self._aad, tag)
        self._out.write(struct.pack("<I", len(sealed)) + sealed)

    def finish(self) -> None:
        self._push(bytes(self._buffer), TAG_FINAL)
        self._buffer.clear()


class _OpeningReader(io.RawIOBase):
    """A read-only file object over a sealed stream; BackupError on a wrong passphrase or damage."""

    def __init__(self, source: BinaryIO, passphrase: str):
        head = source.read(len(MAGIC) + SALT + PREFIX.size + STREAM_HEADER)
        if len(head) < len(MAGIC) or head[:len(MAGIC)] != MAGIC:
            raise BackupError("this file is not an assistant backup (unknown format)")
        if len(head) < len(MAGIC) + SALT + PREFIX.size + STREAM_HEADER:
            raise BackupError("this backup is damaged: its header is cut short")
        salt = head[len(MAGIC):len(MAGIC) + SALT]
        opslimit, memlimit = PREFIX.unpack(head[len(MAGIC) + SALT:len(MAGIC) + SALT + PREFIX.size])
        if not 0 < opslimit <= MAX_OPSLIMIT or not 0 < memlimit <= MAX_MEMLIMIT:
            raise BackupError("this backup's header asks for key-derivation limits out of range: not one of ours")
        self._aad = head
        self._state = _ss.crypto_secretstream_xchacha20poly1305_state()
        try:
            _ss.crypto_secretstream_xchacha20poly1305_init_pull(
                self._state, head[-STREAM_HEADER:], _derive(passphrase, salt, KdfLimits(opslimit, memlimit)))
        except CryptoError:
            raise BackupError("this backup's stream header is damaged") from None
        self._source = source
        self._buffer = bytearray()
        self._first = True
        self._final = False

    def readable(self) -> bool:
        return True

    def _pull(self) -> None:
        size = self._source.read(4)
        if len(size) < 4:
            raise BackupError("this backup is truncated: it ends before its final chunk")
        (length,) = struct.unpack("<I", size)
        if length > CHUNK + ABYTES:
            raise BackupError("this backup is damaged: a chunk is larger than any written")
        sealed = self._source.read(length)
        try:
            chunk, tag = _ss.crypto_secretstream_xchacha20poly1305_pull(self._state, sealed, self._aad)
        except (CryptoError, ValueError):
            if self._first:
                raise BackupError("the passphrase does not open this backup (wrong passphrase, or the file is "
                                  "damaged)") from None
            raise BackupError("this backup is damaged: a chunk fails its authentication") from None
        self._first = False
        self._buffer += chunk
        if tag == TAG_FINAL:
            self._final = True
            if self._source.read(1):
                raise BackupError("this backup is damaged: data follows its final chunk")

    def readinto(self, target) -> int:  # noqa: ANN001 - writable buffer
        while not self._buffer and not self._final:
            self._pull()
        n = min(len(target), len(self._buffer))
        target[:n] = self._buffer[:n]
        del self._buffer[:n]
        return n


# --- backup ---------------------------------------------------------------------------------------


def _check_passphrase(passphrase: str) -> None:
    if len(passphrase) < MIN_PASSPHRASE:
        raise BackupError(f"the backup passphrase must have at least {MIN_PASSPHRASE} characters")


def _meta(conn: apsw.Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _manifest(conn: apsw.Connection) -> dict:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    counts = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in COUNTED if t in tables}  # noqa: S608
    return {"format": FORMAT, "created_at": iso(), "encryption": _meta(conn, "memory_encryption") or "none",
            "rows": counts}


def create_backup(db_path: Path, key_path: Path, out: Path, passphrase: str, *,
                  limits: KdfLimits = MODERATE) -> BackupReport:
    """Write the encrypted archive ``out`` of the store at ``db_path`` and its key at ``key_path``."""
    _check_passphrase(passphrase)
    db_path, key_path, out = Path(db_path), Path(key_path).expanduser(), Path(out)
    if not db_path.exists():
        raise BackupError(f"there is no store to back up at {db_path}")
    if out.exists():
        raise BackupError(f"{out} already exists; choose another file name")
    staging = Path(tempfile.mkdtemp(prefix=".backup-", dir=db_path.parent))
    try:
        copy = staging / DB_FILE
        source = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
        target = apsw.Connection(str(copy))
        try:
            source.set_busy_timeout(5000)
            with target.backup("main", source, "main") as step:
                step.step(-1)  # one step: a consistent snapshot even while the server writes
            manifest = _manifest(target)
            check = _meta(target, "memory_key_check")
        finally:
            target.close()
            source.close()
        key = None
        if manifest["encryption"] != "none":
            if not key_path.exists():
                raise BackupError(f"the store is encrypted but its key file {key_path} is missing")
            key = key_path.read_bytes()
            if check is None or len(key) != KEY_BYTES or not Sealer(key).verify(bytes.fromhex(check)):
                raise BackupError(f"the key file {key_path} does not open this store; a backup with it would be "
                                  "unreadable")
        partial = out.with_name(out.name + ".partial")
        with open(partial, "wb") as fh:
            writer = _SealingWriter(fh, passphrase, limits)
            with tarfile.open(fileobj=writer, mode="w|") as tar:
                _add(tar, MANIFEST, json.dumps(manifest, indent=2).encode())
                tar.add(copy, arcname=DB_FILE)
                if key is not None:
                    _add(tar, KEY_FILE, key)
            writer.finish()
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(partial, 0o600)
        os.replace(partial, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BackupReport(out, manifest)


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600
    tar.addfile(info, io.BytesIO(data))


# --- restore --------------------------------------------------------------------------------------


def _unpack(archive: Path, passphrase: str, staging: Path) -> dict:
    """Decrypt and unpack the archive's known members into ``staging``; the manifest."""
    found: dict[str, Path] = {}
    with open(archive, "rb") as fh:
        reader = io.BufferedReader(_OpeningReader(fh, passphrase), CHUNK)
        try:
            with tarfile.open(fileobj=reader, mode="r|") as tar:
                for member in tar:
                    if member.name not in (MANIFEST, DB_FILE, KEY_FILE) or not member.isfile() or member.name in found:
                        raise BackupError(f"this backup holds an unexpected entry {member.name!r}")
                    source = tar.extractfile(member)
                    target = staging / member.name
                    with open(target, "wb") as out:
                        shutil.copyfileobj(source, out, CHUNK)
                    found[member.name] = target
                reader.read()  # authenticate up to the final chunk, even past the tar's end
        except tarfile.TarError as exc:
            raise BackupError(f"this backup is damaged: {exc}") from None
    if MANIFEST not in found or DB_FILE not in found:
        raise BackupError("this backup is incomplete: it has no database")
    manifest = json.loads(found[MANIFEST].read_text())
    if manifest.get("format") != FORMAT:
        raise BackupError(f"this backup has format {manifest.get('format')!r}; this version reads {FORMAT}")
    return manifest


def _verify(staging: Path) -> bytes | None:
    """The unpacked database passes ``PRAGMA integrity_check`` and its key opens it; the key."""
    conn = apsw.Connection(str(staging / DB_FILE), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        result = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if result != ["ok"]:
            raise BackupError(f"the database in this backup fails its integrity check: {'; '.join(result[:3])}")
        check = _meta(conn, "memory_key_check")
        encryption = _meta(conn, "memory_encryption") or "none"
    finally:
        conn.close()
    if encryption == "none":
        return None
    key_file = staging / KEY_FILE
    key = key_file.read_bytes() if key_file.exists() else b""
    if check is None or len(key) != KEY_BYTES or not Sealer(key).verify(bytes.fromhex(check)):
        raise BackupError("the memory key in this backup does not open its database")
    return key


def restore_backup(archive: Path, db_path: Path, key_path: Path, passphrase: str, *,
                   force: bool = False) -> BackupReport:
    """Restore ``archive`` to ``db_path`` and ``key_path``; see the module docstring."""
    archive, db_path, key_path = Path(archive), Path(db_path), Path(key_path).expanduser()
    if not archive.exists():
        raise BackupError(f"no backup file at {archive}")
    if not force and (db_path.exists() or key_path.exists()):
        there = db_path if db_path.exists() else key_path
        raise BackupError(f"{there} already exists: restoring would replace the store there; stop the server and "
                          "pass --force to replace it")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".restore-", dir=db_path.parent))
    try:
        manifest = _unpack(archive, passphrase, staging)
        key = _verify(staging)
        for suffix in ("-wal", "-shm", "-journal"):  # an old store's logs must not be replayed onto the new one
            db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
        os.replace(staging / DB_FILE, db_path)
        if key is not None:
            write_key_file(key_path, key)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return BackupReport(archive, manifest)
