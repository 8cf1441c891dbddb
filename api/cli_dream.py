"""``assistant dream trigger --user U`` and ``assistant dream status --user U``: dream mode from the shell.

Argument parsing and printing only: the work is :class:`assistant.dream.service.DreamService`'s.
api/cli.py calls :func:`register`.

``trigger`` runs a session in this process, in the foreground, skipping the idle gate (as ``POST
/v1/dream/trigger`` does), and prints each phase as it finishes; Ctrl-C cancels it between two operations
(the session fails with "cancelled", what was applied stays journaled). Run it while the server is
stopped, or for a user the server is not dreaming for: one active session per user is checked in the
database (409 otherwise, as over HTTP). ``status`` prints the user's active or latest session and the
idle gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

dream_app = typer.Typer(help="Dream mode: run a session now, show the latest.", no_args_is_help=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default ~/.local/share/assistant).")]
UserOpt = Annotated[str | None, typer.Option("--user", help="The user (a UUID); default: the installation owner.")]


def register(app: typer.Typer) -> None:
    app.add_typer(dream_app, name="dream")


def _opened(config: Path | None, data_dir: Path | None):  # noqa: ANN202 - (Services, DreamService)
    from api.cli import opened_part

    return opened_part(config, data_dir, "dream", "dream mode is disabled (dream.enabled = false, or memory.enabled = false)")


def _user(services, user: str | None) -> str:  # noqa: ANN001 - Services, imported lazily
    from uuid import UUID

    from api.cli import fail

    if user is None:
        return str(services.keys.owner_user_id())
    try:
        return str(UUID(user))
    except ValueError:
        fail(f"--user {user!r}: not a UUID")
        raise


def _line(session: dict) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in sorted(session["counts"].items())) or "no operations"
    text = (f"session {session['id']}: {session['status']}, cycle {session['current_cycle']}/"
            f"{session['total_cycles']} ({session['phase'].upper()}), {session['trigger']}; {counts}")
    if session.get("paused_reason"):
        text += f"; paused: {session['paused_reason']}"
    if session.get("reason"):
        text += f"; reason: {session['reason']}"
    return text


@dream_app.command("trigger")
def trigger(user: UserOpt = None, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """Run a dream session for the user now (in this process, skipping the idle gate); print each phase."""
    from assistant.dream.types import DreamEvent

    with _opened(config, data_dir) as (services, dream):
        who = _user(services, user)

        def show(event: DreamEvent) -> None:
            if event.user_id != who:
                return
            if event.kind == "phase_finished" and event.phase is not None:
                typer.echo(f"cycle {event.cycle}: {event.phase.value.upper()} done")
            elif event.kind in ("session_paused", "session_resumed", "step_failed"):
                typer.echo(f"cycle {event.cycle}: {event.kind.replace('_', ' ')} {event.data or ''}".rstrip())

        unsubscribe = dream.subscribe(show)
        try:
            session = dream.trigger(who)
            while session is not None and session.status.active:
                session = dream.wait(who, 0.5)
        except KeyboardInterrupt:
            typer.echo("interrupted: cancelling (between two operations)", err=True)
            session = dream.cancel(who)
        finally:
            unsubscribe()
        if session is not None:
            typer.echo(_line(session.to_json()))
            if session.status.value != "completed":
                raise typer.Exit(1)


@dream_app.command("status")
def status(user: UserOpt = None, config: ConfigOpt = None, data_dir: DataDirOpt = None) -> None:
    """The user's active or latest session, the schedule and the idle gate."""
    with _opened(config, data_dir) as (services, dream):
        found = dream.status(_user(services, user))
        typer.echo(_line(found["session"]) if found["session"] else "no dream session yet")
        idle = found["idle_seconds"]
        typer.echo(f"schedule: {found['schedule']}; idle "
                   f"{'never active' if idle is None else f'{idle:.0f} s'} (gate {found['idle_threshold_secs']} s)")
