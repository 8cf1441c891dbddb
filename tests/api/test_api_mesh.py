"""Mesh inference over HTTP (/api/v1/mesh): 503 naming the key while disabled (before the body), a request
served by a peer that is a real app of this service (another Services with the scripted model, reached through
its TestClient's transport), the local fallback with its reason, 502/503/504 without fallback, 422 for bad
bodies, roles, and the admin's peers view (never the key)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from assistant.config.extended import MeshSettings
from assistant.llm.scripted import ScriptedChatModel
from assistant.mesh import ChatLocalEngine, Mesh
from assistant.services import Services

M = "/api/v1/mesh"
ASK = {"messages": [{"role": "user", "content": "Name a planet."}], "max_tokens": 16}


def test_disabled_is_503_naming_the_key_before_the_body(client: TestClient, auth: dict[str, str],
                                                         admin_auth: dict[str, str]) -> None:
    for method, path, body, headers in (("POST", f"{M}/inference", {"messages": "lots"}, auth),
                                        ("GET", f"{M}/peers", None, admin_auth)):
        response = client.request(method, path, json=body, headers=headers)
        assert response.status_code == 503, response.text
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "mesh.enabled = false" in error["message"]


class Node:
    """An instance with the mesh on: its client, services, the keys of its users, and its peer's state."""

    def __init__(self, client: TestClient, services: Services, auth: dict[str, dict[str, str]],
                 peer: Services | None = None):
        self.client, self.services, self.auth, self.peer = client, services, auth, peer

    def ask(self, body: dict[str, Any] | None = None, who: str = "user", **extra: Any) -> httpx.Response:
        return self.client.post(f"{M}/inference", json={**(body or ASK), **extra}, headers=self.auth[who])


def via(client: TestClient) -> httpx.MockTransport:
    """Requests to any host go to ``client``'s app (the peer instance)."""

    def handle(request: httpx.Request) -> httpx.Response:
        answer = client.request(request.method, request.url.path, content=request.read(),
                                headers={k: v for k, v in request.headers.items() if k not in ("host", "content-length")})
        return httpx.Response(answer.status_code, headers={"content-type": answer.headers.get("content-type", "")},
                              content=answer.content)

    return httpx.MockTransport(handle)


@pytest.fixture
def node(make_settings: Callable[..., Any], make_services: Callable[..., Services],
         make_client: Callable[[Services], TestClient], tmp_path: Any) -> Callable[..., Node]:
    """``node(peer_key=..., transport=..., **mesh)``: an instance whose one peer ``a`` is, unless a transport is
    given, a second instance of this service (scripted model answering "Jupiter, from the peer.")."""

    made = iter(range(100))

    def make(peer_key: str | None = None, transport: httpx.BaseTransport | None = None, **mesh: Any) -> Node:
        peer_services, n = None, next(made)
        if transport is None:
            peer_services = make_services(make_settings(server={"data_dir": str(tmp_path / f"peer{n}")}),
                                          ScriptedChatModel(["Jupiter, from the peer."]))
            key, _ = peer_services.keys.create("mesh")
            transport = via(make_client(peer_services))
            peer_key = peer_key or key
        settings = make_settings(server={"data_dir": str(tmp_path / f"node{n}")}, mesh={"enabled": True, "peers": [
            {"name": "a", "url": "http://peer-a.test", "api_key": peer_key or "k", "max_concurrency": 2}], **mesh})
        services = make_services(settings, ScriptedChatModel())
        services.mesh.close()
        services.mesh = Mesh(MeshSettings.model_validate(settings.mesh.model_dump()), ChatLocalEngine(services.chat),
                             transport=transport)
        auth = {}
        for role in ("user", "read-only", "admin"):
            key, _ = services.keys.create(role, role=role)
            auth[role] = {"Authorization": f"Bearer {key}"}
        return Node(make_client(services), services, auth, peer_services)

    return make


def test_a_peer_instance_serves_the_request(node: Callable[..., Node]) -> None:
    n = node()
    response = n.ask()
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["served_by"] == "a" and body["fallback_reason"] is None
    assert body["content"] == "Jupiter, from the peer." and body["model"] == "scripted"
    assert body["route"] == [{"peer": "a", "outcome": "served", "detail": "", "latency_ms": body["route"][0][
        "latency_ms"]}] and body["latency_ms"] > 0
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    peer_model = n.peer.chat_model
    assert [m.content for m in peer_model.calls[0][0] if m.role == "user"] == ["Name a planet."]
    assert peer_model.calls[0][1].max_tokens == 16
    assert not n.services.chat_model.calls  # the local engine was not used
    assert n.peer.memory.count(str(n.peer.keys.owner_user_id())) == 0  # nothing learned on the peer


def test_local_only_is_answered_by_the_local_engine(node: Callable[..., Node]) -> None:
    n = node()
    body = n.ask(local_only=True).json()
    assert (body["served_by"], body["fallback_reason"], body["route"]) == ("local", "local_only was requested", [])
    assert body["content"] == "You said: Name a planet." and not n.peer.chat_model.calls


def test_a_wrong_peer_key_falls_back_or_is_502(node: Callable[..., Node]) -> None:
    n = node(peer_key="ak_not-a-key-of-the-peer")
    body = n.ask().json()
    assert body["served_by"] == "local" and body["content"] == "You said: Name a planet."
    assert body["fallback_reason"] == "peer 'a' failed: HTTP 401: invalid API key"
    assert body["route"][0]["outcome"] == "failed"
    n = node(peer_key="ak_not-a-key-of-the-peer")
    response = n.ask(allow_fallback=False)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "UPSTREAM_ERROR" and error["details"]["peer"] == "a"
    again = n.ask(allow_fallback=False)  # the peer is down now: no peer available
    assert again.status_code == 503 and again.json()["error"]["message"].startswith("no peer can serve: a down")


def test_a_slow_peer_is_504_without_fallback(node: Callable[..., Node]) -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/ready":
            return httpx.Response(200)
        time.sleep(1.0)
        return httpx.Response(200, json={})

    n = node(transport=httpx.MockTransport(slow), timeout_secs=0.2)
    response = n.ask(allow_fallback=False)
    assert response.status_code == 504, response.text
    error = response.json()["error"]
    assert error["code"] == "GATEWAY_TIMEOUT" and "mesh.timeout_secs (0.2 s)" in error["message"]
    assert error["details"]["route"][0]["outcome"] == "timeout"


@pytest.mark.parametrize(("body", "field", "error"), [
    ({"messages": [{"role": "system", "content": "Be brief."}]}, "body", "at least one user message"),
    ({**ASK, "local_only": True, "allow_fallback": False}, "body", "cannot be combined with allow_fallback"),
    ({**ASK, "temperature": 3}, "temperature", "less than or equal to 2"),
    ({**ASK, "tools": []}, "tools", "Extra inputs are not permitted"),
    ({**ASK, "stream": True}, "stream", "Extra inputs are not permitted"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role", "Input should be"),
    ({"messages": []}, "messages", "at least 1 item"),
])
def test_bad_bodies_are_422(node: Callable[..., Node], body: dict[str, Any], field: str, error: str) -> None:
    response = node().ask(body)
    assert response.status_code == 422, response.text
    fields = response.json()["error"]["details"]["fields"]
    assert any(f["field"] == field and error in f["error"] for f in fields), fields


def test_an_unknown_peer_is_422(node: Callable[..., Node]) -> None:
    response = node().ask(peer="zz")
    assert response.status_code == 422
    assert response.json()["error"]["details"]["fields"] == [
        {"field": "peer", "error": "unknown peer 'zz' (mesh.peers: a)"}]


def test_roles(node: Callable[..., Node]) -> None:
    n = node()
    assert n.ask(who="read-only").status_code == 403
    assert n.client.get(f"{M}/peers", headers=n.auth["user"]).json()["error"]["details"]["required_role"] == "admin"
    assert n.client.post(f"{M}/inference", json=ASK).status_code == 401


def test_the_peers_view(node: Callable[..., Node]) -> None:
    n = node()
    before = n.client.get(f"{M}/peers", headers=n.auth["admin"])
    assert before.status_code == 200
    assert before.json()["peers"][0]["healthy"] is None and before.json()["timeout_secs"] == 60
    n.ask()
    view = n.client.get(f"{M}/peers", headers=n.auth["admin"])
    peer = view.json()["peers"][0]
    assert (peer["name"], peer["url"], peer["healthy"], peer["served"], peer["in_flight"], peer["max_concurrency"]) == (
        "a", "http://peer-a.test", True, 1, 0, 2)
    assert peer["latency_ewma_ms"] > 0 and peer["checked_at"] and peer["down_until"] is None
    assert "api_key" not in view.text and n.services.settings.mesh.peers[0].api_key not in view.text
    refreshed = n.client.get(f"{M}/peers", params={"refresh": "true"}, headers=n.auth["admin"]).json()["peers"][0]
    assert refreshed["checked_at"] >= peer["checked_at"]
