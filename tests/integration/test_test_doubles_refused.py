"""`assistant serve` as a user runs it, with a config naming a test double and no ASSISTANT_TESTING:
it refuses to start (exit 2) and says which backend and why, before anything is served."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.support import free_port

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(("section", "line", "kind"), [
    ("inference", 'backend = "scripted"', "inference backend 'scripted'"),
    ("memory", 'embedding_backend = "hashing"', "embedding backend 'hashing'"),
])
def test_serve_refuses_a_test_double_outside_tests(tmp_path: Path, section: str, line: str, kind: str) -> None:
    config = tmp_path / "assistant.toml"
    inference = "" if section == "inference" else '[inference]\nbackend = "ollama"\nbase_url = "http://127.0.0.1:9"\n'
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\nport = {free_port()}\n{inference}[{section}]\n{line}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")}
    result = subprocess.run([sys.executable, "-m", "api.cli", "serve", "--config", str(config)], capture_output=True,
                            text=True, timeout=120, env=env)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{kind} is a test double" in result.stderr and "ASSISTANT_TESTING=1" in result.stderr
