"""``assistant mcp``: the MCP server on stdio, for one user (a local client such as a desktop app starts it).

Argument parsing and the stdio plumbing only: the server is :func:`assistant.mcp_server.build_server`.
api/cli.py calls :func:`register`.

Nothing but the protocol reaches stdout: logging goes to stderr, and while the services are built and
closed, file descriptor 1 itself points at stderr (a library writing to stdout, even from C, cannot
corrupt the stream); while serving, the SDK's ``stdio_server`` diverts it the same way.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Annotated

import typer

HELP = (
    "Serve the MCP server (Model Context Protocol) on stdin/stdout, for one user.\n\n"
    "The user is the one of --key (or the ASSISTANT_API_KEY variable), checked against the key store (a "
    "read-only key gets the read-only tools and the resources only); without a key, the installation's owner, "
    "with a `user` key's rights.\n\n"
    "It opens the data directory itself, so it cannot run while `assistant serve` holds the same one (the "
    "analytics database takes one process): connect to that server's /mcp over HTTP instead (the same "
    "server, authenticated with an API key). Logging goes to stderr; stdout carries only the protocol."
)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="Data directory (default ~/.local/share/assistant).")]
KeyOpt = Annotated[str | None, typer.Option("--key", envvar="ASSISTANT_API_KEY", show_envvar=True,
                                            help="An API key: whose data the server serves, with its role "
                                                 "(default: the installation's owner).")]


def register(app: typer.Typer) -> None:
    app.command("mcp", help=HELP)(mcp)


@contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 (and ``sys.stdout``) pointed at stderr for the block."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def mcp(config: ConfigOpt = None, data_dir: DataDirOpt = None, key: KeyOpt = None) -> None:
    import anyio

    from api.cli import _open_services, fail, load_settings
    from assistant.mcp_server import run_stdio
    from assistant.security import Principal

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    settings = load_settings(config, data_dir)
    with stdout_to_stderr():
        try:
            services = _open_services(settings)
        except (typer.Exit, KeyboardInterrupt):
            raise
        except Exception as exc:  # duckdb's lock on the analytics file, while `assistant serve` runs on it
            fail(f"cannot open the data directory {settings.data_dir}: {exc}. If `assistant serve` runs on it, "
                 "connect to its /mcp over HTTP instead.", 1)
            raise
    try:
        if key:
            principal = services.keys.authenticate(key.strip())
            if principal is None:
                fail("invalid API key (--key or ASSISTANT_API_KEY)")
        else:
            principal = Principal(services.keys.owner_user_id(), "user", "owner (stdio)")
        logging.getLogger("api.mcp").info("MCP on stdio for user %s (%s)", principal.user_id, principal.role)
        anyio.run(run_stdio, services, principal)
    except KeyboardInterrupt:
        pass
    finally:
        with stdout_to_stderr():
            services.close()
