"""``assistant graph backfill [--user UUID]`` and ``assistant graph stats``: the knowledge graph from the shell.

Argument parsing and printing only: the work is :class:`assistant.graph.service.KnowledgeGraph`'s
(``pending``, ``backfill``, ``totals``). api/cli.py calls :func:`register`.

A backfill extracts every memory not yet in the graph (memories written before the graph existed,
or whose extraction failed), oldest first, with a progress bar per user; it is safe to interrupt and
run again (an extracted memory is recorded as such in the same transaction). Run it while the
server is stopped, or accept that a memory the server extracts at the same moment is extracted twice
(the second replaces the first).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated
from uuid import UUID

import typer

graph_app = typer.Typer(help="The knowledge graph: backfill it from existing memories, show its size.",
                        no_args_is_help=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default ~/.local/share/assistant).")]
UserOpt = Annotated[str | None, typer.Option("--user", help="Only this user (a UUID); default: every user with memories.")]


def register(app: typer.Typer) -> None:
    app.add_typer(graph_app, name="graph")


def _user(user: str | None) -> str | None:
    """``--user`` as a canonical UUID (checked before anything is opened)."""
    from api.cli import fail

    if user is None:
        return None
    try:
        return str(UUID(user))
    except ValueError:
        fail(f"--user {user!r}: not a UUID")
        raise


def _users(services, user: str | None) -> list[str]:  # noqa: ANN001 - Services, imported lazily
    if user is not None:
        return [user]
    return [r["user_id"] for r in services.db.query("SELECT DISTINCT user_id FROM memories ORDER BY user_id")]


def _opened(config: Path | None, data_dir: Path | None):  # noqa: ANN202 - (Services, KnowledgeGraph)
    from api.cli import opened_part

    return opened_part(config, data_dir, "graph",
                       "the knowledge graph is disabled ([knowledge_graph] enabled = false, or memory.enabled = false)")


def _extractors(graph) -> str:  # noqa: ANN001
    return f"extractor: {graph.extractor.id}" + (f" (fallback {graph.fallback.id})" if graph.fallback else "")


@graph_app.command("backfill")
def backfill(user: UserOpt = None, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Extract every memory not yet in the graph (with a progress bar per user) and say what was added."""
    from tqdm import tqdm

    chosen = _user(user)
    with _opened(config, data_dir) as (services, graph):
        typer.echo(_extractors(graph))
        for who in _users(services, chosen):
            pending = len(graph.pending(who))
            if not pending:
                typer.echo(f"user {who}: nothing to extract")
                continue
            started = time.perf_counter()
            with tqdm(total=pending, desc=f"user {who[:8]}", unit="memory", file=sys.stderr) as bar:
                report = graph.backfill(who, progress=bar.update)
            seconds = time.perf_counter() - started
            typer.echo(f"user {who}: {report.memories} {'memory' if report.memories == 1 else 'memories'} in "
                       f"{seconds:.1f} s "
                       f"({report.memories / seconds if seconds > 0 else 0:.1f}/s): {report.nodes_created} nodes, "
                       f"{report.edges_created} edges created, {report.edges_invalidated} invalidated")


@graph_app.command("stats")
def stats(user: UserOpt = None, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Nodes, edges (valid and invalidated) and memories waiting for extraction, per user and in all."""
    chosen = _user(user)
    with _opened(config, data_dir) as (services, graph):
        counts = graph.per_user()
        users = _users(services, chosen) if chosen is not None else sorted({*counts, *_users(services, None)})
        empty = {"nodes": 0, "edges": 0, "edges_invalidated": 0, "pending": 0}
        typer.echo(f"{'user':<36} {'nodes':>7} {'edges':>7} {'invalid':>7} {'pending':>7}")
        for who in users:
            c = counts.get(who, empty)
            typer.echo(f"{who:<36} {c['nodes']:>7} {c['edges']:>7} {c['edges_invalidated']:>7} "
                       f"{len(graph.pending(who)):>7}")
        totals = graph.totals()
        typer.echo(f"{'all users':<36} {totals['nodes']:>7} {totals['edges']:>7} {totals['edges_invalidated']:>7}")
        typer.echo(_extractors(graph))
