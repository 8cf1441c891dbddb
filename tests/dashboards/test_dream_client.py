"""The HTTP dream client against a recorded transport: paths, the Bearer key, filters, pages and the
error envelope. (Against the real routes: tests/integration/test_workbench_browser.py.)"""

from __future__ import annotations

import json

import httpx
import pytest

from dashboards.client import ApiUnreachable, ClientError
from dashboards.dream_client import HttpDreamClient

SESSION = {"id": "s1", "status": "running", "current_cycle": 1, "total_cycles": 5, "phase": "nrem"}


def recorded(answers: dict[tuple[str, str], httpx.Response]) -> tuple[HttpDreamClient, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers.get((request.method, request.url.path), httpx.Response(404, json={
            "error": {"code": "NOT_FOUND", "message": f"{request.url.path} not found"}}))

    return HttpDreamClient("http://api.test/", "k-123", transport=httpx.MockTransport(handle)), seen


def test_reads_and_actions_use_the_dream_routes_with_the_key() -> None:
    client, seen = recorded({
        ("GET", "/v1/dream/status"): httpx.Response(200, json={"session": SESSION}),
        ("GET", "/v1/dream/sessions"): httpx.Response(200, json={"sessions": [SESSION], "total": 1}),
        ("GET", "/v1/dream/sessions/s1/journal"): httpx.Response(200, json={"entries": [], "total": 0}),
        ("GET", "/v1/dream/insights"): httpx.Response(200, json={"insights": [], "total": 0}),
        ("POST", "/v1/dream/insights/i1/confirm"): httpx.Response(200, json={"id": "i1", "status": "confirmed"}),
        ("POST", "/v1/dream/trigger"): httpx.Response(201, json=SESSION),
    })
    assert client.status()["session"]["id"] == "s1"
    assert client.sessions(5, 10) == {"sessions": [SESSION], "total": 1}
    assert client.journal("s1", cycle=2, phase="rem", operation="EdgePruned")["entries"] == []
    assert client.insights(status="active", insight_type="pattern")["total"] == 0
    assert client.confirm("i1")["status"] == "confirmed"
    assert client.trigger()["id"] == "s1"
    assert all(r.headers["Authorization"] == "Bearer k-123" for r in seen)
    assert dict(seen[1].url.params) == {"limit": "5", "offset": "10"}
    assert dict(seen[2].url.params) == {"cycle": "2", "phase": "rem", "operation": "EdgePruned", "limit": "500",
                                        "offset": "0"}
    assert dict(seen[3].url.params) == {"type": "pattern", "status": "active", "limit": "100", "offset": "0"}
    assert json.loads(seen[-1].content) == {}
    client.close()


def test_a_bare_list_or_items_page_is_read_too() -> None:
    client, _ = recorded({("GET", "/v1/dream/sessions"): httpx.Response(200, json={"items": [SESSION], "total": 7}),
                          ("GET", "/v1/dream/insights"): httpx.Response(200, json=[{"id": "i1"}])})
    assert client.sessions()["sessions"] == [SESSION] and client.sessions()["total"] == 7
    assert client.insights() == {"insights": [{"id": "i1"}], "total": 1}


def test_errors_carry_the_envelope_message_and_status() -> None:
    client, _ = recorded({("POST", "/v1/dream/insights/i1/confirm"): httpx.Response(409, json={
        "error": {"code": "CONFLICT", "message": "cannot confirm: the insight is dismissed"}})})
    with pytest.raises(ClientError, match="the insight is dismissed") as caught:
        client.confirm("i1")
    assert caught.value.status == 409
    with pytest.raises(ClientError, match="not found") as missing:
        client.session("nope")
    assert missing.value.status == 404


def test_an_unreachable_server_is_a_client_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    client = HttpDreamClient("http://api.test", "k", transport=httpx.MockTransport(refuse))
    with pytest.raises(ApiUnreachable, match="did not answer"):
        client.status()
