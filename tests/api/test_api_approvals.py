"""/v1/approvals: list (filtered by status), get, approve (the command runs once and the execution is
returned), deny, deciding twice (409), bodies, auth, and the audit of decisions."""

from __future__ import annotations

from uuid import uuid4

import pytest

from assistant.catalog import RunOutcome

APPROVAL_KEYS = {"id", "catalog_id", "catalog_name", "command", "risk_level", "status", "requested_by",
                 "requested_at", "decided_by", "decided_at", "reason", "execution_id"}


class CountingRunner:
    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int) -> RunOutcome:
        self.commands.append(command)
        return RunOutcome(0, f"ran {command}\n", "", 3)


@pytest.fixture
def runner(services) -> CountingRunner:
    services.catalog.runner = CountingRunner()
    return services.catalog.runner


def request_approval(client, auth, command: str = "echo guarded", **entry) -> dict:
    payload = {"name": f"Guarded {uuid4().hex[:6]}", "command": command, "category": "system",
               "risk_level": "low", "os": "any", "requires_approval": True, **entry}
    made = client.post("/v1/commands/catalog", json=payload, headers=auth)
    assert made.status_code == 201, made.text
    response = client.post(f"/v1/commands/catalog/{made.json()['id']}/execute", headers=auth)
    assert response.status_code == 202, response.text
    return response.json()["approval"]


def user_of(services, api_key) -> str:
    return str(services.keys.authenticate(api_key).user_id)


def test_list_and_get(client, auth, runner, services, api_key) -> None:
    assert client.get("/v1/approvals", headers=auth).json() == []
    first = request_approval(client, auth)
    second = request_approval(client, auth, risk_level="high", requires_approval=False)
    listed = client.get("/v1/approvals", headers=auth).json()
    assert [a["id"] for a in listed] == [second["id"], first["id"]]  # newest first
    assert all(set(a) == APPROVAL_KEYS for a in listed)
    assert listed[1]["status"] == "pending" and listed[1]["requested_by"] == user_of(services, api_key)
    assert listed[0]["risk_level"] == "high" and listed[1]["command"] == "echo guarded"
    assert (listed[1]["decided_by"], listed[1]["decided_at"], listed[1]["execution_id"]) == (None, None, None)
    got = client.get(f"/v1/approvals/{first['id']}", headers=auth)
    assert got.status_code == 200 and got.json() == first
    assert client.get("/v1/approvals", params={"limit": 1, "offset": 1}, headers=auth).json() == [listed[1]]
    assert runner.commands == []


def test_unknown_and_malformed(client, auth) -> None:
    for method, suffix in (("GET", ""), ("POST", "/approve"), ("POST", "/deny")):
        response = client.request(method, f"/v1/approvals/{uuid4()}{suffix}", headers=auth)
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert client.get("/v1/approvals/nope", headers=auth).status_code == 422


@pytest.mark.parametrize("params", [{"status": "maybe"}, {"limit": 0}, {"offset": -1}])
def test_bad_list_parameters(client, auth, params) -> None:
    response = client.get("/v1/approvals", params=params, headers=auth)
    assert response.status_code == 422
    assert next(iter(params)) in {f["field"] for f in response.json()["error"]["details"]["fields"]}


def test_approve_runs_once_and_returns_the_execution(client, auth, runner, services, api_key) -> None:
    approval = request_approval(client, auth)
    response = client.post(f"/v1/approvals/{approval['id']}/approve", headers=auth)
    assert response.status_code == 200, response.text
    execution = response.json()
    assert execution["status"] == "completed" and execution["stdout"] == "ran echo guarded\n"
    assert execution["approval_id"] == approval["id"] and execution["catalog_id"] == approval["catalog_id"]
    assert runner.commands == ["echo guarded"]
    after = client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()
    assert after["status"] == "executed" and after["execution_id"] == execution["execution_id"]
    assert after["decided_by"] == user_of(services, api_key) and after["decided_at"]

    again = client.post(f"/v1/approvals/{approval['id']}/approve", headers=auth)
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["code"] == "CONFLICT" and "already decided" in error["message"]
    assert error["details"] == {"status": "executed"}
    assert client.post(f"/v1/approvals/{approval['id']}/deny", headers=auth).status_code == 409
    assert runner.commands == ["echo guarded"]


def test_deny(client, auth, runner) -> None:
    approval = request_approval(client, auth)
    response = client.post(f"/v1/approvals/{approval['id']}/deny", json={"reason": "not today"}, headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == APPROVAL_KEYS
    assert body["status"] == "denied" and body["reason"] == "not today" and body["execution_id"] is None
    for action in ("approve", "deny"):
        second = client.post(f"/v1/approvals/{approval['id']}/{action}", headers=auth)
        assert second.status_code == 409 and second.json()["error"]["details"] == {"status": "denied"}
    assert runner.commands == []


def test_status_filter(client, auth, runner) -> None:
    pending, approved, denied = (request_approval(client, auth) for _ in range(3))
    client.post(f"/v1/approvals/{approved['id']}/approve", json={}, headers=auth)
    client.post(f"/v1/approvals/{denied['id']}/deny", headers=auth)
    by_status = {s: [a["id"] for a in client.get("/v1/approvals", params={"status": s}, headers=auth).json()]
                 for s in ("pending", "approved", "denied", "executed")}
    assert by_status == {"pending": [pending["id"]], "approved": [], "denied": [denied["id"]],
                         "executed": [approved["id"]]}


def test_decision_bodies(client, auth, runner) -> None:
    approval = request_approval(client, auth)
    too_long = client.post(f"/v1/approvals/{approval['id']}/deny", json={"reason": "x" * 1001}, headers=auth)
    assert too_long.status_code == 422
    assert client.post(f"/v1/approvals/{approval['id']}/deny", json={"why": "x"}, headers=auth).status_code == 422
    not_object = client.post(f"/v1/approvals/{approval['id']}/deny", json=["x"], headers=auth)
    assert not_object.status_code == 400
    assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["status"] == "pending"
    ok = client.post(f"/v1/approvals/{approval['id']}/approve", json={"reason": "checked"}, headers=auth)
    assert ok.status_code == 200
    assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["reason"] == "checked"


def test_deleting_the_entry_denies_the_pending_request(client, auth, runner) -> None:
    approval = request_approval(client, auth)
    assert client.delete(f"/v1/commands/catalog/{approval['catalog_id']}", headers=auth).status_code == 204
    after = client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()
    assert after["status"] == "denied" and after["reason"] == "the catalog entry was deleted"
    assert client.post(f"/v1/approvals/{approval['id']}/approve", headers=auth).status_code == 409
    assert runner.commands == []


def test_decisions_are_audited_with_the_caller(client, auth, runner, services) -> None:
    key, principal = services.keys.create("approver", user_id=uuid4())
    approver = {"Authorization": f"Bearer {key}"}
    one, two = request_approval(client, auth), request_approval(client, auth)
    client.post(f"/v1/approvals/{one['id']}/approve", headers=approver)
    client.post(f"/v1/approvals/{two['id']}/deny", json={"reason": "no"}, headers=approver)
    events = client.get("/v1/commands/catalog/audit", params={"limit": 4}, headers=auth).json()
    assert [(e["action"], e["approval_id"]) for e in events] == [
        ("denied", two["id"]), ("execute", one["id"]), ("approved", one["id"]), ("approval_requested", two["id"])]
    assert {e["user_id"] for e in events[:3]} == {str(principal.user_id)}
    assert events[0]["detail"].endswith(": no")


def test_read_only_keys_may_look_but_not_decide(client, auth, read_only_auth, runner) -> None:
    approval = request_approval(client, auth)
    assert client.get("/v1/approvals", headers=read_only_auth).status_code == 200
    assert client.get(f"/v1/approvals/{approval['id']}", headers=read_only_auth).status_code == 200
    for action in ("approve", "deny"):
        response = client.post(f"/v1/approvals/{approval['id']}/{action}", headers=read_only_auth)
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert client.get("/v1/approvals").status_code == 401
    assert runner.commands == []
    assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["status"] == "pending"


def test_openapi_documents_the_routes(client) -> None:
    paths = client.get("/api-docs/openapi.json").json()["paths"]
    assert {"/v1/approvals", "/v1/approvals/{approval_id}", "/v1/approvals/{approval_id}/approve",
            "/v1/approvals/{approval_id}/deny"} <= set(paths)
    listing = paths["/v1/approvals"]["get"]
    assert all(s in listing["description"] for s in ("pending", "approved", "denied", "executed"))
    assert "409" in paths["/v1/approvals/{approval_id}/approve"]["post"]["responses"]
