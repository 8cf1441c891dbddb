"""Swagger UI and ReDoc render in a real browser with no request leaving the machine."""

from __future__ import annotations

import shutil
from urllib.parse import urlparse

import pytest
from playwright.sync_api import sync_playwright

from tests.integration.support import serve

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture
def live(tmp_path):
    server, _ = serve(tmp_path, inference={"backend": "scripted"})
    with server:
        yield server.base_url


@pytest.mark.parametrize(("path", "selector"), [("/swagger-ui/", ".opblock-summary-path"), ("/redoc/", "[role=menuitem]")])
def test_docs_render_offline(live, path, selector, tmp_path):
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page()

        def guard(route):
            host = urlparse(route.request.url).hostname
            if host not in ("127.0.0.1", "localhost"):
                outside.append(route.request.url)
                route.abort()
            else:
                route.continue_()

        page.route("**/*", guard)
        page.goto(live + path)
        page.wait_for_selector(selector, timeout=30_000)
        text = page.inner_text("body")
        page.screenshot(path=str(tmp_path / "docs.png"))
        browser.close()
    assert "/v1/chat" in text
    assert outside == []
