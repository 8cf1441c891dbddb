"""The knowledge-graph dashboard in Chromium: ``panel serve dashboards/knowledge_graph.py`` on a data
directory, nodes drawn, and a memory written by another process (the API server's role, played by this
test's services on the same directory) appears in the page without a reload.

The served dashboard reads the package in process (no ``ASSISTANT_API_URL``): it sees the other
process's changes through the stored event log it polls. A screenshot is left in the test's tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from assistant.config import Settings
from assistant.graph.types import Entity, Extraction, Fact, NodeKind
from assistant.services import build_services
from assistant.testing.graph import ScriptedExtractor
from tests.integration.support import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
DAY = 86_400.0
P, L, T = NodeKind.PERSON, NodeKind.PLACE, NodeKind.THING
SCRIPTS = {  # entities and facts, so that edges are drawn
    "Anna met Tom": Extraction((Entity("Anna", P), Entity("Tom", P), Entity("Paris", L)),
                               (Fact("Anna", "met", "Tom"), Fact("Anna", "visited", "Paris"))),
    "went to Rome": Extraction((Entity("Anna", P), Entity("Lena", P), Entity("Rome", L)),
                               (Fact("Anna", "travelled_with", "Lena"), Fact("Lena", "visited", "Rome"),
                                Fact("Anna", "visited", "Rome"))),
    "Risotto": Extraction((Entity("Tom", P), Entity("Lena", P), Entity("Risotto", T)),
                          (Fact("Tom", "cooked", "Risotto"), Fact("Tom", "friend_of", "Lena"))),
    "Lisbon": Extraction((Entity("Lena", P), Entity("Lisbon", L)), (Fact("Lena", "lives_in", "Lisbon"),)),
}
MEMORIES = [(2.0, "Anna met Tom in Paris"), (1.0, "Anna and Lena went to Rome"), (0.3, "Tom cooked Risotto for Lena")]

# The nodes of the plotly figure: Panel renders inside shadow roots, so walk them.
NODE_COUNT_JS = """() => {
  const find = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.classList && el.classList.contains('js-plotly-plot')) return el;
      if (el.shadowRoot) { const hit = find(el.shadowRoot); if (hit) return hit; }
    }
    return null;
  };
  const plot = find(document);
  if (!plot || !plot.data) return -1;
  const nodes = plot.data.find((t) => t.name === 'nodes');
  return nodes ? nodes.x.length : -1;
}"""
NODE_NAMES_JS = NODE_COUNT_JS.replace("return nodes ? nodes.x.length : -1;", "return nodes ? Array.from(nodes.text) : [];")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n[inference]\nbackend = "scripted"\n'
                      '[memory]\nembedding_backend = "hashing"\n')
    return config


def wait_for(page: Page, script: str, predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = page.evaluate(script)
        if predicate(value):
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out; last value {value!r}")


def test_nodes_are_drawn_and_a_new_memory_appears(data_dir: Path, tmp_path: Path) -> None:
    services = build_services(Settings.load(str(data_dir)))
    services.graph.extractor = ScriptedExtractor(SCRIPTS)  # known entities and facts, whatever is configured
    owner = str(services.keys.owner_user_id())
    for days_ago, text in MEMORIES:  # written days ago: retention (colour) differs
        services.memory.clock = lambda ago=days_ago: time.time() - ago * DAY
        services.memory.add(owner, text)
        assert services.graph.wait_idle()
    services.memory.clock = time.time
    expected = services.graph.graph(owner)["returned_nodes"]
    assert expected == 6  # Anna, Tom, Paris, Lena, Rome, Risotto

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("ASSISTANT_API_URL", None)
    log = (tmp_path / "panel.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "panel", "serve", "dashboards/knowledge_graph.py", "--address", "127.0.0.1",
         "--port", str(port), "--allow-websocket-origin", f"127.0.0.1:{port}", "--args", str(data_dir)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/knowledge_graph"
    outside: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url, timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, (tmp_path / "panel.log").read_text()
            assert time.monotonic() < deadline, "panel serve did not start"
            time.sleep(0.3)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 800})

            def guard(route):
                if urlparse(route.request.url).hostname not in ("127.0.0.1", "localhost"):
                    outside.append(route.request.url)
                    route.abort()
                else:
                    route.continue_()

            page.route("**/*", guard)
            page.goto(url)
            assert wait_for(page, NODE_COUNT_JS, lambda n: n >= 0) == expected
            page.screenshot(path=str(tmp_path / "knowledge_graph.png"))

            services.memory.add(owner, "Lena moved to Lisbon")  # another process writes
            assert services.graph.wait_idle()
            names = wait_for(page, NODE_NAMES_JS, lambda names: "Lisbon" in names, timeout=30)
            assert len(names) == expected + 1
            page.screenshot(path=str(tmp_path / "knowledge_graph_live.png"))
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        services.close()
    assert outside == []  # everything the page needs is served locally
