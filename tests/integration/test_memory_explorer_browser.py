"""The memory explorer in Chromium against a live API server: ``panel serve dashboards/memory_explorer.py``
with ``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY``, as an operator serves it.

The server's store holds four memories (one deduplicated by a dream, as the dream journal records it; one
quarantined by sanitation). The page lists them, newest first; a search replaces the rows with the hits
ranked by relevance and draws each hit's relevance terms as stacked bars; selecting a hit shows its history
(the dream's entry among its events) and its decay projection. (A wrong key's banner is tested with every
page's, in test_workbench_browser.py.) No console error, nothing fetched outside loopback. Screenshots: ``tests/artifacts/memory_explorer*.png``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

from assistant.dream.types import EntryStatus, Operation, Phase
from tests.integration.browser import ARTIFACTS, CHROMIUM, FLAGS, loopback_only, panel_serve, plot_js, wait_for
from tests.integration.support import serve

pytestmark = pytest.mark.integration
MEMORIES = [("I drink green tea every morning", "preference", 0.7), ("My sister Ada lives in Lisbon", "fact", 0.9),
            ("The green tea shop closes at six", "context", 0.4), ("Dentist appointment on Friday", "context", 0.5)]
TRACES_JS = plot_js("return plot.data.map((t) => t.name + ':' + (t.y ? t.y.length : 0));")


def test_the_memory_explorer_lists_searches_and_shows_a_history(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    live, key = serve(tmp_path / "server", inference={"backend": "scripted"}, memory={"embedding_backend": "hashing"},
                      security={"rate_limit_enabled": False})
    with live:
        services = live.services
        user = str(services.keys.authenticate(key).user_id)
        ids = [services.memory.add(user, text, memory_type=kind, importance=importance).id
               for text, kind, importance in MEMORIES]
        dreams = services.dream.store
        session = dreams.create_session(user, 1, "manual")
        entry = dreams.begin_entry(session, 1, Phase.NREM, Operation.MEMORY_DEDUPLICATED, "dedupe:tea",
                                   {"kept": ids[0]}, memories=[ids[0]], before={"contents": [MEMORIES[0][0]]})
        dreams.finish_entry(entry, EntryStatus.APPLIED)
        services.memory.quarantine(user, ids[3], "stale: 'Friday' has passed")
        env = {"ASSISTANT_API_URL": live.base_url, "ASSISTANT_API_KEY": key}
        outside: list[str] = []
        errors: list[str] = []
        with panel_serve("memory_explorer", tmp_path / "panel.log", env) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page: Page = browser.new_page(viewport={"width": 1400, "height": 1600})
            loopback_only(page, outside)
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            rows = page.locator(".memory-hits .tabulator-row")
            wait_for(rows.count, lambda n: n == 4, "the four memories")
            traces = wait_for(lambda: page.evaluate(TRACES_JS), lambda v: bool(v), "the relevance plot")
            assert traces == ["0.50 × similarity:0", "0.20 × importance:0", "0.30 × freshness:0", "relevance:0"]

            # search: the rows become the hits, and the plot draws their relevance terms
            page.locator(".memory-query input").fill("green tea")
            page.get_by_role("button", name="Search").click()
            wait_for(lambda: rows.first.inner_text(), lambda t: "green tea" in t, "the search hits")
            hits = rows.count()
            assert 1 <= hits < 4  # the quarantined memory is never found; unrelated ones are not hits
            traces = wait_for(lambda: page.evaluate(TRACES_JS), lambda v: v and v[0] != "0.50 × similarity:0",
                              "the hits' relevance terms")
            assert traces == [f"{name}:{hits}" for name in ("0.50 × similarity", "0.20 × importance",
                                                            "0.30 × freshness", "relevance")]
            page.screenshot(path=str(ARTIFACTS / "memory_explorer.png"), full_page=True)

            # select the deduplicated memory: its history shows the dream's entry
            rows.filter(has_text=MEMORIES[0][0]).first.click()
            events = page.locator(".memory-events .tabulator-row")
            wait_for(events.count, lambda n: n == 2, "the memory's two events")
            assert "MemoryDeduplicated" in events.nth(1).inner_text()
            page.get_by_text("Importance if left alone").first.wait_for(timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "memory_explorer_history.png"), full_page=True)
            browser.close()
    assert outside == []  # everything the page needs is served locally
    assert errors == [], errors

