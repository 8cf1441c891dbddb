"""The dashboards in process, in Chromium: ONE ``python -m dashboards --config CONFIG`` (no API server) over a
data directory for the module, as an operator runs them while no server holds that directory.

- knowledge graph: the nodes of memories written before are drawn; a memory written by another process
  (this test's services on the same directory, the API server's role) appears through the stored event
  log the page polls;
- dreams: the page's own *Dream now* button starts a session in the dashboards' process; it shows on the
  timeline and journals its operations;
- a data directory that cannot be opened is a banner saying so, on every page that reads data.

Screenshots: ``tests/artifacts/in_process_*.png``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from assistant.config import Settings
from assistant.services import Services, build_services
from tests.integration.browser import ARTIFACTS, chromium, dashboards_serve, wait_for, watched_page
from tests.integration.test_workbench_browser import BANNERED, DAY, MEMORIES, NODE_NAMES_JS, SCRIPTS, TIMELINE_JS

pytestmark = pytest.mark.integration


def config_file(directory: Path, data_dir: Path) -> Path:
    path = directory / "config.toml"
    path.write_text(f'[server]\ndata_dir = "{data_dir}"\n[inference]\nbackend = "scripted"\n'
                    '[memory]\nembedding_backend = "hashing"\n[dream]\nmax_cycles = 2\n')
    return path


def opened(config: Path) -> Services:
    from assistant.testing.graph import ScriptedExtractor

    services = build_services(Settings.load(str(config)))
    services.graph.extractor = ScriptedExtractor(SCRIPTS)
    return services


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("in_process")
    config = config_file(directory, directory / "data")
    services = opened(config)
    try:
        owner = str(services.keys.owner_user_id())  # the dashboards' default user
        for days_ago, text in MEMORIES:
            services.memory.clock = lambda ago=days_ago: time.time() - ago * DAY
            services.memory.add(owner, text)
            assert services.graph.wait_idle()
    finally:
        services.close()
    return config


@pytest.fixture(scope="module")
def dashboards(config: Path) -> Iterator[str]:
    with dashboards_serve(config.parent / "dashboards.log", {"ASSISTANT_API_URL": "", "ASSISTANT_API_KEY": ""},
                          ["--config", str(config)]) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


def test_knowledge_graph_sees_another_process_write(config: Path, dashboards: str, browser: Browser) -> None:
    with watched_page(browser, f"{dashboards}/knowledge_graph", width=1400, height=800) as (page, errors):
        names = wait_for(lambda: page.evaluate(NODE_NAMES_JS), lambda v: v is not None, "the graph's nodes")
        assert {"Anna", "Tom", "Paris", "Lena", "Rome", "Risotto"} <= set(names)
        services = opened(config)  # another process's writes, as the API server's would be
        try:
            services.memory.add(str(services.keys.owner_user_id()), "Lena moved to Lisbon")
            assert services.graph.wait_idle()
        finally:
            services.close()
        shown = wait_for(lambda: page.evaluate(NODE_NAMES_JS) or [], lambda v: "Lisbon" in v, "the new node", 30)
        assert len(shown) == len(names) + 1
        page.screenshot(path=str(ARTIFACTS / "in_process_knowledge_graph.png"))
    assert errors == [], errors


def test_dreams_the_dream_now_button_starts_a_session(dashboards: str, browser: Browser) -> None:
    with watched_page(browser, f"{dashboards}/dreams") as (page, errors):
        page.get_by_text("No dream session yet").first.wait_for(timeout=30_000)
        page.get_by_role("button", name="Dream now").click()
        bars = wait_for(lambda: page.evaluate(TIMELINE_JS) or [], lambda v: any(b.startswith("completed|") for b in v),
                        "a completed session on the timeline", 120)
        assert len({b.split("|")[1] for b in bars}) == 1  # one session
        wait_for(page.locator(".dream-journal .tabulator-row").count, lambda n: n > 0, "the journal rows")
        page.screenshot(path=str(ARTIFACTS / "in_process_dreams.png"), full_page=True)
    assert errors == [], errors


def test_a_data_directory_that_cannot_be_opened_is_a_banner(tmp_path: Path, browser: Browser) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the data directory should be")
    config = config_file(tmp_path, blocker)
    with dashboards_serve(tmp_path / "dashboards.log", {"ASSISTANT_API_URL": ""}, ["--config", str(config)]) as url:
        for name in BANNERED:  # decay curves read no data
            with watched_page(browser, f"{url}/{name}") as (page, _errors):
                page.locator(".dashboard-banner").get_by_text("cannot be opened").first.wait_for(timeout=30_000)
                page.screenshot(path=str(ARTIFACTS / f"in_process_{name}_unopenable.png"), full_page=True)
