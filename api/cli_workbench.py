"""``assistant dashboards``, ``assistant lab`` and ``assistant voila``: the workbench from the shell.

Each command replaces this process with another Python program of the same interpreter (``os.execv``,
so Ctrl-C and a terminating signal reach the server itself): ``python -m dashboards`` (every Panel page in
one server, :mod:`dashboards.server`), ``python -m jupyterlab`` on ``notebooks/`` and Voila on notebooks
02 and 05 (``python -m dashboards.voila_server``: Voila with a fix for cells that show an Output widget, which
otherwise hang at random). ``api`` never imports ``dashboards`` (import-linter keeps them independent), hence a
new program rather than a call. All three bind 127.0.0.1 unless told otherwise.

The API key for ``dashboards`` travels in the child's environment (``ASSISTANT_API_KEY``), not on its
command line, so it is not in the process list; an ``--api`` that is not on this machine without a key is
refused (or the key asked for on a terminal) by the dashboards server.

api/cli.py calls :func:`register`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
VOILA_APPS = ("02_memory_scoring_and_decay.ipynb", "05_dream_mode.ipynb")

# Panel and Bokeh output in the notebooks' kernels carries its JavaScript and CSS inline rather than from
# their CDNs: the apps work offline and fetch nothing from outside (the kernels inherit Voila's environment)
INLINE = {"PANEL_INLINE": "true", "BOKEH_RESOURCES": "inline"}

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="TOML settings file.")]


def register(app: typer.Typer) -> None:
    app.command("dashboards")(dashboards)
    app.command("lab")(lab)
    app.command("voila")(voila)


def _exec(args: list[str], env: dict[str, str] | None = None) -> None:
    """Become ``python args...`` (this interpreter); the repository stays importable for the child."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *args], env)


def dashboard_args(port: int, address: str, api: str | None, config: Path | None,
                   origins: list[str] | None) -> list[str]:
    args = ["-m", "dashboards", "--port", str(port), "--address", address]
    if api:
        args += ["--api", api]
    if config is not None:
        args += ["--config", str(config)]
    for origin in origins or []:
        args += ["--allow-websocket-origin", origin]
    return args


def dashboards(
    port: Annotated[int, typer.Option(help="Port of the dashboards server.")] = 5006,
    address: Annotated[str, typer.Option(help="Address to bind (127.0.0.1: this machine only).")] = "127.0.0.1",
    api: Annotated[str | None, typer.Option(help="Read the API server at this URL (default: the data directory "
                                                 "of --config, in process, while no server holds it).")] = None,
    key: Annotated[str | None, typer.Option(help="The API key the pages send (default ASSISTANT_API_KEY); "
                                                 "asked for when --api is not on this machine.")] = None,
    config: ConfigOpt = None,
    allow_websocket_origin: Annotated[list[str] | None, typer.Option(
        help="Another HOST[:PORT] the pages may be opened from (repeatable; e.g. behind a proxy).")] = None,
) -> None:
    """Every dashboard in one Panel server with an index page (decay curves, knowledge graph, dreams, quality,
    voice rooms, and the chat and memory explorer pages)."""
    env = dict(os.environ)
    if key:
        env["ASSISTANT_API_KEY"] = key
    _exec(dashboard_args(port, address, api, config, allow_websocket_origin), env)


def lab_args(port: int, notebook_dir: Path) -> list[str]:
    return ["-m", "jupyterlab", "--ip", "127.0.0.1", "--port", str(port), "--no-browser",
            f"--ServerApp.root_dir={notebook_dir}"]


def lab(
    port: Annotated[int, typer.Option(help="Port of JupyterLab.")] = 8888,
    notebook_dir: Annotated[Path, typer.Option(help="The notebooks to open.")] = NOTEBOOKS,
) -> None:
    """JupyterLab on 127.0.0.1 over notebooks/ (what `make lab` runs)."""
    _exec(lab_args(port, notebook_dir))


def voila_args(port: int, apps_dir: Path) -> list[str]:
    return ["-m", "dashboards.voila_server", str(apps_dir), "--no-browser", "--port", str(port), "--Voila.ip=127.0.0.1",
            "--strip_sources=True"]


def voila_apps(notebooks: Path = NOTEBOOKS, names: tuple[str, ...] = VOILA_APPS) -> Path:
    """A directory holding (links to) the notebooks served as apps, so Voila's tree lists only them."""
    missing = [n for n in names if not (notebooks / n).is_file()]
    if missing:
        raise FileNotFoundError(f"not found in {notebooks}: {', '.join(missing)}")
    apps = Path(tempfile.mkdtemp(prefix="assistant-voila-"))
    for name in names:
        (apps / name).symlink_to(notebooks / name)
    return apps


def voila(
    port: Annotated[int, typer.Option(help="Port of Voila.")] = 8866,
) -> None:
    """Notebooks 02 (memory scoring and decay) and 05 (dream mode) as Voila apps: outputs only, the code
    hidden, each run in its own kernel when opened."""
    from api.cli import fail

    try:
        apps = voila_apps()
    except FileNotFoundError as exc:
        fail(str(exc))
        raise
    typer.echo(f"Voila apps at http://127.0.0.1:{port}/ : " + ", ".join(
        f"http://127.0.0.1:{port}/voila/render/{n}" for n in VOILA_APPS))
    _exec(voila_args(port, apps), {**os.environ, **INLINE})
