"""The replay server of recorded Open-Meteo, SearXNG, DuckDuckGo and transport.rest answers on a
free loopback port, and toolboxes whose weather, web search and transit sections point at it.

Import the fixtures explicitly:
``from tests.integration.tools.replay_server import replay_server_fixture, http_toolbox_fixture  # noqa: F401``
(named ``replay_server`` and ``http_toolbox``). ``http_toolbox(web_search={"fallback": None})``
builds a Toolbox with the real httpx clients; section values given are merged over the server's
``settings_overrides()``. Every toolbox and the server are closed after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from assistant.testing.replay import ReplayServer
from assistant.tools import transit, weather, web_search
from assistant.tools.base import CapabilityDeps
from assistant.tools.catalog import Toolbox, build_toolbox

HTTP_CAPABILITIES = (weather.CAPABILITY, web_search.CAPABILITY, transit.CAPABILITY)


@pytest.fixture(name="replay_server")
def replay_server_fixture() -> Iterator[ReplayServer]:
    with ReplayServer() as server:  # binds 127.0.0.1 port 0: the kernel picks a free port
        yield server


@pytest.fixture(name="http_toolbox")
def http_toolbox_fixture(replay_server: ReplayServer, make_settings: Callable[..., Any]) -> Iterator[
        Callable[..., Toolbox]]:
    built: list[Toolbox] = []

    def make(timeout_secs: float = 5.0, **sections: dict[str, Any]) -> Toolbox:
        overrides = replay_server.settings_overrides(timeout_secs)
        for name, values in sections.items():
            overrides[name] = {**overrides.get(name, {}), **values}
        toolbox = build_toolbox(CapabilityDeps(make_settings(**overrides)), HTTP_CAPABILITIES)
        built.append(toolbox)
        return toolbox

    yield make
    for toolbox in built:
        toolbox.close()
