"""``assistant mcp``'s command line: its help, a refused key, and stdout kept for the protocol
(tests/integration/test_mcp_real.py talks to it with the SDK's client over stdio)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from api.cli_mcp import stdout_to_stderr

pytestmark = pytest.mark.usefixtures("clean_env")
runner = CliRunner()


def test_help_names_the_key_its_variable_and_the_owner_default() -> None:
    result = runner.invoke(app, ["mcp", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "--key" in result.output and "ASSISTANT_API_KEY" in result.output
    assert "owner" in result.output and "/mcp" in result.output


def test_an_invalid_key_exits_2_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "assistant.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n\n[inference]\nbackend = "scripted"\n\n'
                      '[memory]\nembedding_backend = "hashing"\n')
    result = runner.invoke(app, ["mcp", "--config", str(config), "--key", "ak_wrong"], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "invalid API key" in result.output


def test_stdout_to_stderr_moves_file_descriptor_1(capfd: pytest.CaptureFixture[str]) -> None:
    with stdout_to_stderr():
        print("python print")
        os.write(1, b"raw write\n")  # what a C library would do
    sys.stdout.write("after\n")
    sys.stdout.flush()
    out, err = capfd.readouterr()
    assert "python print" in err and "raw write" in err
    assert out == "after\n"
