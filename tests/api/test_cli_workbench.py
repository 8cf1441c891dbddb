"""``assistant dashboards``, ``assistant lab`` and ``assistant voila``: the program each becomes (``os.execve``
recorded here, not run), the key kept off the command line, the two notebooks Voila serves. (Running:
tests/integration/test_workbench_browser.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api import cli_workbench
from api.cli import app

runner = CliRunner()


@pytest.fixture
def execs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[list[str], dict[str, str]]]:
    seen: list[tuple[list[str], dict[str, str]]] = []

    def record(path: str, argv: list[str], env: dict[str, str]) -> None:
        assert path == sys.executable
        seen.append((argv[1:], env))

    monkeypatch.setattr(cli_workbench.os, "execve", record)
    return seen


def test_dashboards_runs_python_m_dashboards_with_the_key_in_its_environment(execs, tmp_path: Path) -> None:
    result = runner.invoke(app, ["dashboards", "--port", "5107", "--api", "http://127.0.0.1:8000", "--key", "k-1",
                                 "--config", str(tmp_path / "a.toml"), "--allow-websocket-origin", "box:80"])
    assert result.exit_code == 0, result.output
    (args, env), = execs
    assert args == ["-m", "dashboards", "--port", "5107", "--address", "127.0.0.1", "--api", "http://127.0.0.1:8000",
                    "--config", str(tmp_path / "a.toml"), "--allow-websocket-origin", "box:80"]
    assert "k-1" not in args and env["ASSISTANT_API_KEY"] == "k-1"
    assert str(cli_workbench.ROOT) in env["PYTHONPATH"]


def test_lab_is_jupyterlab_on_loopback_over_the_notebooks(execs) -> None:
    assert runner.invoke(app, ["lab"]).exit_code == 0
    (args, _), = execs
    assert args[:4] == ["-m", "jupyterlab", "--ip", "127.0.0.1"]
    assert f"--ServerApp.root_dir={cli_workbench.NOTEBOOKS}" in args and "--no-browser" in args


def test_voila_serves_notebooks_02_and_05_with_the_code_hidden(execs) -> None:
    result = runner.invoke(app, ["voila", "--port", "8870"])
    assert result.exit_code == 0, result.output
    (args, _), = execs
    assert args[:2] == ["-m", "dashboards.voila_server"] and "--Voila.ip=127.0.0.1" in args and "--strip_sources=True" in args
    apps = Path(args[2])
    assert sorted(p.name for p in apps.iterdir()) == sorted(cli_workbench.VOILA_APPS)
    assert all((apps / n).resolve() == (cli_workbench.NOTEBOOKS / n).resolve() for n in cli_workbench.VOILA_APPS)
    assert "/voila/render/05_dream_mode.ipynb" in result.output


def test_voila_apps_missing_is_said(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="02_memory"):
        cli_workbench.voila_apps(tmp_path)
