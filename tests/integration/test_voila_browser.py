"""``assistant voila`` in Chromium: notebooks 02 (memory scoring and decay) and 05 (dream mode) as Voila apps.

One ``assistant voila`` (Voila on 127.0.0.1, the code hidden) for the module; its tree lists exactly the
two apps, and each renders to the end without a kernel error: Voila shows "There was an error when
executing cell" (or, with tracebacks on, a Traceback) when a cell raises; here the page must show
neither, must show outputs, and must not show the notebooks' code. Each app runs its notebook in a
fresh kernel as nbval does (the LoCoMo slice and the sentence embedder: minutes on 2 shared cores).
Nothing is fetched from outside loopback but Font Awesome's stylesheets, which Voila's lab template links
from a CDN (``assistant voila`` has Panel and Bokeh inline their JavaScript in the kernels' output).
Screenshots: ``tests/artifacts/voila_<notebook>.png``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser

from api.cli_workbench import VOILA_APPS
from tests.integration.browser import ARTIFACTS, ROOT, TEXT_JS, chromium, loopback_only, started, wait_for
from tests.integration.support import free_port

pytestmark = pytest.mark.integration
RENDER_MS = 300_000  # the page itself
RENDER_S = 600.0  # the notebook run to its last cell
KERNEL_ERROR = re.compile(r"There was an error when executing cell|Traceback \(most recent call last\)|"
                          r"\b[A-Z]\w*Error: ")


@pytest.fixture(scope="module")
def voila(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log_path = tmp_path_factory.mktemp("voila") / "voila.log"
    # `assistant voila` execs into voila: the process started is the one stopped
    with started(["-m", "api.cli", "voila", "--port", str(port)], log_path, {}, f"http://127.0.0.1:{port}/", 120) as url:
        yield url.rstrip("/")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


def test_the_tree_lists_the_two_apps(voila: str, browser: Browser) -> None:
    page = browser.new_page()
    try:
        page.goto(voila + "/")
        for name in VOILA_APPS:
            page.get_by_text(name).first.wait_for(timeout=60_000)
        shown = page.evaluate(TEXT_JS)
    finally:
        page.close()
    assert "01_quickstart" not in shown and "07_knowledge_graph" not in shown


def first_code_line(notebook: str) -> str:
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    code = next(c for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip())
    return next(line for line in "".join(code["source"]).splitlines() if line.strip())


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("notebook", VOILA_APPS)
def test_each_app_renders_without_a_kernel_error(notebook: str, voila: str, browser: Browser) -> None:
    outside: list[str] = []
    page = browser.new_page(viewport={"width": 1400, "height": 1200})
    loopback_only(page, outside)
    try:
        # opened once: an @interact cell used to hang Voila at random (dashboards/voila_server.py fixes it)
        page.goto(f"{voila}/voila/render/{notebook}", timeout=RENDER_MS)
        # "Executing n of m" until the last cell has run, then the outputs replace the spinner
        wait_for(lambda: page.evaluate(TEXT_JS), lambda text: "Executing" not in text and len(text) > 200,
                 f"{notebook} to run", RENDER_S)
        page.wait_for_load_state("networkidle")
        shown = page.evaluate(TEXT_JS)
        page.screenshot(path=str(ARTIFACTS / f"voila_{notebook.removesuffix('.ipynb')}.png"), full_page=True)
        assert not KERNEL_ERROR.search(shown), KERNEL_ERROR.search(shown)
        assert page.locator(".jp-OutputArea-output").count() > 0, "no output rendered"
        assert first_code_line(notebook) not in shown  # the code is hidden
    finally:
        page.close()
    # Voila's own lab template links Font Awesome's stylesheets from jsDelivr (icons only; blocked here, the
    # app renders without them); everything else, Panel's and Bokeh's JavaScript included, is served locally
    assert [u for u in outside if "/@fortawesome/fontawesome-free@" not in u] == [], outside
