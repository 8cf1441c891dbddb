"""Tool-call approvals end to end (issue 11, hole 2): a chat's call of a tool in
``require_approval_for`` becomes a stored request listed by GET /v1/approvals; an admin other than
the chat's user approves it (the tool runs with the stored arguments, a tool run is recorded) or
denies it; either way the conversation's next turn shows the model the outcome."""

from __future__ import annotations

from uuid import uuid4

import pytest

from assistant.llm.scripted import ScriptedChatModel

FACT = "My sister is called Anna"


@pytest.fixture
def env(make_settings, make_services, make_client, model):  # noqa: ANN201
    services = make_services(make_settings(tool_calling={"require_approval_for": ["store_memory"]}), model)
    client = make_client(services)
    user, _ = services.keys.create("chat user", user_id=uuid4())
    admin, _ = services.keys.create("admin", user_id=uuid4(), role="admin")
    return services, client, {"Authorization": f"Bearer {user}"}, {"Authorization": f"Bearer {admin}"}


def ask_to_remember(client, headers, model: ScriptedChatModel) -> dict:
    model.enqueue(tool_calls=[("store_memory", {"content": FACT, "memory_type": "fact"})])
    model.enqueue("I asked for approval to remember that.")
    response = client.post("/v1/chat", json={"message": "Remember my sister is Anna"}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


def stored_facts(services, headers) -> list[str]:
    """The user's memories holding FACT (learning from the chat stores other memories too)."""
    return [m.content for m in services.memory.list(user_id(services, headers)) if m.content == FACT]


def user_id(services, headers) -> str:
    return str(services.keys.authenticate(headers["Authorization"].split()[1]).user_id)


def test_a_gated_call_is_a_stored_request_that_the_admin_approves(env, model) -> None:
    services, client, user, admin = env
    chat = ask_to_remember(client, user, model)
    (run,) = chat["tool_runs"]
    assert run["status"] == "approval_required"
    approval_id = run["result"]["approval_id"]
    told = next(m for m in model.calls[-1][0] if m.role == "tool")
    assert approval_id in told.content and "did not run" in told.content  # the loop told the model
    assert stored_facts(services, user) == []  # nothing ran

    (listed,) = client.get("/v1/approvals", params={"status": "pending"}, headers=admin).json()
    assert listed["id"] == approval_id and listed["kind"] == "tool_call" and listed["tool_name"] == "store_memory"
    assert listed["arguments"] == {"content": FACT, "memory_type": "fact"}
    assert listed["requested_by"] == user_id(services, user)
    assert listed["conversation_id"] == chat["conversation_id"] and listed["message_id"] == chat["id"]
    assert listed["catalog_id"] is None and listed["command"] is None
    assert client.get("/v1/approvals", headers=user).json() == [listed]  # the chat's user sees their own
    other, _ = services.keys.create("someone", user_id=uuid4())
    assert client.get("/v1/approvals", headers={"Authorization": f"Bearer {other}"}).json() == []

    own = client.post(f"/v1/approvals/{approval_id}/approve", headers=user)  # a user key: not an admin
    assert own.status_code == 403

    response = client.post(f"/v1/approvals/{approval_id}/approve", json={"reason": "fine"}, headers=admin)
    assert response.status_code == 200, response.text
    done = response.json()
    assert done["status"] == "executed" and done["error"] is None and done["tool_run_id"]
    assert done["decided_by"] == user_id(services, admin) and done["reason"] == "fine"
    assert done["result"]["stored"] is True and done["result"]["id"]
    assert stored_facts(services, user) == [FACT]  # ran, for the user
    runs = client.get("/v1/tools/runs", params={"message_id": chat["id"]}, headers=user).json()["runs"]
    assert sorted(r["status"] for r in runs) == ["approval_required", "ok"]
    ok = next(r for r in runs if r["status"] == "ok")
    assert ok["id"] == done["tool_run_id"] and ok["arguments"] == {"content": FACT, "memory_type": "fact"}
    assert client.post(f"/v1/approvals/{approval_id}/deny", headers=admin).status_code == 409

    # the next turn of the conversation: the model sees the approved call's result
    model.enqueue("Done: I remember that your sister is Anna.")
    follow = client.post("/v1/chat", json={"message": "Did it work?", "conversation_id": chat["conversation_id"]},
                         headers=user)
    assert follow.status_code == 200
    prompt = "\n".join(m.content for m in model.calls[-1][0])
    assert f"[approval {approval_id}]" in prompt and "was approved by admin" in prompt and FACT in prompt


def test_a_denied_call_does_not_run_and_the_denial_is_reported(env, model) -> None:
    services, client, user, admin = env
    chat = ask_to_remember(client, user, model)
    approval_id = chat["tool_runs"][0]["result"]["approval_id"]
    response = client.post(f"/v1/approvals/{approval_id}/deny", json={"reason": "not now"}, headers=admin)
    assert response.status_code == 200
    denied = response.json()
    assert denied["status"] == "denied" and denied["result"] is None and denied["tool_run_id"] is None
    assert stored_facts(services, user) == []
    assert client.post(f"/v1/approvals/{approval_id}/approve", headers=admin).status_code == 409
    model.enqueue("The admin said no.")
    client.post("/v1/chat", json={"message": "So?", "conversation_id": chat["conversation_id"]}, headers=user)
    notes = [m for m in model.calls[-1][0] if f"[approval {approval_id}]" in m.content]
    assert len(notes) == 1
    assert f"was denied by admin {user_id(services, admin)} (not now). It did not run." in notes[0].content
    assert stored_facts(services, user) == []


def test_the_chat_users_admin_key_cannot_approve_their_own_tool_call(env, model) -> None:
    services, client, user, admin = env
    own_admin, _ = services.keys.create("own admin", user_id=services.keys.authenticate(
        user["Authorization"].split()[1]).user_id, role="admin")
    approval_id = ask_to_remember(client, user, model)["tool_runs"][0]["result"]["approval_id"]
    response = client.post(f"/v1/approvals/{approval_id}/approve", headers={"Authorization": f"Bearer {own_admin}"})
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "an approval must be decided by an admin other than its requester"
    assert stored_facts(services, user) == []
    assert client.get(f"/v1/approvals/{approval_id}", headers=admin).json()["status"] == "pending"
