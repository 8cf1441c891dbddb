"""Rotating the memory key: every sealed value re-encrypted in one transaction; an interrupted
rotation is finished or rolled back on the next open, never leaving a value the key file cannot open."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from assistant import rekey
from assistant.config import Settings
from assistant.errors import ConfigError, ConflictError
from assistant.rekey import rotate_memory_key
from assistant.services import Services, key_path
from assistant.storage.memory_key import pending_key_path, recover_rotation
from tests.assistant.storage.stored_data import populate, snapshot


@pytest.fixture
def filled(make_services: Callable[..., Services], settings: Settings) -> tuple[Settings, list[str], dict]:
    services = make_services(settings)
    users = populate(services)
    seen = snapshot(services, users)
    services.close()
    return settings, users, seen


def reopen(make_services: Callable[..., Services], settings: Settings) -> Services:
    return make_services(settings)


def test_rotation_reencrypts_everything_and_the_store_reopens_with_the_new_key(filled, make_services) -> None:  # noqa: ANN001
    settings, users, seen = filled
    path = key_path(settings)
    old_key = path.read_bytes()
    services = make_services(settings)
    before = {c: services.db.scalar("SELECT content FROM memories ORDER BY rowid LIMIT 1") for c in ("content",)}
    report = rotate_memory_key(services.db, path)
    services.close()
    assert report.rows >= 2 * (3 + 2 + 1 + 1 + 2)  # memories, snippets, profiles, conversations, messages
    new_key = path.read_bytes()
    assert new_key != old_key and len(new_key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not pending_key_path(path).exists()
    again = reopen(make_services, settings)
    assert snapshot(again, users) == seen
    assert again.db.scalar("SELECT content FROM memories ORDER BY rowid LIMIT 1") != before["content"]
    # the keyed tokens follow the new key: keyword search, unique titles and @name lookups still work
    assert len(again.memory.search(users[0], "locker code", mode="keyword")) == 3
    with pytest.raises(ConflictError):
        again.snippets.create(users[0], "signature 0", "a second one")
    assert again.profiles.by_name(users[1], "@helper1").role == "Helps user 1"


def test_a_rotation_that_fails_half_way_changes_nothing(filled, make_services) -> None:  # noqa: ANN001
    settings, users, seen = filled
    path = key_path(settings)
    old_key = path.read_bytes()
    services = make_services(settings)

    def die(n: int) -> None:
        if n == 4:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        rotate_memory_key(services.db, path, after_row=die)
    services.close()
    assert pending_key_path(path).exists()  # what a killed process leaves
    again = reopen(make_services, settings)  # the open rolls it back
    assert not pending_key_path(path).exists()
    assert path.read_bytes() == old_key
    assert snapshot(again, users) == seen


def test_a_rotation_killed_after_its_commit_is_finished_on_the_next_open(filled, make_services,  # noqa: ANN001
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    settings, users, seen = filled
    path = key_path(settings)
    old_key = path.read_bytes()
    services = make_services(settings)
    real = os.replace

    def crash(src, dst) -> None:  # noqa: ANN001
        if Path(dst) == path:  # the last step: the new key file renamed into place
            raise OSError("killed before the rename")
        real(src, dst)

    monkeypatch.setattr(rekey.os, "replace", crash)
    with pytest.raises(OSError, match="killed"):
        rotate_memory_key(services.db, path)
    monkeypatch.setattr(rekey.os, "replace", real)
    services.close()
    new_key = pending_key_path(path).read_bytes()
    assert path.read_bytes() == old_key  # the store is sealed with the new key, the file still old
    again = reopen(make_services, settings)
    assert path.read_bytes() == new_key and not pending_key_path(path).exists()
    assert snapshot(again, users) == seen


def test_recover_without_a_pending_key_does_nothing(services: Services, settings: Settings) -> None:
    assert recover_rotation(services.db, key_path(settings)) is None


def test_rotation_refuses_a_plain_store(make_settings, make_services) -> None:  # noqa: ANN001
    settings = make_settings(memory={"enable_encryption": False})
    services = make_services(settings)
    with pytest.raises(ConfigError, match="encryption is off"):
        rotate_memory_key(services.db, key_path(settings))
