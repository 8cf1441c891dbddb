"""What the dashboard tests in Chromium share: ``python -m dashboards`` (every page in one server), the
browser's flags, a page that records its console errors behind a loopback-only guard, a waiting helper,
and a script that reads the page's plotly figure through Panel's shadow roots."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
from playwright.sync_api import Browser, Page

from tests.integration.support import free_port

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts"  # screenshots (git-ignored; CI keeps them)
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


# the text the page shows, shadow roots included (Panel renders inside them)
TEXT_JS = """() => {
  const skip = new Set(['STYLE', 'SCRIPT', 'TEMPLATE', 'NOSCRIPT', 'TITLE']);
  const walk = (root) => Array.from(root.querySelectorAll('*')).map((el) => (el.shadowRoot ? walk(el.shadowRoot) : '')
    + (el.children.length === 0 && !skip.has(el.tagName) ? (el.textContent || '') + ' ' : '')).join('');
  return walk(document);
}"""


def loopback_only(page: Page, outside: list[str]) -> None:
    """Abort (and record in ``outside``) every request of the page that leaves loopback."""

    def guard(route) -> None:
        if urlparse(route.request.url).hostname not in ("127.0.0.1", "localhost"):
            outside.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", guard)


def wait_for(probe: Callable[[], Any], ok: Callable[[Any], bool], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = probe()
        if ok(value):
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last: {value!r}")


@contextlib.contextmanager
def watched_page(browser: Browser, url: str, *, width: int = 1500, height: int = 1300) -> Iterator[tuple[Page, list[str]]]:
    """A new page at ``url``, loopback only; yields it and its console errors (and page errors). Asserts,
    on leaving, that nothing was fetched from outside loopback."""
    outside: list[str] = []
    errors: list[str] = []
    page = browser.new_page(viewport={"width": width, "height": height})
    loopback_only(page, outside)
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    try:
        yield page, errors
    finally:
        page.close()
    assert outside == []  # everything the page needs is served locally


@contextlib.contextmanager
def started(args: list[str], log_path: Path, env: dict[str, str], url: str, timeout: float = 90) -> Iterator[str]:
    """``python args...`` (the repository importable) until ``url`` answers 200; yields ``url``; stopped after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    with log_path.open("wb") as log:
        server = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    if httpx.get(url, timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, f"{' '.join(args)} did not start"
                time.sleep(0.3)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


@contextlib.contextmanager
def dashboards_serve(log_path: Path, env: dict[str, str], args: list[str] = ()) -> Iterator[str]:
    """``python -m dashboards`` (every page) on a free loopback port until its index answers; yields its URL."""
    port = free_port()
    with started(["-m", "dashboards", "--port", str(port), *args], log_path, env, f"http://127.0.0.1:{port}/"):
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def panel_serve(script: str, log_path: Path, env: dict[str, str], args: list[str] = ()) -> Iterator[str]:
    """``panel serve dashboards/<script>.py`` alone on a free loopback port until it answers; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/{script}"
    with started(["-m", "panel", "serve", f"dashboards/{script}.py", "--address", "127.0.0.1", "--port", str(port),
                  "--allow-websocket-origin", f"127.0.0.1:{port}", *args], log_path, env, url):
        yield url


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """The apt Chromium, headless (never a downloaded browser); the artefacts directory made."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()
