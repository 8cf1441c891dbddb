"""/v1/approvals: list (filtered by status), get, approve (the command runs once and the execution is
returned), deny, deciding twice (409), bodies, auth, the audit of decisions; only an admin other than
the requester decides; requests and their executions belong to the requester.

In these tests ``auth`` (the owner's user key) requests, an admin key of the owner makes the catalog
entries, and ``second_admin_auth`` (another user's admin key) decides."""

from __future__ import annotations

from collections.abc import Callable
from uuid import uuid4

import pytest

from assistant.catalog import RunOutcome

APPROVAL_KEYS = {"id", "kind", "catalog_id", "catalog_name", "command", "risk_level", "status", "requested_by",
                 "requested_at", "decided_by", "decided_at", "reason", "execution_id", "tool_name", "arguments",
                 "conversation_id", "message_id", "tool_run_id", "result", "error"}
SELF_DECISION = "an approval must be decided by an admin other than its requester"


class CountingRunner:
    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        self.commands.append(command)
        return RunOutcome(0, f"ran {command}\n", "", 3)


@pytest.fixture
def runner(services) -> CountingRunner:
    services.catalog.runner = CountingRunner()
    return services.catalog.runner


@pytest.fixture
def ask(client, auth, admin_auth) -> Callable[..., dict]:
    """``ask(command, requester=auth, **entry)``: an admin makes an entry that requires approval,
    ``requester`` executes it (200 with the request); the pending request."""

    def request(command: str = "echo guarded", requester: dict | None = None, **entry) -> dict:
        payload = {"name": f"Guarded {uuid4().hex[:6]}", "command": command, "category": "system",
                   "risk_level": "low", "os": "any", "requires_approval": True, **entry}
        made = client.post("/v1/commands/catalog", json=payload, headers=admin_auth)
        assert made.status_code == 201, made.text
        response = client.post(f"/v1/commands/catalog/{made.json()['id']}/execute", headers=requester or auth)
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "approval_required"
        return response.json()["approval"]

    return request


def user_of(services, api_key) -> str:
    return str(services.keys.authenticate(api_key).user_id)


def key_of(services, role: str = "user") -> dict[str, str]:
    key, _ = services.keys.create(f"{role} {uuid4().hex[:6]}", user_id=uuid4(), role=role)
    return {"Authorization": f"Bearer {key}"}


def test_list_and_get(client, auth, runner, services, api_key, ask) -> None:
    assert client.get("/v1/approvals", headers=auth).json() == []
    first = ask()
    second = ask(risk_level="high", requires_approval=False)
    listed = client.get("/v1/approvals", headers=auth).json()
    assert [a["id"] for a in listed] == [second["id"], first["id"]]  # newest first
    assert all(set(a) == APPROVAL_KEYS for a in listed)
    assert listed[1]["status"] == "pending" and listed[1]["requested_by"] == user_of(services, api_key)
    assert listed[0]["risk_level"] == "high" and listed[1]["command"] == "echo guarded"
    assert listed[1]["kind"] == "command" and listed[1]["tool_name"] is None and listed[1]["arguments"] is None
    assert (listed[1]["decided_by"], listed[1]["decided_at"], listed[1]["execution_id"]) == (None, None, None)
    got = client.get(f"/v1/approvals/{first['id']}", headers=auth)
    assert got.status_code == 200 and got.json() == first
    assert client.get("/v1/approvals", params={"limit": 1, "offset": 1}, headers=auth).json() == [listed[1]]
    assert client.get("/v1/approvals", params={"kind": "tool_call"}, headers=auth).json() == []
    assert len(client.get("/v1/approvals", params={"kind": "command"}, headers=auth).json()) == 2
    assert runner.commands == []


def test_unknown_and_malformed(client, auth, second_admin_auth) -> None:
    assert client.get(f"/v1/approvals/{uuid4()}", headers=auth).status_code == 404
    for method, suffix in (("GET", ""), ("POST", "/approve"), ("POST", "/deny")):
        response = client.request(method, f"/v1/approvals/{uuid4()}{suffix}", headers=second_admin_auth)
        assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert client.get("/v1/approvals/nope", headers=auth).status_code == 422


@pytest.mark.parametrize("params", [{"status": "maybe"}, {"limit": 0}, {"offset": -1}, {"kind": "other"}])
def test_bad_list_parameters(client, auth, params) -> None:
    response = client.get("/v1/approvals", params=params, headers=auth)
    assert response.status_code == 422
    assert next(iter(params)) in {f["field"] for f in response.json()["error"]["details"]["fields"]}


def test_approve_runs_once_and_returns_the_execution(client, auth, second_admin_auth, runner, services, api_key,
                                                     ask) -> None:
    approval = ask()
    response = client.post(f"/v1/approvals/{approval['id']}/approve", headers=second_admin_auth)
    assert response.status_code == 200, response.text
    execution = response.json()
    assert execution["status"] == "completed" and execution["stdout"] == "ran echo guarded\n"
    assert execution["approval_id"] == approval["id"] and execution["catalog_id"] == approval["catalog_id"]
    assert execution["user_id"] == user_of(services, api_key)  # the requester's execution
    assert runner.commands == ["echo guarded"]
    after = client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()
    assert after["status"] == "executed" and after["execution_id"] == execution["execution_id"]
    assert after["decided_by"] == str(services.keys.authenticate(
        second_admin_auth["Authorization"].split()[1]).user_id) and after["decided_at"]
    mine = client.get(f"/v1/commands/catalog/executions/{execution['execution_id']}", headers=auth)
    assert mine.status_code == 200 and mine.json() == execution  # the requester reads the result

    again = client.post(f"/v1/approvals/{approval['id']}/approve", headers=second_admin_auth)
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["code"] == "CONFLICT" and "already decided" in error["message"]
    assert error["details"] == {"status": "executed"}
    assert client.post(f"/v1/approvals/{approval['id']}/deny", headers=second_admin_auth).status_code == 409
    assert runner.commands == ["echo guarded"]


def test_deny(client, second_admin_auth, runner, ask) -> None:
    approval = ask()
    response = client.post(f"/v1/approvals/{approval['id']}/deny", json={"reason": "not today"},
                           headers=second_admin_auth)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == APPROVAL_KEYS
    assert body["status"] == "denied" and body["reason"] == "not today" and body["execution_id"] is None
    for action in ("approve", "deny"):
        second = client.post(f"/v1/approvals/{approval['id']}/{action}", headers=second_admin_auth)
        assert second.status_code == 409 and second.json()["error"]["details"] == {"status": "denied"}
    assert runner.commands == []


def test_status_filter(client, auth, second_admin_auth, runner, ask) -> None:
    pending, approved, denied = (ask() for _ in range(3))
    client.post(f"/v1/approvals/{approved['id']}/approve", json={}, headers=second_admin_auth)
    client.post(f"/v1/approvals/{denied['id']}/deny", headers=second_admin_auth)
    by_status = {s: [a["id"] for a in client.get("/v1/approvals", params={"status": s}, headers=auth).json()]
                 for s in ("pending", "approved", "denied", "executed")}
    assert by_status == {"pending": [pending["id"]], "approved": [], "denied": [denied["id"]],
                         "executed": [approved["id"]]}


def test_decision_bodies(client, auth, second_admin_auth, runner, ask) -> None:
    approval = ask()
    decide = f"/v1/approvals/{approval['id']}"
    too_long = client.post(f"{decide}/deny", json={"reason": "x" * 1001}, headers=second_admin_auth)
    assert too_long.status_code == 422
    assert client.post(f"{decide}/deny", json={"why": "x"}, headers=second_admin_auth).status_code == 422
    not_object = client.post(f"{decide}/deny", json=["x"], headers=second_admin_auth)
    assert not_object.status_code == 400
    assert client.get(decide, headers=auth).json()["status"] == "pending"
    ok = client.post(f"{decide}/approve", json={"reason": "checked"}, headers=second_admin_auth)
    assert ok.status_code == 200
    assert client.get(decide, headers=auth).json()["reason"] == "checked"


def test_deleting_the_entry_denies_the_pending_request(client, auth, admin_auth, second_admin_auth, runner,
                                                       ask) -> None:
    approval = ask()
    assert client.delete(f"/v1/commands/catalog/{approval['catalog_id']}", headers=admin_auth).status_code == 204
    after = client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()
    assert after["status"] == "denied" and after["reason"] == "the catalog entry was deleted"
    assert client.post(f"/v1/approvals/{approval['id']}/approve", headers=second_admin_auth).status_code == 409
    assert runner.commands == []


def test_decisions_are_audited_with_the_caller(client, admin_auth, runner, services, ask) -> None:
    key, principal = services.keys.create("approver", user_id=uuid4(), role="admin")
    approver = {"Authorization": f"Bearer {key}"}
    one, two = ask(), ask()
    client.post(f"/v1/approvals/{one['id']}/approve", headers=approver)
    client.post(f"/v1/approvals/{two['id']}/deny", json={"reason": "no"}, headers=approver)
    events = client.get("/v1/commands/catalog/audit", params={"limit": 4}, headers=admin_auth).json()
    assert [(e["action"], e["approval_id"]) for e in events] == [
        ("denied", two["id"]), ("execute", one["id"]), ("approved", one["id"]), ("approval_requested", two["id"])]
    assert {e["user_id"] for e in events[:3]} == {str(principal.user_id)}
    assert events[0]["detail"].endswith(": no")


def test_read_only_keys_may_look_but_not_decide(client, auth, read_only_auth, runner, ask) -> None:
    approval = ask()
    assert client.get("/v1/approvals", headers=read_only_auth).status_code == 200
    assert client.get(f"/v1/approvals/{approval['id']}", headers=read_only_auth).status_code == 200
    for action in ("approve", "deny"):
        response = client.post(f"/v1/approvals/{approval['id']}/{action}", headers=read_only_auth)
        assert response.status_code == 403 and response.json()["error"]["code"] == "FORBIDDEN"
    assert client.get("/v1/approvals").status_code == 401
    assert runner.commands == []
    assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["status"] == "pending"


# --- issue 11, holes 2 and 3: who decides, who sees --------------------------------------------------


def test_a_user_key_cannot_decide(client, auth, services, runner, ask) -> None:
    approval = ask()
    for headers in (auth, key_of(services, "user")):  # the requester's own user key, another user's
        for action in ("approve", "deny"):
            response = client.post(f"/v1/approvals/{approval['id']}/{action}", headers=headers)
            assert response.status_code == 403, response.text
            error = response.json()["error"]
            assert error["code"] == "FORBIDDEN" and "admin role" in error["message"]
            assert error["details"]["required_role"] == "admin"
    assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["status"] == "pending"
    assert runner.commands == []


def test_the_requester_admin_cannot_decide_their_own_request_another_admin_can(
        client, auth, admin_auth, second_admin_auth, runner, ask) -> None:
    for requester in (auth, admin_auth):  # requested with the owner's user key, or with the owner's admin key
        approval = ask(requester=requester)
        for action in ("approve", "deny"):
            response = client.post(f"/v1/approvals/{approval['id']}/{action}", headers=admin_auth)
            assert response.status_code == 403, response.text
            error = response.json()["error"]
            assert error["code"] == "FORBIDDEN" and error["message"] == SELF_DECISION
        assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["status"] == "pending"
        assert runner.commands == []
        done = client.post(f"/v1/approvals/{approval['id']}/approve", headers=second_admin_auth)
        assert done.status_code == 200 and done.json()["status"] == "completed"
        runner.commands.clear()


def test_another_user_neither_sees_nor_decides_a_request(client, auth, admin_auth, services, runner, ask) -> None:
    approval = ask()
    b = key_of(services, "user")
    mine = ask(requester=b)
    response = client.get(f"/v1/approvals/{approval['id']}", headers=b)
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"
    assert [a["id"] for a in client.get("/v1/approvals", headers=b).json()] == [mine["id"]]
    assert [a["id"] for a in client.get("/v1/approvals", headers=auth).json()] == [approval["id"]]
    assert client.post(f"/v1/approvals/{approval['id']}/deny", headers=b).status_code == 403
    assert client.get(f"/v1/approvals/{approval['id']}", headers=auth).json()["status"] == "pending"
    everyone = {a["id"] for a in client.get("/v1/approvals", headers=admin_auth).json()}
    assert everyone == {approval["id"], mine["id"]}  # admins list every user's, to decide them
    assert client.get(f"/v1/approvals/{mine['id']}", headers=admin_auth).status_code == 200


def test_openapi_documents_the_routes(client) -> None:
    paths = client.get("/api-docs/openapi.json").json()["paths"]
    assert {"/v1/approvals", "/v1/approvals/{approval_id}", "/v1/approvals/{approval_id}/approve",
            "/v1/approvals/{approval_id}/deny"} <= set(paths)
    listing = paths["/v1/approvals"]["get"]
    assert all(s in listing["description"] for s in ("pending", "approved", "denied", "executed", "tool_call"))
    for action in ("approve", "deny"):
        operation = paths[f"/v1/approvals/{{approval_id}}/{action}"]["post"]
        assert "409" in operation["responses"]
        assert SELF_DECISION in operation["responses"]["403"]["description"]
        assert "admin" in operation["description"] and "denied by admin" in operation["description"]
