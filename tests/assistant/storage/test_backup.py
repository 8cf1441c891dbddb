"""Backup and restore: one archive of the database (SQLite online backup) and the memory key,
encrypted with a passphrase (Argon2id, secretstream); restore verifies before it replaces anything.
Argon2id runs at its minimum cost here (the CLI uses MODERATE: tests/integration/test_backup_restore.py)."""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from assistant.config import Settings
from assistant.services import DB_FILE, Services, key_path
from assistant.storage.backup import MAGIC, MINIMUM, BackupError, create_backup, restore_backup
from tests.assistant.storage.stored_data import populate, snapshot

PASS = "correct horse battery staple"


@pytest.fixture
def source(make_services: Callable[..., Services], settings: Settings) -> tuple[Services, list[str], dict]:
    services = make_services(settings)
    users = populate(services)
    return services, users, snapshot(services, users)


def backup(settings: Settings, out: Path, passphrase: str = PASS) -> Path:
    create_backup(settings.data_dir / DB_FILE, key_path(settings), out, passphrase, limits=MINIMUM)
    return out


def restore(settings: Settings, archive: Path, passphrase: str = PASS, **kwargs: bool) -> None:
    restore_backup(archive, settings.data_dir / DB_FILE, key_path(settings), passphrase, **kwargs)


def test_restore_into_a_fresh_data_dir_reads_everything(source, settings, make_settings, make_services,  # noqa: ANN001
                                                        tmp_path: Path) -> None:
    services, users, seen = source
    archive = backup(settings, tmp_path / "backup.bin")  # taken while the services are open
    assert stat.S_IMODE(archive.stat().st_mode) == 0o600
    raw = archive.read_bytes()
    assert raw.startswith(MAGIC)
    for needle in (b"SQLite format 3", b"Regards, user", b"Signature 0", key_path(settings).read_bytes()):
        assert needle not in raw
    fresh = make_settings(server={"data_dir": str(tmp_path / "fresh")})
    restore(fresh, archive)
    assert key_path(fresh).read_bytes() == key_path(settings).read_bytes()
    assert stat.S_IMODE(key_path(fresh).stat().st_mode) == 0o600
    restored = make_services(fresh)
    assert snapshot(restored, users) == seen
    assert restored.memory.search(users[0], "locker code", mode="keyword")  # the keyword index came along


def test_wrong_passphrase_is_a_clear_error_and_touches_nothing(source, settings, make_settings,  # noqa: ANN001
                                                               tmp_path: Path) -> None:
    archive = backup(settings, tmp_path / "backup.bin")
    fresh = make_settings(server={"data_dir": str(tmp_path / "fresh")})
    with pytest.raises(BackupError, match="passphrase does not open this backup"):
        restore(fresh, archive, "not the passphrase")
    assert not (fresh.data_dir / DB_FILE).exists() and not key_path(fresh).exists()
    assert [p.name for p in fresh.data_dir.iterdir()] == []  # no staging left behind


@pytest.mark.parametrize("damage", ["truncated", "flipped", "appended", "not a backup"])
def test_a_damaged_archive_is_refused(source, settings, make_settings, tmp_path: Path, damage: str) -> None:  # noqa: ANN001
    archive = backup(settings, tmp_path / "backup.bin")
    data = bytearray(archive.read_bytes())
    if damage == "truncated":
        data = data[: len(data) - 100]
    elif damage == "flipped":
        data[len(data) // 2] ^= 1
    elif damage == "appended":
        data += b"\x00" * 8
    else:
        data = bytearray(b"PK\x03\x04 a zip file")
    archive.write_bytes(bytes(data))
    fresh = make_settings(server={"data_dir": str(tmp_path / "fresh")})
    with pytest.raises(BackupError):
        restore(fresh, archive)
    assert not (fresh.data_dir / DB_FILE).exists()


def test_restore_refuses_an_existing_store_unless_forced(source, settings, make_services, tmp_path: Path) -> None:  # noqa: ANN001
    services, users, seen = source
    archive = backup(settings, tmp_path / "backup.bin")
    extra = services.snippets.create(users[0], "Written after the backup", "gone after the restore")
    with pytest.raises(BackupError, match="--force"):
        restore(settings, archive)
    assert services.snippets.get(users[0], extra.id).content == "gone after the restore"
    services.close()
    restore(settings, archive, force=True)
    again = make_services(settings)
    assert snapshot(again, users) == seen


def test_a_corrupt_database_in_the_archive_fails_the_integrity_check(source, settings, make_settings,  # noqa: ANN001
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    archive = backup(settings, tmp_path / "backup.bin")
    real = apsw.Connection.execute

    class Corrupt(apsw.Connection):
        def execute(self, sql, *args):  # noqa: ANN001, ANN202
            if sql == "PRAGMA integrity_check":
                return iter([("row 3 missing from index memories_user",)])
            return real(self, sql, *args)

    monkeypatch.setattr("assistant.storage.backup.apsw.Connection", Corrupt)
    fresh = make_settings(server={"data_dir": str(tmp_path / "fresh")})
    with pytest.raises(BackupError, match="integrity check: row 3 missing"):
        restore(fresh, archive)
    assert not (fresh.data_dir / DB_FILE).exists()


def test_a_short_passphrase_and_an_existing_target_are_refused(source, settings, tmp_path: Path) -> None:  # noqa: ANN001
    with pytest.raises(BackupError, match="at least 8"):
        backup(settings, tmp_path / "b.bin", "short")
    (tmp_path / "taken.bin").write_bytes(b"keep me")
    with pytest.raises(BackupError, match="already exists"):
        backup(settings, tmp_path / "taken.bin")
    assert (tmp_path / "taken.bin").read_bytes() == b"keep me"


def test_a_plain_store_backs_up_without_a_key(make_settings, make_services, tmp_path: Path) -> None:  # noqa: ANN001
    plain = make_settings(memory={"enable_encryption": False})
    services = make_services(plain)
    users = populate(services, users=1)
    seen = snapshot(services, users)
    archive = backup(plain, tmp_path / "plain.bin")
    fresh = make_settings(server={"data_dir": str(tmp_path / "fresh")}, memory={"enable_encryption": False})
    restore(fresh, archive)
    assert not key_path(fresh).exists()
    assert snapshot(make_services(fresh), users) == seen
