"""The replay server: routes from the index files, matching, what it received, simulated failures."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from assistant.config import Settings
from assistant.testing.replay import DEFAULT_RECORDINGS, ReplayServer, Route, load_routes


@pytest.fixture
def server():
    with ReplayServer() as replay:
        yield replay


def test_every_index_names_existing_recordings_of_the_four_services() -> None:
    routes = load_routes(DEFAULT_RECORDINGS)
    assert sorted(routes) == ["duckduckgo", "open-meteo", "searxng", "transport-rest"]
    for service_routes in routes.values():
        for route in service_routes:
            assert route.file.is_file()
            if route.content_type.startswith("application/json"):
                json.loads(route.file.read_text(encoding="utf-8"))


def test_matching_ignores_case_accents_and_spaces_and_compares_coordinates() -> None:
    route = Route("transport-rest", "GET", "/locations", Path("x"), {"query": ["München Hbf", "Munich Hbf"]})
    assert route.matches("GET", "/locations/", {"query": "munchen  HBF", "results": "1"})
    assert route.matches("GET", "/locations", {"query": "Munich Hbf"})
    assert not route.matches("GET", "/locations", {"query": "München"})
    assert not route.matches("POST", "/locations", {"query": "München Hbf"})
    assert not route.matches("GET", "/locations", {})
    near = Route("open-meteo", "GET", "/api/v1/forecast", Path("x"), {"latitude": {"near": 52.52, "within": 0.05}})
    assert near.matches("GET", "/api/v1/forecast", {"latitude": "52.52437"})
    assert not near.matches("GET", "/api/v1/forecast", {"latitude": "48.85"})
    assert not near.matches("GET", "/api/v1/forecast", {"latitude": "north"})


def test_recorded_answers_and_what_was_received(server: ReplayServer) -> None:
    berlin = httpx.get(f"{server.url}/open-meteo/geocoding/v1/search", params={"name": "berlin", "count": 1})
    assert berlin.status_code == 200 and berlin.headers["content-type"].startswith("application/json")
    assert berlin.json()["results"][0]["name"] == "Berlin"
    unknown = httpx.get(f"{server.url}/open-meteo/geocoding/v1/search", params={"name": "Atlantis"})
    assert unknown.status_code == 200 and "results" not in unknown.json()
    page = httpx.post(f"{server.url}/duckduckgo/html/", data={"q": "python asyncio tutorial"})
    assert page.status_code == 200 and "result__a" in page.text and page.headers["content-type"].startswith("text/html")
    received = server.requests
    assert [(r.method, r.path, r.service) for r in received] == [
        ("GET", "/open-meteo/geocoding/v1/search", "open-meteo"),
        ("GET", "/open-meteo/geocoding/v1/search", "open-meteo"),
        ("POST", "/duckduckgo/html/", "duckduckgo"),
    ]
    assert received[0].query == {"name": "berlin", "count": "1"}
    assert received[2].form == {"q": "python asyncio tutorial"}
    assert server.requests_to("duckduckgo") == received[2:]
    server.clear_requests()
    assert server.requests == []


def test_an_unmatched_request_gets_a_404_naming_it(server: ReplayServer) -> None:
    for path in ("/transport-rest/journeys?from=1&to=2", "/nowhere/at/all", "/searxng/search?q=x"):
        response = httpx.get(server.url + path)
        assert response.status_code == 404
        assert response.json()["reason"].startswith("no recording for GET /")


def test_simulated_failures_and_restore(server: ReplayServer) -> None:
    search = f"{server.url}/searxng/search"
    params = {"q": "python asyncio tutorial", "format": "json"}
    server.fail("searxng", status=403, body="<h1>Forbidden</h1>", content_type="text/html")
    refused = httpx.get(search, params=params)
    assert refused.status_code == 403 and refused.text == "<h1>Forbidden</h1>"
    server.fail("searxng")
    assert httpx.get(search, params=params).json() == {"error": True,
                                                        "reason": "simulated failure of searxng (HTTP 503)"}
    server.down("searxng")
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(search, params=params)
    server.delay("searxng", 5.0)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(search, params=params, timeout=0.2)
    assert httpx.get(f"{server.url}/transport-rest/locations", params={"query": "Berlin Hbf"}).status_code == 200
    server.restore("searxng")
    assert httpx.get(search, params=params).json()["query"] == "python asyncio tutorial"
    server.fail("searxng")
    server.restore()
    assert httpx.get(search, params=params).status_code == 200
    with pytest.raises(KeyError, match="no recordings for service 'bing'"):
        server.fail("bing")


def test_settings_overrides_point_every_section_here(server: ReplayServer, clean_env: None) -> None:
    settings = Settings.load(**server.settings_overrides(timeout_secs=2))
    assert settings.weather.enabled and settings.weather.base_url == f"{server.url}/open-meteo/api"
    assert settings.weather.geocoding_url == f"{server.url}/open-meteo/geocoding"
    assert settings.web_search.base_url == f"{server.url}/searxng"
    assert settings.web_search.duckduckgo_url == f"{server.url}/duckduckgo/html/"
    assert settings.transit.base_url == f"{server.url}/transport-rest" and settings.transit.timeout_secs == 2


def test_own_recordings_and_life_cycle(tmp_path: Path) -> None:
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "hello.json").write_text('{"hello": "world"}')
    (tmp_path / "echo" / "index.json").write_text(json.dumps({"routes": [
        {"method": "GET", "path": "/hello", "file": "hello.json", "status": 201}]}))
    server = ReplayServer(tmp_path).start()
    try:
        assert httpx.get(f"{server.url}/echo/hello").status_code == 201
    finally:
        server.close()
    server.close()  # a second close does nothing
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.url
    (tmp_path / "echo" / "index.json").write_text(json.dumps({"routes": [{"path": "/x", "file": "missing.json"}]}))
    with pytest.raises(FileNotFoundError, match="missing.json"):
        ReplayServer(tmp_path)
    with pytest.raises(FileNotFoundError, match="no <service>/index.json"):
        ReplayServer(tmp_path / "echo")
