"""``python -m dashboards``: every page of :data:`dashboards.pages.PAGES` in one Panel server, with an index.

Each page module that exists (``dashboards/<name>.py``) is served at ``/<name>`` as ``panel serve`` would
serve it (Panel's script application, so its ``if pn.state.served:`` block lays it out for each
session), and ``/`` lists them with their title and summary. One server, one port: the pages share one
process, so in process they share one set of services (:func:`dashboards.serving.local_services`).

Where the pages read from is handed to them through the environment of this process
(:func:`dashboards.client.target`): ``--api URL`` and ``--key KEY`` (or ``ASSISTANT_API_KEY``, which keeps
the key out of the process list) make every page read the API as the key's user; without ``--api``
they open ``--config``'s data directory in process (only while no server holds it). A key is required
when the API is not on this machine: asked for on a terminal, refused otherwise. The server binds
``--address`` (127.0.0.1 by default) and accepts the page's websocket from that address (and
``--allow-websocket-origin`` for more, e.g. behind a proxy).

Panel's server API (``panel.io.server.get_server``) rather than ``panel serve`` as a subprocess: the
index is a page built here from the registry, and the server is one process the CLI starts.
"""

from __future__ import annotations

import argparse
import getpass
import html
import ipaddress
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

from dashboards.client import ENV_CONFIG, ENV_KEY, ENV_URL
from dashboards.pages import PAGES, Page

HERE = Path(__file__).resolve().parent
TITLE = "Assistant dashboards"


class Refused(Exception):
    """The settings cannot work (a remote API without a key, a URL that is not one): said, exit code 2."""


def available(pages: Sequence[Page] = PAGES, directory: Path = HERE) -> list[Page]:
    """The pages of the registry whose module exists (a page still being written is left out)."""
    return [p for p in pages if (directory / f"{p.name}.py").is_file()]


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def api_key_for(api: str | None, key: str | None, *, ask: bool | None = None) -> str:
    """The key the pages send: ``key``, else ``ASSISTANT_API_KEY``; for an API not on this machine a key
    is required (asked for when stdin is a terminal, else :class:`Refused`)."""
    key = key or os.environ.get(ENV_KEY) or ""
    if not api:
        return key
    parsed = urlparse(api)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise Refused(f"--api {api!r}: not an http(s) URL (e.g. http://127.0.0.1:8000)")
    if key or is_loopback(parsed.hostname):
        return key
    ask = sys.stdin.isatty() if ask is None else ask
    if ask:
        key = getpass.getpass(f"API key for {api}: ").strip()
    if not key:
        raise Refused(f"--api {api} is not on this machine: give its API key with --key KEY (or ASSISTANT_API_KEY); "
                      "`assistant keys create` makes one")
    return key


def index_markdown(pages: Sequence[Page], api: str | None, config: str | None) -> str:
    where = (f"Reading the API at `{html.escape(api)}`." if api else
             f"Reading the data directory of `{html.escape(config)}` in process." if config else
             "Reading the default data directory in process.")
    lines = [f"# {TITLE}", where, ""]
    for page in pages:
        lines.append(f'- <a class="page-link" href="./{page.name}">{html.escape(page.title)}</a>: '
                     f"{html.escape(page.summary)}")
    return "\n".join(lines)


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dashboards", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=5006, help="port (default 5006; 0: a free one)")
    parser.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--api", help="read the API server at this URL (default: in process, --config's data)")
    parser.add_argument("--key", help="the API key (default ASSISTANT_API_KEY); required for a remote --api")
    parser.add_argument("--config", help="TOML settings file (in process: whose data directory to open)")
    parser.add_argument("--allow-websocket-origin", action="append", default=[], metavar="HOST[:PORT]",
                        help="another origin the pages may be opened from (repeatable)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    try:
        key = api_key_for(args.api, args.key)
    except Refused as refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    config = str(Path(args.config).resolve()) if args.config else ""
    os.environ[ENV_URL] = args.api or ""
    os.environ[ENV_KEY] = key
    os.environ[ENV_CONFIG] = config

    import panel as pn
    from panel.io.application import build_single_handler_application
    from panel.io.server import get_server

    pages = available()
    text = index_markdown(pages, args.api, config or None)

    def index() -> pn.viewable.Viewable:
        return pn.Column(pn.pane.Markdown(text, css_classes=["dashboard-index"]), sizing_mode="stretch_width")

    argv_pages = [config] if config else []
    apps: dict[str, object] = {"/": index}
    apps.update({f"/{p.name}": build_single_handler_application(str(HERE / f"{p.name}.py"), argv_pages)
                 for p in pages})
    titles = {"/": TITLE, **{f"/{p.name}": p.title for p in pages}}
    port = args.port
    if port == 0:
        import socket

        with socket.socket() as s:
            s.bind((args.address, 0))
            port = s.getsockname()[1]
    origins = [f"{args.address}:{port}", *args.allow_websocket_origin]
    if is_loopback(args.address):
        origins += [f"localhost:{port}", f"127.0.0.1:{port}"]
    server = get_server(apps, port=port, address=args.address, websocket_origin=sorted(set(origins)), title=titles,
                        show=False, start=False)
    print(f"Dashboards at http://{args.address}:{port}/ : {', '.join(p.name for p in pages)}", flush=True)
    server.start()
    try:
        server.io_loop.start()
    except KeyboardInterrupt:
        pass
    return 0
