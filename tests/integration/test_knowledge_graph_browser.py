"""The knowledge-graph dashboard in Chromium: ``panel serve dashboards/knowledge_graph.py``, nodes drawn,
and a new memory appears in the page without a reload.

Two ways it is served, as an operator would:

- in process on a data directory (no ``ASSISTANT_API_URL``): the memory is written by another process
  (the API server's role, played by this test's services on the same directory); the dashboard sees it
  through the stored event log it polls;
- over the HTTP API (``ASSISTANT_API_URL`` + ``ASSISTANT_API_KEY``, a live uvicorn server): the memory is
  POSTed to ``/v1/memories`` and arrives through ``GET /api/v1/knowledge/graph/stream`` (SSE).

Screenshots are left in the test's tmp_path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from assistant.config import Settings
from assistant.graph.types import Entity, Extraction, Fact, NodeKind
from assistant.services import Services, build_services
from assistant.testing.graph import ScriptedExtractor
from tests.integration.browser import CHROMIUM, FLAGS, loopback_only, panel_serve, plot_js
from tests.integration.support import serve

pytestmark = pytest.mark.integration
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
NEW_MEMORY = "Lena moved to Lisbon"

NODE_NAMES_JS = plot_js("""const nodes = plot.data.find((t) => t.name === 'nodes');
  return nodes ? Array.from(nodes.text || []) : null;""")


def remember_days_ago(services: Services, user: str) -> int:
    """The test's graph: memories written days ago (so retention, the colour, differs); its node count."""
    services.graph.extractor = ScriptedExtractor(SCRIPTS)  # known entities and facts, whatever is configured
    for days_ago, text in MEMORIES:
        services.memory.clock = lambda ago=days_ago: time.time() - ago * DAY
        services.memory.add(user, text)
        assert services.graph.wait_idle()
    services.memory.clock = time.time
    return services.graph.graph(user)["returned_nodes"]


def wait_for(page: Page, predicate: Callable[[list[str] | None], bool], timeout: float = 60.0) -> list[str]:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = page.evaluate(NODE_NAMES_JS)
        if predicate(value):
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out; nodes drawn: {value!r}")


def run_dashboard(tmp_path: Path, env: dict[str, str], args: list[str], expected: int,
                  write: Callable[[], None]) -> None:
    """Serve the dashboard, check ``expected`` nodes are drawn, ``write`` the new memory, check it shows."""
    outside: list[str] = []
    log_path = tmp_path / "panel.log"
    with panel_serve("knowledge_graph", log_path, env, args) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        loopback_only(page, outside)
        page.goto(url)
        names = wait_for(page, lambda names: names is not None)
        assert len(names) == expected, log_path.read_text()
        page.screenshot(path=str(tmp_path / "knowledge_graph.png"))
        write()
        names = wait_for(page, lambda names: "Lisbon" in names, timeout=30)
        assert len(names) == expected + 1
        page.screenshot(path=str(tmp_path / "knowledge_graph_live.png"))
        browser.close()
    assert outside == []  # everything the page needs is served locally


def test_in_process_on_a_data_directory(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n[inference]\nbackend = "scripted"\n'
                      '[memory]\nembedding_backend = "hashing"\n')
    services = build_services(Settings.load(str(config)))
    try:
        owner = str(services.keys.owner_user_id())  # the dashboard's default user
        expected = remember_days_ago(services, owner)
        assert expected == 6  # Anna, Tom, Paris, Lena, Rome, Risotto

        def write() -> None:  # another process writes
            services.memory.add(owner, NEW_MEMORY)
            assert services.graph.wait_idle()

        run_dashboard(tmp_path, {"ASSISTANT_API_URL": ""}, ["--args", str(config)], expected, write)
    finally:
        services.close()


def test_over_the_http_api(tmp_path: Path) -> None:
    live, key = serve(tmp_path / "server", inference={"backend": "scripted"}, memory={"embedding_backend": "hashing"})
    with live:
        principal = live.services.keys.authenticate(key)
        expected = remember_days_ago(live.services, str(principal.user_id))
        routed = httpx.get(f"{live.base_url}/api/v1/knowledge/graph", headers={"Authorization": f"Bearer {key}"},
                           timeout=60)  # a cold view build on a loaded 2-core machine
        assert routed.status_code == 200, f"the knowledge routes answer {routed.status_code}"

        def write() -> None:
            response = httpx.post(f"{live.base_url}/v1/memories", json={"content": NEW_MEMORY, "summary": NEW_MEMORY},
                                  headers={"Authorization": f"Bearer {key}"}, timeout=30)
            assert response.status_code == 201, response.text

        run_dashboard(tmp_path, {"ASSISTANT_API_URL": live.base_url, "ASSISTANT_API_KEY": key}, [], expected, write)
