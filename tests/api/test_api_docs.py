"""The OpenAPI document and the offline Swagger UI and ReDoc pages."""

from __future__ import annotations

import re

import pytest
from fastapi.routing import APIRoute

import assistant
from api.routes import (
    agent_profiles,
    agentic,
    approvals,
    catalog,
    chat,
    cognitive,
    commands,
    distillation,
    dream,
    explain,
    federated,
    health,
    immune,
    knowledge,
    memories,
    mesh,
    metrics,
    openai_compat,
    optimization,
    precache,
    privacy,
    quarantine,
    red_team,
    sanitation,
    signals,
    snippets,
    sovereignty,
    system,
    tools,
    training,
    voice,
    webhooks,
)

DOCUMENTED = {
    "/health": {"get"},
    "/ready": {"get"},
    "/ready/all": {"get"},
    "/v1/chat": {"post"},
    "/v1/chat/stream": {"post"},
    "/v1/system/status": {"get"},
    "/v1/system/models": {"get"},
    "/metrics": {"get"},
    "/metrics/prometheus": {"get"},
    "/v1/tools": {"get"},
    "/v1/tools/runs": {"get"},
}


@pytest.fixture
def spec(client) -> dict:  # noqa: ANN001
    response = client.get("/api-docs/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_openapi_version_and_info(spec: dict) -> None:
    assert spec["openapi"] == "3.1.0"
    assert spec["info"]["version"] == assistant.__version__
    assert spec["info"]["title"]


def test_openapi_includes_every_route(spec: dict) -> None:
    for path, methods in DOCUMENTED.items():
        assert path in spec["paths"], path
        assert methods <= set(spec["paths"][path]), path
    # Every route the resource modules define is in the document, and nothing else is.
    routes = {
        r.path
        for module in (chat, health, memories, metrics, system, tools, snippets, catalog, approvals, commands,
                       agent_profiles, agentic, webhooks, voice, knowledge, dream, quarantine, sanitation,
                       openai_compat, precache, explain, cognitive, privacy, sovereignty, red_team, immune,
                       signals, mesh, distillation, federated, training, optimization)
        for r in module.router.routes
        if isinstance(r, APIRoute) and r.include_in_schema
    }
    assert routes == set(spec["paths"])


def test_openapi_documents_errors_and_streaming(spec: dict) -> None:
    chat = spec["paths"]["/v1/chat"]["post"]
    for status in ("401", "404", "422", "502", "503"):
        assert status in chat["responses"], status
        assert chat["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorEnvelope")
    stream = spec["paths"]["/v1/chat/stream"]["post"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    body = spec["components"]["schemas"]["ChatRequestBody"]
    assert body["properties"]["temperature"]["anyOf"][0]["maximum"] == 2.0
    assert body["required"] == ["message"]
    prometheus = spec["paths"]["/metrics/prometheus"]["get"]
    assert "text/plain" in prometheus["responses"]["200"]["content"]


def test_openapi_offers_both_key_headers(spec: dict) -> None:
    """`Authorization: Bearer` and `X-API-Key` are alternatives on every protected route."""
    schemes = spec["components"]["securitySchemes"]
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    assert (schemes["APIKeyHeader"]["in"], schemes["APIKeyHeader"]["name"]) == ("header", "X-API-Key")
    protected = [op for ops in spec["paths"].values() for op in ops.values() if op.get("security")]
    assert protected and all(op["security"] == [{"HTTPBearer": []}, {"APIKeyHeader": []}] for op in protected)


def urls_in(html: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)["']""", html)


@pytest.mark.parametrize("page", ["/swagger-ui/", "/redoc/"])
def test_docs_pages_use_only_local_assets(client, page: str) -> None:
    response = client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    urls = urls_in(html)
    assert urls, "the page references its assets"
    for url in urls:
        assert not url.startswith(("http://", "https://", "//")), url
        assert url.startswith("/api-docs/static/"), url
    assert not re.search(r"""<(script|link)[^>]+(src|href)\s*=\s*["'](https?:)?//""", html)
    assert "/api-docs/openapi.json" in html
    for url in urls:
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 0, url


def test_assets_are_served(client) -> None:
    for name in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"):
        response = client.get(f"/api-docs/static/{name}")
        assert response.status_code == 200, name
        assert len(response.content) > 1000 or name == "favicon.png", name
        assert len(response.content) > 0


def test_redoc_bundle_has_no_cdn_logo(client) -> None:
    bundle = client.get("/api-docs/static/redoc.standalone.js")
    assert bundle.status_code == 200
    assert bundle.headers["content-type"].startswith("text/javascript")
    assert "cdn.redoc.ly" not in bundle.text


def test_docs_need_no_key(client) -> None:
    for path in ("/api-docs/openapi.json", "/swagger-ui/", "/redoc/"):
        assert client.get(path).status_code == 200, path


def test_docs_can_be_disabled(make_settings, make_services, make_client) -> None:
    client = make_client(make_services(make_settings(server={"openapi_enabled": False})))
    for path in ("/api-docs/openapi.json", "/swagger-ui/", "/redoc/", "/docs", "/redoc"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "NOT_FOUND"
    assert client.get("/health").status_code == 200
