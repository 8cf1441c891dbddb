"""``/mcp``: the MCP server over HTTP, authenticated with the API's keys (raw JSON-RPC through the
TestClient; tests/integration/test_mcp_real.py connects the SDK's own client to a live server)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from api.main import create_app
from assistant.services import Services

ACCEPT = {"Accept": "application/json, text/event-stream"}


def rpc(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}


def test_without_a_valid_key_it_is_401_in_the_envelope(client: TestClient) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}, {"Authorization": "Basic x"}):
        response = client.post("/mcp", json=rpc("tools/list"), headers={**ACCEPT, **headers})
        assert response.status_code == 401, response.text
        assert response.json()["error"]["code"] == "UNAUTHORIZED"
        assert response.headers["www-authenticate"] == "Bearer" and response.headers["x-request-id"]


def test_a_key_lists_the_tools_and_stores_a_memory(client: TestClient, services: Services,
                                                   auth: dict[str, str]) -> None:
    listed = client.post("/mcp", json=rpc("tools/list"), headers={**ACCEPT, **auth})
    assert listed.status_code == 200, listed.text
    names = {t["name"] for t in listed.json()["result"]["tools"]}
    assert {"memory_search", "memory_store"} <= names
    stored = client.post("/mcp", json=rpc("tools/call", {"name": "memory_store", "arguments": {"content": "Tea, "
                                                                                                     "no sugar"}}),
                         headers={**ACCEPT, **auth})
    assert stored.status_code == 200 and stored.json()["result"]["isError"] is False
    assert [m.content for m in services.memory.list(str(services.keys.owner_user_id()))] == ["Tea, no sugar"]


def test_a_read_only_key_reads_but_may_not_write(client: TestClient, services: Services,
                                                 read_only_auth: dict[str, str]) -> None:
    key = read_only_auth["Authorization"].removeprefix("Bearer ")
    headers = {**ACCEPT, "X-API-Key": key}
    listed = client.post("/mcp", json=rpc("tools/list"), headers=headers)
    assert listed.status_code == 200 and "memory_store" not in {t["name"] for t in listed.json()["result"]["tools"]}
    refused = client.post("/mcp", json=rpc("tools/call", {"name": "memory_store", "arguments": {"content": "x"}}),
                          headers=headers)
    error = refused.json()["error"]
    assert error["data"]["code"] == "FORBIDDEN" and "read-only" in error["message"]
    assert services.memory.count(str(services.keys.owner_user_id())) == 0


def test_before_the_lifespan_it_is_503_and_it_is_not_in_the_openapi_document(services: Services,
                                                                             auth: dict[str, str]) -> None:
    app = create_app(services)
    client = TestClient(app)  # not entered: no lifespan
    response = client.post("/mcp", json=rpc("tools/list"), headers={**ACCEPT, **auth})
    assert response.status_code == 503 and response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert "/mcp" not in app.openapi()["paths"]


def test_only_json_posts_are_served_and_errors_use_the_envelope(client: TestClient, auth: dict[str, str]) -> None:
    for method in ("GET", "DELETE", "PUT"):  # no server-started stream, no session: 405, never a held stream
        response = client.request(method, "/mcp", headers={**ACCEPT, **auth})
        assert response.status_code == 405 and response.headers["allow"] == "POST"
        assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    text = client.post("/mcp", content=b"tools/list", headers={**ACCEPT, **auth, "Content-Type": "text/plain"})
    assert text.status_code == 400 and text.json()["error"]["code"] == "BAD_REQUEST"
    deep = client.post("/mcp", content=b"[" * 40 + b"]" * 40, headers={**ACCEPT, **auth,
                                                                      "Content-Type": "application/json"})
    assert deep.status_code == 400 and deep.json()["error"]["code"] == "BAD_REQUEST"
    unknown = client.post("/mcp", json=rpc("no/such"), headers={**ACCEPT, **auth})  # the protocol's own error
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601
    assert client.request("GET", "/mcp").status_code == 401  # the key first, as on every protected route
