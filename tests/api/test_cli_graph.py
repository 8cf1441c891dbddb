"""``assistant graph backfill`` and ``assistant graph stats`` on a real data directory (the scripted engine,
the hashing embedder): memories written while the graph was off are pending, a backfill extracts them
per user with a progress bar, stats count nodes, edges and pending memories, bad input exits 2."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest
from typer.testing import CliRunner

from api.cli import app
from assistant.config import Settings
from assistant.services import Services

pytestmark = pytest.mark.usefixtures("clean_env")
runner = CliRunner()


def run(*args: str):  # noqa: ANN201
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "assistant.toml"
    path.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n\n[inference]\nbackend = "scripted"\n\n'
                    '[memory]\nembedding_backend = "hashing"\n')
    return path


@pytest.fixture
def users(make_settings: Callable[..., Settings], make_services: Callable[..., Services]) -> tuple[str, str]:
    """Two users' memories, written while the graph was disabled: all pending."""
    services = make_services(make_settings(knowledge_graph={"enabled": False}))
    first, second = str(uuid4()), str(uuid4())
    for text in ("Anna met Tom in Paris", "Tom moved to Lisbon", "Anna likes Lisbon"):
        services.memory.add(first, text)
    services.memory.add(second, "Zoe works at Acme")
    services.close()
    return first, second


def row(output: str, who: str) -> list[str]:
    return next(line.split() for line in output.splitlines() if line.startswith(who))


def test_stats_then_backfill_one_user_then_every_user(config: Path, users: tuple[str, str]) -> None:
    first, second = users
    stats = run("graph", "stats", "--config", str(config))
    assert stats.exit_code == 0, stats.output
    assert row(stats.output, first)[1:] == ["0", "0", "0", "3"] and row(stats.output, second)[-1] == "1"
    assert "extractor:" in stats.output

    one = run("graph", "backfill", "--user", first, "--config", str(config))
    assert one.exit_code == 0, one.output
    assert f"user {first}: 3 memories" in one.output
    assert "3/3" in one.stderr  # the progress bar
    assert second not in one.output
    stats = run("graph", "stats", "--config", str(config)).output
    assert int(row(stats, first)[1]) > 0 and row(stats, first)[-1] == "0" and row(stats, second)[-1] == "1"

    every = run("graph", "backfill", "--config", str(config))
    assert every.exit_code == 0, every.output
    assert f"user {first}: nothing to extract" in every.output and f"user {second}: 1 memory in" in every.output
    stats = run("graph", "stats", "--user", second, "--config", str(config)).output
    assert int(row(stats, second)[1]) > 0 and row(stats, second)[-1] == "0" and first not in stats
    everyone = run("graph", "stats", "--config", str(config)).output
    assert int(row(everyone, "all users")[2]) == int(row(everyone, first)[1]) + int(row(everyone, second)[1])


def test_bad_user_and_disabled_graph_exit_2(config: Path, users: tuple[str, str]) -> None:
    bad = run("graph", "backfill", "--user", "nope", "--config", str(config))
    assert bad.exit_code == 2 and "not a UUID" in bad.output
    config.write_text(config.read_text() + "\n[knowledge_graph]\nenabled = false\n")
    for command in ("backfill", "stats"):
        off = run("graph", command, "--config", str(config))
        assert off.exit_code == 2 and "knowledge graph is disabled" in off.output, off.output


def test_help_names_the_commands() -> None:
    text = run("graph", "--help").output
    assert "backfill" in text and "stats" in text
    assert "--user" in run("graph", "backfill", "--help").output
