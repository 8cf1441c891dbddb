"""``assistant dream trigger`` and ``assistant dream status`` on a real data directory (the scripted engine,
the hashing embedder): a session runs in the foreground and is then the status; bad input exits 2."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest
from typer.testing import CliRunner

from api.cli import app

pytestmark = pytest.mark.usefixtures("clean_env")
runner = CliRunner()


def run(*args: str):  # noqa: ANN201
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def config_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "assistant.toml"
    path.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n\n[inference]\nbackend = "scripted"\n\n'
                    f'[memory]\nembedding_backend = "hashing"\n\n[dream]\nmax_cycles = 2\n{extra}')
    return path


def test_trigger_runs_a_session_then_status_shows_it(tmp_path: Path) -> None:
    config, user = config_file(tmp_path), str(uuid4())
    before = run("dream", "status", "--user", user, "--config", str(config))
    assert before.exit_code == 0, before.output
    assert "no dream session yet" in before.output and "never active" in before.output

    ran = run("dream", "trigger", "--user", user, "--config", str(config))
    assert ran.exit_code == 0, ran.output
    assert "cycle 1: NREM done" in ran.output and "cycle 2: REM done" in ran.output
    assert ": completed, cycle 2/2 (REM), manual" in ran.output

    after = run("dream", "status", "--user", user, "--config", str(config))
    assert after.exit_code == 0 and ": completed, cycle 2/2" in after.output
    assert "schedule: 0 0 0 * * *" in after.output
    owner = run("dream", "status", "--config", str(config))  # the installation owner: none yet
    assert owner.exit_code == 0 and "no dream session yet" in owner.output


def test_bad_user_and_disabled_dream_exit_2(tmp_path: Path) -> None:
    config = config_file(tmp_path)
    bad = run("dream", "status", "--user", "me", "--config", str(config))
    assert bad.exit_code == 2 and "not a UUID" in bad.output
    off = config_file(tmp_path, "enabled = false\n")
    disabled = run("dream", "trigger", "--config", str(off))
    assert disabled.exit_code == 2 and "dream.enabled" in disabled.output
