"""``assistant voila`` in Chromium: notebooks 02 (memory scoring and decay) and 05 (dream mode) as Voila apps.

One ``assistant voila`` (Voila on 127.0.0.1, the code hidden) for the module; its tree lists exactly the
two apps, and each renders to the end without a kernel error: Voila shows "There was an error when
executing cell" (or, with tracebacks on, a Traceback) when a cell raises; here the page must show
neither, must show outputs, and must not show the notebooks' code. Each app runs its notebook in a
fresh kernel as nbval does (the LoCoMo slice and the sentence embedder: minutes on 2 shared cores).
Screenshots: ``tests/artifacts/voila_<notebook>.png``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, sync_playwright

from api.cli_workbench import VOILA_APPS
from tests.integration.browser import ARTIFACTS, CHROMIUM, FLAGS, ROOT, TEXT_JS, loopback_only
from tests.integration.support import free_port

pytestmark = pytest.mark.integration
RENDER_MS = 1_800_000  # a notebook runs whole before its page has loaded
KERNEL_ERROR = re.compile(r"There was an error when executing cell|Traceback \(most recent call last\)|"
                          r"\b[A-Z]\w*Error: ")


@pytest.fixture(scope="module")
def voila(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log_path = tmp_path_factory.mktemp("voila") / "voila.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log_path.open("wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "api.cli", "voila", "--port", str(port)], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)  # execs into voila: the same process
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(url + "/", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert server.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "voila did not start"
                time.sleep(0.5)
            yield url
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


def test_the_tree_lists_the_two_apps(voila: str) -> None:
    tree = httpx.get(voila + "/", timeout=30).text
    assert all(name in tree for name in VOILA_APPS)
    assert "01_quickstart" not in tree and "07_knowledge_graph" not in tree


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("notebook", VOILA_APPS)
def test_each_app_renders_without_a_kernel_error(notebook: str, voila: str, browser: Browser) -> None:
    outside: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    loopback_only(page, outside)
    try:
        page.goto(f"{voila}/voila/render/{notebook}", timeout=RENDER_MS)
        page.wait_for_load_state("load", timeout=RENDER_MS)
        shown = page.evaluate(TEXT_JS)
        page.screenshot(path=str(ARTIFACTS / f"voila_{notebook.removesuffix('.ipynb')}.png"), full_page=True)
        assert not KERNEL_ERROR.search(shown), KERNEL_ERROR.search(shown)
        assert page.locator(".jp-OutputArea-output").count() > 0, "no output rendered"
        assert page.locator(".jp-InputArea, .jp-CodeMirrorEditor").count() == 0  # the code is hidden
    finally:
        page.close()
    assert outside == []
