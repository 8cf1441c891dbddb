"""What the dashboard tests in Chromium share: ``panel serve`` of a dashboard, the browser's flags, a
loopback-only guard, and a script that reads the page's plotly figure through Panel's shadow roots."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
from playwright.sync_api import Page

from tests.integration.support import free_port

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def plot_js(body: str) -> str:
    """A page script: ``body`` runs with ``plot``, the first plotly figure (Panel renders inside
    shadow roots, so they are walked); null while there is none."""
    return """() => {
  const find = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList && el.classList.contains('js-plotly-plot')) return el;
      if (el.shadowRoot) { const hit = find(el.shadowRoot); if (hit) return hit; }
    }
    return null;
  };
  const plot = find(document);
  if (!plot || !plot.data) return null;
  %s
}""" % body


def loopback_only(page: Page, outside: list[str]) -> None:
    """Abort (and record in ``outside``) every request of the page that leaves loopback."""

    def guard(route) -> None:
        if urlparse(route.request.url).hostname not in ("127.0.0.1", "localhost"):
            outside.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", guard)


@contextlib.contextmanager
def panel_serve(script: str, log_path: Path, env: dict[str, str], args: list[str] = ()) -> Iterator[str]:
    """``panel serve dashboards/<script>.py`` on a free loopback port until it answers; yields its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "panel", "serve", f"dashboards/{script}.py", "--address", "127.0.0.1",
             "--port", str(port), "--allow-websocket-origin", f"127.0.0.1:{port}", *args],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/{script}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url, timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "panel serve did not start"
                time.sleep(0.3)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
