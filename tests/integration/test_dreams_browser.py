"""The dreams dashboard in Chromium against a live API server: ``panel serve dashboards/dreams.py`` with
``ASSISTANT_API_URL`` and ``ASSISTANT_API_KEY``, as an operator serves it.

A session triggered from the test (``POST /v1/dream/trigger`` with ``X-API-Key``) runs the real NREM and
REM steps over memories with planted exact duplicates; it appears on the timeline, its journal rows
render, and selecting one shows its before/after diff. An insight (stored as REM stores them) is
confirmed with its row's *Confirm* button, and the API then answers it confirmed. The page logs no
console error and fetches nothing from outside loopback. Screenshots: ``tests/artifacts/dreams*.png``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, sync_playwright

from assistant.dream.types import InsightType
from tests.integration.browser import CHROMIUM, FLAGS, ROOT, loopback_only, panel_serve, plot_js
from tests.integration.support import serve

pytestmark = pytest.mark.integration
ARTIFACTS = ROOT / "tests" / "artifacts"
MEMORIES = ["I live in Lisbon with my sister Ana.", "I live in Lisbon with my sister Ana.",  # an exact duplicate
            "My favourite dish is risotto.", "my favourite dish is   risotto", "I run every Sunday morning.",
            "I started learning the cello in March.", "Ana works as a nurse at the hospital."]
INSIGHT = "Runs on Sunday mornings"

# "<trace name>|<y label>" of every bar of the timeline
TIMELINE_JS = plot_js("return plot.data.flatMap((t) => Array.from(t.y || []).map((y) => t.name + '|' + y));")


def wait_for(probe: Callable[[], Any], ok: Callable[[Any], bool], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = probe()
        if ok(value):
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}; last: {value!r}")


def test_a_triggered_session_its_journal_and_a_confirmed_insight(tmp_path: Path) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    live, key = serve(tmp_path / "server", inference={"backend": "scripted"}, memory={"embedding_backend": "hashing"},
                      dream={"max_cycles": 2})
    headers = {"X-API-Key": key}
    with live:
        user = str(live.services.keys.authenticate(key).user_id)
        ids = [live.services.memory.add(user, text).id for text in MEMORIES]
        insight, _ = live.services.dream.store.add_insight(
            user, InsightType.PATTERN, INSIGHT, "You mention running every Sunday morning.", 0.8, ids[4:5],
            key="browser-test-pattern")
        api = httpx.Client(base_url=f"{live.base_url}/v1/dream", headers=headers, timeout=30)
        env = {"ASSISTANT_API_URL": live.base_url, "ASSISTANT_API_KEY": key}
        outside: list[str] = []
        errors: list[str] = []
        with api, panel_serve("dreams", tmp_path / "panel.log", env) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page: Page = browser.new_page(viewport={"width": 1500, "height": 1300})
            loopback_only(page, outside)
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(url)
            wait_for(lambda: page.evaluate(TIMELINE_JS), lambda v: v is not None, "the timeline")
            page.get_by_text("No dream session yet").first.wait_for(timeout=30_000)

            # a session triggered from the test appears on the timeline
            started = api.post("/trigger", json={})
            assert started.status_code in (200, 201, 202), started.text
            session = started.json()
            done = wait_for(lambda: api.get(f"/sessions/{session['id']}").json(),
                            lambda s: s["status"] in ("completed", "failed"), "the session to end", 120)
            assert done["status"] == "completed", done
            label = f"{session['id'][:8]} · completed"
            bars = wait_for(lambda: page.evaluate(TIMELINE_JS) or [], lambda v: f"completed|{label}" in v,
                            "the session on the timeline")
            journal = api.get(f"/sessions/{session['id']}/journal").json()
            assert journal["total"] > 0, "the night journaled nothing over planted duplicates"
            assert all(f"{phase}|{label}" in bars for phase in {e["phase"] for e in journal["entries"]})

            # its journal rows render; a row shows its diff
            rows = page.locator(".dream-journal .tabulator-row")
            wait_for(rows.count, lambda n: n > 0, "the journal rows")  # those in view (Tabulator's virtual DOM)
            first = journal["entries"][0]
            assert first["operation"] in rows.first.inner_text()
            rows.first.click()
            page.locator(".dream-diff").get_by_text(first["operation"]).first.wait_for(timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "dreams.png"), full_page=True)

            # confirm an insight with its row's button, through the API
            row = page.locator(".dream-insights .tabulator-row", has_text=INSIGHT)
            row.get_by_text("Confirm", exact=True).click()
            confirmed = wait_for(lambda: api.get(f"/insights/{insight.id}").json(),
                                 lambda i: i["status"] != "active", "the insight to change")
            assert confirmed["status"] == "confirmed"
            page.get_by_text("is now").first.wait_for(timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "dreams_confirmed.png"), full_page=True)
            browser.close()
    assert outside == []  # everything the page needs is served locally
    assert errors == [], errors


def test_in_process_the_dream_now_button_starts_a_session(tmp_path: Path) -> None:
    """Served on a data directory no server holds (``--args CONFIG``): the page's own *Dream now* button
    starts a session in the dashboard's process; it shows on the timeline and journals its operations."""
    from assistant.config import Settings
    from assistant.services import build_services

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "config.toml"
    config.write_text(f'[server]\ndata_dir = "{tmp_path / "data"}"\n[inference]\nbackend = "scripted"\n'
                      '[memory]\nembedding_backend = "hashing"\n[dream]\nmax_cycles = 2\n')
    services = build_services(Settings.load(str(config)))
    try:
        owner = str(services.keys.owner_user_id())  # the dashboard's default user
        for text in MEMORIES:
            services.memory.add(owner, text)
    finally:
        services.close()
    outside: list[str] = []
    errors: list[str] = []
    env = {"ASSISTANT_API_URL": ""}
    with panel_serve("dreams", tmp_path / "panel.log", env, ["--args", str(config)]) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page: Page = browser.new_page(viewport={"width": 1500, "height": 1300})
        loopback_only(page, outside)
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(url)
        page.get_by_text("No dream session yet").first.wait_for(timeout=30_000)
        page.get_by_role("button", name="Dream now").click()
        bars = wait_for(lambda: page.evaluate(TIMELINE_JS) or [], lambda v: any(b.startswith("completed|") for b in v),
                        "a completed session on the timeline", 120)
        assert len({b.split("|")[1] for b in bars}) == 1  # one session
        wait_for(page.locator(".dream-journal .tabulator-row").count, lambda n: n > 0, "the journal rows")
        page.screenshot(path=str(ARTIFACTS / "dreams_in_process.png"), full_page=True)
        browser.close()
    assert outside == []
    assert errors == [], errors
