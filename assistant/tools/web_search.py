"""search_web: a web search through SearXNG, with DuckDuckGo's HTML page as the fallback.

A :class:`WebSearchProvider` answers one query with titles, URLs and snippets. SearXNG
(``SearxngSearch``) is the self-hosted choice: its ``/search?format=json`` API aggregates many
engines, but instances answer 403 unless ``json`` is listed under ``search.formats``, public ones
rate-limit, and any instance may be down. DuckDuckGo (``DuckDuckGoSearch``) has no free JSON API,
so its plain HTML page (``html.duckduckgo.com``) is parsed with BeautifulSoup: results are
``a.result__a`` links, often ``//duckduckgo.com/l/?uddg=<encoded>`` redirects whose real URL is
decoded; ads are left out.

:class:`SearchChain` tries the configured providers in order (the backend, then the fallback) and
reports which one answered; when all fail, the ToolError names every cause.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from pydantic import Field

from assistant.errors import ConfigError
from assistant.tools.base import Capability, CapabilityDeps, ToolContext, ToolError, pick_backend, tool
from assistant.tools.webclient import ServiceClient, ServiceError

SNIPPET_CHARS = 300  # five results stay well under the loop's 4,000-character result limit


@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str

    def as_dict(self) -> dict[str, str]:
        snippet = self.snippet if len(self.snippet) <= SNIPPET_CHARS else self.snippet[:SNIPPET_CHARS - 1] + "…"
        return {"title": self.title, "url": self.url, "snippet": snippet}


class WebSearchProvider(Protocol):
    name: str  # reported as the result's ``source``

    def search(self, query: str, limit: int) -> list[SearchResult]: ...


def _clean(text: str | None) -> str:
    return " ".join((text or "").split())


# --- SearXNG -----------------------------------------------------------------------------------


class SearxngSearch:
    """A SearXNG instance's JSON API (https://docs.searxng.org/dev/search_api.html)."""

    name = "searxng"

    def __init__(self, base_url: str, timeout_secs: float = 10):
        self.base_url = base_url.rstrip("/")
        self.http = ServiceClient("SearXNG", timeout_secs)

    def search(self, query: str, limit: int) -> list[SearchResult]:
        try:
            data = self.http.get_json(f"{self.base_url}/search", {"q": query, "format": "json"})
        except ServiceError as exc:
            if exc.status == 403:
                raise ServiceError(f"{exc} (is 'json' listed under search.formats in its settings.yml?)", 403) from None
            raise
        if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
            raise ToolError("SearXNG sent an answer without a results list")
        results = [SearchResult(_clean(r.get("title")) or r["url"], r["url"], _clean(r.get("content")))
                   for r in data.get("results", []) if isinstance(r, dict) and r.get("url")]
        if not results and data.get("unresponsive_engines"):
            failed = ", ".join(" ".join(map(str, e)) if isinstance(e, list) else str(e)
                               for e in data["unresponsive_engines"])
            raise ToolError(f"SearXNG found nothing because its engines failed ({failed})")
        return results[:limit]

    def close(self) -> None:
        self.http.close()


# --- DuckDuckGo HTML ---------------------------------------------------------------------------


def decode_result_url(href: str) -> str:
    """The real target of a DuckDuckGo result link (``//duckduckgo.com/l/?uddg=<encoded>&rut=…``)."""
    url = f"https:{href}" if href.startswith("//") else href
    parts = urlsplit(url)
    if (not parts.netloc or parts.netloc.endswith("duckduckgo.com")) and parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target and target[0]:
            return target[0]  # parse_qs has already percent-decoded it
    return url


def _is_ad(result: Any, url: str) -> bool:
    classes = result.get("class") or []
    parts = urlsplit(url)
    return "result--ad" in classes or (parts.netloc.endswith("duckduckgo.com") and parts.path == "/y.js")


def parse_duckduckgo_html(html: str) -> list[SearchResult]:
    """The organic results of a DuckDuckGo HTML results page, in page order."""
    from bs4 import BeautifulSoup  # only this backend needs it

    soup = BeautifulSoup(html, "html.parser")
    results = []
    for block in soup.select("div.result"):
        link = block.select_one("a.result__a")
        if link is None or not link.get("href"):
            continue
        url = decode_result_url(str(link["href"]))
        if _is_ad(block, url):
            continue
        snippet = block.select_one(".result__snippet")
        results.append(SearchResult(_clean(link.get_text()), url, _clean(snippet.get_text() if snippet else "")))
    return results


class DuckDuckGoSearch:
    """DuckDuckGo's JavaScript-free results page, asked with a form POST as its own search box does."""

    name = "duckduckgo"

    def __init__(self, url: str = "https://html.duckduckgo.com/html/", timeout_secs: float = 10):
        self.url = url
        self.http = ServiceClient("DuckDuckGo", timeout_secs)

    def search(self, query: str, limit: int) -> list[SearchResult]:
        response = self.http.post_form(self.url, {"q": query, "b": ""})
        # A bot check comes back as 202 with an "anomaly" page instead of results.
        if response.status_code == 202 or "anomaly-modal" in response.text:
            raise ToolError("DuckDuckGo refused the query with a bot check")
        return parse_duckduckgo_html(response.text)[:limit]

    def close(self) -> None:
        self.http.close()


BACKENDS: dict[str, Callable[..., WebSearchProvider]] = {
    "searxng": lambda s: SearxngSearch(s.base_url, s.timeout_secs),
    "duckduckgo": lambda s: DuckDuckGoSearch(s.duckduckgo_url, s.timeout_secs),
}


# --- the chain ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchOutcome:
    source: str
    results: list[SearchResult]


class SearchChain:
    """The providers in order; the first that answers wins, failures fall through to the next."""

    def __init__(self, providers: Sequence[WebSearchProvider], max_results: int = 5):
        if not providers:
            raise ValueError("a search chain needs at least one provider")
        self.providers = tuple(providers)
        self.max_results = max_results

    def search(self, query: str, limit: int) -> SearchOutcome:
        causes = []
        for provider in self.providers:
            try:
                return SearchOutcome(provider.name, provider.search(query, min(limit, self.max_results)))
            except ToolError as exc:
                causes.append(f"{provider.name}: {exc}")
        raise ToolError("web search failed — " + "; ".join(causes))

    def close(self) -> None:
        for provider in self.providers:
            close = getattr(provider, "close", None)
            if callable(close):
                close()


def provider_ids(section: Any) -> list[str]:
    """Backend ids in the order they are tried: the backend (SearXNG only with a base_url), then the fallback."""
    ids = [] if section.backend == "searxng" and not section.base_url else [section.backend]
    if section.fallback and section.fallback not in ids:
        ids.append(section.fallback)
    return ids


def _create(deps: CapabilityDeps) -> SearchChain:
    section = deps.settings.web_search
    if section.fallback and section.fallback not in BACKENDS:
        raise ConfigError(f"web_search.fallback: unknown backend {section.fallback!r}; "
                          f"known: {', '.join(sorted(BACKENDS))}")
    providers = [pick_backend("web_search", BACKENDS, backend_id)(section) for backend_id in provider_ids(section)]
    return SearchChain(providers, section.max_results)


# --- the tool ----------------------------------------------------------------------------------


@tool("web_search", icon="🔍")
def search_web(
    ctx: ToolContext,
    query: Annotated[str, Field(min_length=1, max_length=400, description="What to search the web for.")],
    limit: Annotated[int, Field(ge=1, le=20, description="How many results at most.")] = 5,
) -> dict:
    """Search the web; returns titles, URLs and short snippets."""
    chain: SearchChain = ctx.backend("web_search")
    text = " ".join(query.split())
    if not text:
        raise ToolError("query must not be blank")
    outcome = chain.search(text, limit)
    return {"results": [r.as_dict() for r in outcome.results], "source": outcome.source}


WEB_SEARCH_TOOLS = (search_web,)


def _configured(settings: Any) -> bool:
    section = settings.web_search
    return section.enabled and bool(provider_ids(section))


CAPABILITY = Capability(
    "web_search", WEB_SEARCH_TOOLS, configured=_configured, create=_create,
    description="web search (SearXNG, DuckDuckGo as the fallback)",
)
