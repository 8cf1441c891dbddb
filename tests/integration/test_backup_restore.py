"""``assistant backup``, ``assistant restore`` and ``assistant keys rotate-memory-key`` as a user runs
them (subprocesses, real SQLite, Argon2id at its default MODERATE cost), including a rotation
SIGKILLed half-way and run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.services import Services, key_path
from assistant.storage.memory_key import pending_key_path
from tests.assistant.storage.stored_data import populate, snapshot

pytestmark = pytest.mark.integration
ASSISTANT = [sys.executable, "-m", "api.cli"]
PASS = "a long and private passphrase"


def run(*args: str, passphrase: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    if passphrase is not None:
        environment["ASSISTANT_BACKUP_PASSPHRASE"] = passphrase
    return subprocess.run([*ASSISTANT, *args], capture_output=True, text=True, timeout=300,
                          env={**environment, **env}, stdin=subprocess.DEVNULL)


@pytest.fixture
def filled(make_services: Callable[..., Services], settings: Settings) -> tuple[list[str], dict]:
    services = make_services(settings)
    users = populate(services)
    seen = snapshot(services, users)
    services.close()
    return users, seen


def test_backup_then_restore_into_a_fresh_data_dir(filled, settings, make_settings, make_services,  # noqa: ANN001
                                                   tmp_path: Path) -> None:
    users, seen = filled
    secret = tmp_path / "passphrase.txt"
    secret.write_text(PASS + "\n")
    archive = tmp_path / "assistant.backup"
    made = run("backup", str(archive), "--passphrase-file", str(secret), "--data-dir", str(settings.data_dir))
    assert made.returncode == 0, made.stderr
    assert "6 memories" in made.stdout and "4 snippets" in made.stdout and "2 agent_profiles" in made.stdout
    fresh = make_settings(server={"data_dir": str(tmp_path / "fresh")})

    wrong = run("restore", str(archive), "--data-dir", str(fresh.data_dir), passphrase="a wrong passphrase")
    assert wrong.returncode == 2
    assert "passphrase does not open this backup" in wrong.stderr
    assert "Traceback" not in wrong.stderr + wrong.stdout
    assert not (fresh.data_dir / "assistant.db").exists()

    restored = run("restore", str(archive), "--data-dir", str(fresh.data_dir), passphrase=PASS)
    assert restored.returncode == 0, restored.stderr
    assert snapshot(make_services(fresh), users) == seen

    again = run("restore", str(archive), "--data-dir", str(fresh.data_dir), passphrase=PASS)
    assert again.returncode == 2 and "--force" in again.stderr


def kill_rotation(settings: Settings, after_rows: int) -> tuple[Path, bytes]:
    """Run the rotation and SIGKILL it after ``after_rows`` rows; the key path and the old key."""
    path = key_path(settings)
    old_key = path.read_bytes()
    killed = run("keys", "rotate-memory-key", "--data-dir", str(settings.data_dir),
                 ASSISTANT_TEST_KILL_ROTATION_AFTER=str(after_rows))
    assert killed.returncode == -signal.SIGKILL
    assert pending_key_path(path).exists() and path.read_bytes() == old_key
    return path, old_key


def test_rotate_memory_key_killed_half_way_then_rerun(filled, settings, make_services) -> None:  # noqa: ANN001
    users, seen = filled
    path, old_key = kill_rotation(settings, 5)

    done = run("keys", "rotate-memory-key", "--data-dir", str(settings.data_dir))
    assert done.returncode == 0, done.stderr
    assert "rows re-encrypted" in done.stdout
    assert path.read_bytes() != old_key and not pending_key_path(path).exists()
    assert snapshot(make_services(settings), users) == seen


def test_a_killed_rotation_is_rolled_back_by_the_next_start(filled, settings, make_services) -> None:  # noqa: ANN001
    users, seen = filled
    path, old_key = kill_rotation(settings, 12)
    services = make_services(settings)
    assert path.read_bytes() == old_key and not pending_key_path(path).exists()
    assert snapshot(services, users) == seen
