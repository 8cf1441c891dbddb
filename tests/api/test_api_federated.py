"""The federated routes over two instances: A's TestClient, and B's as A's peer (A's rounds reach B's
route through B's TestClient). Adapters are synthetic peft directories (StaticAdapters); the privacy
budget, the keys and the storage are real."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from assistant.errors import ConfigError
from assistant.learning.federated_identity import load_identity
from assistant.learning.federated_transport import SYNC_PATH, PeerAnswer
from assistant.services import build_services
from assistant.testing.federated import StaticAdapters, write_peft_adapter

SYNC, STATUS, IDENTITY = "/api/v1/federated/sync", "/api/v1/federated/status", "/api/v1/federated/identity"


class ClientTransport:
    """Delivers a round's body to a peer's TestClient, as HTTP would; records every body."""

    def __init__(self, clients: dict[str, TestClient]) -> None:
        self.clients = clients
        self.sent: list[bytes] = []

    def exchange(self, url: str, api_key: str, body: bytes, *, timeout: float, max_bytes: int) -> PeerAnswer:
        self.sent.append(body)
        response = self.clients[url].post(SYNC_PATH, content=body, headers={
            "Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
        return PeerAnswer(response.status_code, response.content)


class Pair:
    def __init__(self, tmp_path: Path, make_settings, make_services, make_client, a: dict | None = None,  # noqa: ANN001
                 b: dict | None = None, privacy_a: dict | None = None) -> None:
        ids = {n: load_identity(tmp_path / f"{n}.key") for n in "ab"}
        self.users = {"a": str(uuid4()), "b": str(uuid4())}
        self.keys = {"a": "key-of-user-a-on-a", "b": "key-of-user-b-on-b"}
        self.services, self.clients, self.adapters = {}, {}, {}
        for name, other, extra in (("a", "b", a or {}), ("b", "a", b or {})):
            settings = make_settings(
                server={"data_dir": str(tmp_path / name)},
                security={"api_keys": {self.keys[name]: self.users[name]}, "rate_limit_enabled": False},
                privacy=privacy_a if name == "a" and privacy_a else {},
                federated={"enabled": True, "key_path": str(tmp_path / f"{name}.key"), **extra, "peers": [{
                    "name": other, "url": f"http://{other}.test", "api_key": self.keys[other],
                    "public_key": ids[other].public_key_b64, "user_id": self.users[name]}]})
            services = make_services(settings)
            self.services[name], self.clients[name] = services, make_client(services)
            self.adapters[name] = services.federated.adapters = StaticAdapters()
        self.transport = ClientTransport({"http://b.test": self.clients["b"], "http://a.test": self.clients["a"]})
        for services in self.services.values():
            services.federated.transport = self.transport
        self.tmp = tmp_path

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[name]}"}

    def give(self, name: str, samples: int, **adapter: object) -> None:
        self.adapters[name].set_active(self.users[name], write_peft_adapter(self.tmp / f"w{name}", **adapter), samples)

    def post(self, name: str, body: object = None, **kwargs: object):  # noqa: ANN201
        if body is None:
            return self.clients[name].post(SYNC, headers=self.auth(name), **kwargs)
        return self.clients[name].post(SYNC, json=body, headers=self.auth(name), **kwargs)

    def status(self, name: str) -> dict:
        response = self.clients[name].get(STATUS, headers=self.auth(name))
        assert response.status_code == 200, response.text
        return response.json()


@pytest.fixture
def pair(tmp_path, make_settings, make_services, make_client):  # noqa: ANN001, ANN201
    return lambda **kw: Pair(tmp_path, make_settings, make_services, make_client, **kw)


def test_disabled_is_503_naming_the_key_before_the_body(client: TestClient, auth: dict) -> None:
    for method, path, body in (("POST", SYNC, b"{not json"), ("GET", STATUS, None), ("GET", IDENTITY, None)):
        response = client.request(method, path, content=body, headers=auth)
        assert response.status_code == 503, path
        assert "federated.enabled = false" in response.json()["error"]["message"]


def test_enabled_without_the_privacy_budget_refuses_to_start(make_settings) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError, match="federated.enabled needs privacy.enabled"):
        build_services(make_settings(federated={"enabled": True}, privacy={"enabled": False}))


def test_identity_is_the_key_file_made_at_first_use(pair) -> None:  # noqa: ANN001
    p = pair()
    response = p.clients["a"].get(IDENTITY, headers=p.auth("a"))
    assert response.status_code == 200
    found = response.json()
    key = load_identity(p.tmp / "a.key")
    assert (found["public_key"], found["instance_id"], found["algorithm"]) == (
        key.public_key_b64, key.instance_id, "Ed25519")
    assert bytes.fromhex(found["public_key_hex"]) == key.public_key
    assert stat.S_IMODE((p.tmp / "a.key").stat().st_mode) == 0o600


def test_a_round_over_http(pair) -> None:  # noqa: ANN001
    p = pair()
    p.give("a", 30, fill=0.01)
    p.give("b", 10, fill=0.03)
    response = p.post("a", {})
    assert response.status_code == 200, response.text
    found = response.json()
    assert (found["status"], found["role"], found["round"], found["samples"], found["total_samples"]) == (
        "completed", "initiator", 1, 30, 40)
    assert found["peers"][0] | {"error": None} == {"name": "b", "instance_id": load_identity(p.tmp / "b.key").instance_id,
                                                   "status": "completed", "http_status": 200, "samples": 10,
                                                   "error": None}
    assert found["adapter"]["run_id"] == p.adapters["a"].submitted[0].id and found["epsilon"] == 0.5
    (theirs,) = p.status("b")["rounds"]
    assert (theirs["role"], theirs["round"], theirs["total_samples"], theirs["peers"][0]["name"]) == (
        "responder", 1, 40, "a")
    assert len(p.adapters["b"].submitted) == 1
    ledger = p.clients["a"].get("/api/v1/privacy/budget", headers=p.auth("a")).json()["ledger"]
    assert [(e["query"], e["mechanism"], e["parameters"]["sensitivity"]) for e in ledger] == [
        ("federated_update", "gaussian", 16.0)]
    status = p.status("a")
    assert status["peers"] == [{"name": "b", "url": "http://b.test", "instance_id": found["peers"][0]["instance_id"]}]
    assert "key-of" not in json.dumps(status)  # peers' keys are never shown
    assert p.post("a", None).json()["round"] == 2  # an empty body starts a round too


def test_a_tampered_payload_is_401_and_logged(pair) -> None:  # noqa: ANN001
    p = pair()
    p.give("a", 1)
    p.give("b", 1)
    assert p.post("a", {"peers": ["b"]}).status_code == 200
    body = json.loads(p.transport.sent[-1])
    payload = bytearray(base64.b64decode(body["envelope"]["payload"]))
    payload[10] ^= 0x40
    body["envelope"]["payload"] = base64.b64encode(bytes(payload)).decode()
    body["envelope"]["round"] = 2
    response = p.clients["b"].post(SYNC, json=body, headers=p.auth("b"))
    assert response.status_code == 401
    assert response.json()["error"]["details"]["reason"] == "bad_signature"
    rejection = p.status("b")["rejections"][0]
    assert (rejection["direction"], rejection["peer"], rejection["reason"], rejection["status"], rejection["round"]) == (
        "inbound", "a", "bad_signature", 401, 2)
    assert len(p.adapters["b"].submitted) == 1  # the first, genuine round only


def test_a_replay_is_409(pair) -> None:  # noqa: ANN001
    p = pair()
    p.give("a", 1)
    p.give("b", 1)
    assert p.post("a").status_code == 200
    response = p.clients["b"].post(SYNC, content=p.transport.sent[-1], headers=p.auth("b"))
    assert response.status_code == 409 and response.json()["error"]["details"]["reason"] == "replayed"


def test_an_oversize_body_is_413_naming_the_key(pair) -> None:  # noqa: ANN001
    p = pair(b={"max_payload_bytes": 4096})
    response = p.clients["b"].post(SYNC, content=b'{"envelope": "' + b"A" * 5000 + b'"}', headers=p.auth("b"))
    assert response.status_code == 413
    assert "4096 bytes (federated.max_payload_bytes)" in response.json()["error"]["message"]
    p.give("a", 1, hidden=32)  # 832 values: about 4.5 KB of base64, under A's 16 MiB, over B's 4 KiB
    p.give("b", 1, hidden=32)
    response = p.post("a")
    assert response.status_code == 502 and response.json()["error"]["details"]["peers"][0]["http_status"] == 413
    assert p.adapters["b"].submitted == [] and p.adapters["a"].submitted == []


def test_a_body_over_the_server_limit_reaches_the_route(pair) -> None:  # noqa: ANN001
    """Sync bodies are bounded by federated.max_payload_bytes, not server.max_body_bytes (1 MiB)."""
    p = pair()
    p.give("b", 1)
    big = json.dumps({"envelope": {"payload": "A" * 1_200_000}, "signature": "AA=="}).encode()
    response = p.clients["b"].post(SYNC, content=big, headers=p.auth("b"))
    assert response.status_code == 400 and response.json()["error"]["details"]["reason"] == "malformed"


def test_bad_round_requests(pair) -> None:  # noqa: ANN001
    p = pair()
    cases = [({"peers": "b"}, 422, "peers"), ({"peers": ["b", "zz"]}, 422, "peers.1"), ({"other": 1}, 422, "other"),
             ([1, 2], 422, "body")]
    for body, status, field in cases:
        response = p.post("a", body)
        assert response.status_code == status, body
        assert response.json()["error"]["details"]["fields"][0]["field"] == field, body
    response = p.clients["a"].post(SYNC, content=b"{nope", headers={**p.auth("a"), "Content-Type": "application/json"})
    assert response.status_code == 400
    assert p.post("a", {}).json()["error"]["message"].startswith("this user has no active LoRA adapter")


def test_a_read_only_key_cannot_sync(pair) -> None:  # noqa: ANN001
    p = pair()
    key, _ = p.services["a"].keys.create("reader", user_id=p.users["a"], role="read-only")
    assert p.clients["a"].post(SYNC, json={}, headers={"Authorization": f"Bearer {key}"}).status_code == 403
    assert p.clients["a"].get(STATUS, headers={"Authorization": f"Bearer {key}"}).status_code == 200


def test_budget_exhausted_is_429_and_sends_nothing(pair) -> None:  # noqa: ANN001
    p = pair(privacy_a={"epsilon": 0.4})
    p.give("a", 1)
    p.give("b", 1)
    response = p.post("a")
    assert response.status_code == 429 and int(response.headers["Retry-After"]) > 0
    assert "privacy budget exhausted: federated_update" in response.json()["error"]["message"]
    assert p.transport.sent == [] and p.status("a")["rounds"] == []
