"""search_web with fake providers: the fallback chain, DuckDuckGo's HTML and redirect links, settings."""

from __future__ import annotations

import pytest

from assistant.errors import ConfigError
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.catalog import build_toolbox
from assistant.tools.web_search import (
    CAPABILITY,
    SNIPPET_CHARS,
    DuckDuckGoSearch,
    SearchChain,
    SearchResult,
    SearxngSearch,
    decode_result_url,
    parse_duckduckgo_html,
    provider_ids,
    search_web,
)


class FakeSearch:
    """A WebSearchProvider that answers with numbered results, or fails with ``error``."""

    def __init__(self, name: str, error: str | None = None, count: int = 10):
        self.name, self.error, self.count = name, error, count
        self.queries: list[tuple[str, int]] = []

    def search(self, query: str, limit: int) -> list[SearchResult]:
        self.queries.append((query, limit))
        if self.error:
            raise ToolError(self.error)
        return [SearchResult(f"{self.name} {i}", f"https://{self.name}.example/{i}", f"about {query}")
                for i in range(min(limit, self.count))]


def ctx(*providers: FakeSearch, max_results: int = 5) -> ToolContext:
    return ToolContext("u1", {"web_search": SearchChain(providers, max_results)})


def test_the_first_provider_that_answers_wins() -> None:
    primary, fallback = FakeSearch("searxng"), FakeSearch("duckduckgo")
    result = search_web(ctx(primary, fallback), {"query": "  open   source weather ", "limit": 2})
    assert result == {"source": "searxng", "results": [
        {"title": "searxng 0", "url": "https://searxng.example/0", "snippet": "about open source weather"},
        {"title": "searxng 1", "url": "https://searxng.example/1", "snippet": "about open source weather"},
    ]}
    assert primary.queries == [("open source weather", 2)] and fallback.queries == []


def test_a_failing_provider_falls_through_to_the_next() -> None:
    fallback = FakeSearch("duckduckgo")
    result = search_web(ctx(FakeSearch("searxng", error="SearXNG answered HTTP 403"), fallback), {"query": "x"})
    assert result["source"] == "duckduckgo" and len(result["results"]) == 5


def test_all_providers_failing_names_every_cause() -> None:
    chain = ctx(FakeSearch("searxng", error="SearXNG did not answer within 10 s"),
                FakeSearch("duckduckgo", error="DuckDuckGo answered HTTP 503"))
    with pytest.raises(ToolError) as failure:
        search_web(chain, {"query": "x"})
    message = str(failure.value)
    assert message.startswith("web search failed")
    assert "searxng: SearXNG did not answer within 10 s" in message
    assert "duckduckgo: DuckDuckGo answered HTTP 503" in message


def test_limit_is_capped_by_max_results_and_snippets_are_short() -> None:
    provider = FakeSearch("searxng")
    search_web(ctx(provider, max_results=3), {"query": "x", "limit": 20})
    assert provider.queries == [("x", 3)]
    long = SearchResult("t", "https://a.example", "word " * 200).as_dict()
    assert len(long["snippet"]) == SNIPPET_CHARS and long["snippet"].endswith("…")


@pytest.mark.parametrize("arguments", [{"query": ""}, {"query": "x", "limit": 0}, {"query": "x", "limit": 21}, {}])
def test_bad_arguments_are_refused(arguments: dict) -> None:
    with pytest.raises(ToolError, match="invalid arguments for search_web"):
        search_web(ctx(FakeSearch("searxng")), arguments)
    with pytest.raises(ToolError, match="query must not be blank"):
        search_web(ctx(FakeSearch("searxng")), {"query": "   "})


def test_duckduckgo_redirect_links_are_decoded() -> None:
    href = "//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fa%20b%3Fx%3D1%26y%3D%C3%A4&rut=abc123"
    assert decode_result_url(href) == "https://example.com/a b?x=1&y=ä"
    assert decode_result_url("/l/?uddg=https%3A%2F%2Fexample.org%2F&rut=1") == "https://example.org/"
    assert decode_result_url("https://duckduckgo.com/l/?uddg=http%3A%2F%2Fold.example%2F") == "http://old.example/"
    assert decode_result_url("https://docs.python.org/3/") == "https://docs.python.org/3/"
    assert decode_result_url("//duckduckgo.com/l/?rut=abc") == "https://duckduckgo.com/l/?rut=abc"


PAGE = """<html><body><div id="links" class="results">
<div class="result results_links results_links_deep result--ad">
  <h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.example">Buy</a></h2>
  <a class="result__snippet" href="https://duckduckgo.com/y.js?ad_domain=ads.example">An ad.</a>
</div>
<div class="result results_links results_links_deep web-result ">
  <h2 class="result__title"><a rel="nofollow" class="result__a"
     href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fopen-meteo.com%2F&amp;rut=f00">Free <b>Weather</b> API</a></h2>
  <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">Open-Meteo &amp; friends:
     <b>no</b>   key needed.</a>
</div>
<div class="result results_links results_links_deep web-result ">
  <h2 class="result__title"><a class="result__a" href="https://example.org/plain">Plain link</a></h2>
</div>
</div></body></html>"""


def test_duckduckgo_html_results_without_ads() -> None:
    assert parse_duckduckgo_html(PAGE) == [
        SearchResult("Free Weather API", "https://open-meteo.com/", "Open-Meteo & friends: no key needed."),
        SearchResult("Plain link", "https://example.org/plain", ""),
    ]
    assert parse_duckduckgo_html('<div class="no-results">No results.</div>') == []


def test_providers_tried_follow_the_settings(make_settings) -> None:
    def section(**values):
        return make_settings(web_search={"enabled": True, **values}).web_search

    assert provider_ids(section()) == ["duckduckgo"]  # no SearXNG instance configured
    assert provider_ids(section(base_url="http://127.0.0.1:8888")) == ["searxng", "duckduckgo"]
    assert provider_ids(section(base_url="http://127.0.0.1:8888", fallback=None)) == ["searxng"]
    assert provider_ids(section(fallback=None)) == []
    assert provider_ids(section(backend="duckduckgo", fallback=None)) == ["duckduckgo"]


def test_capability_is_registered_only_when_configured(make_settings) -> None:
    assert not CAPABILITY.configured(make_settings())
    assert not CAPABILITY.configured(make_settings(web_search={"enabled": True, "fallback": None}))
    toolbox = build_toolbox(CapabilityDeps(make_settings(web_search={
        "enabled": True, "base_url": "http://127.0.0.1:8888"})), [CAPABILITY])
    assert toolbox.registry.names() == ["search_web"]
    chain = toolbox.backends["web_search"]
    assert [type(p) for p in chain.providers] == [SearxngSearch, DuckDuckGoSearch]
    toolbox.close()
    with pytest.raises(ConfigError, match="web_search.fallback: unknown backend 'bing'"):
        build_toolbox(CapabilityDeps(make_settings(web_search={"enabled": True, "fallback": "bing"})), [CAPABILITY])


def test_a_chain_needs_a_provider() -> None:
    with pytest.raises(ValueError):
        SearchChain([])
