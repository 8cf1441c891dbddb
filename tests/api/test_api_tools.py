"""GET /v1/tools, tool calling through both chat routes, and GET /v1/tools/runs."""

from __future__ import annotations

from uuid import uuid4

import pytest

from assistant.llm.scripted import ScriptedChatModel
from tests.conftest import parse_sse


def test_tools_lists_only_configured_capabilities(client, auth) -> None:
    response = client.get("/v1/tools", headers=auth)
    assert response.status_code == 200
    tools = response.json()["tools"]
    names = [t["name"] for t in tools]
    assert names == sorted(names)
    assert {"store_memory", "recall_memory", "create_reminder", "list_reminders"} <= set(names)
    # weather, web search, transit, calendar, e-mail... are not configured in the test settings
    assert not {"get_weather", "search_web", "search_transit", "list_calendar_events", "send_email"} & set(names)
    memory = next(t for t in tools if t["name"] == "recall_memory")
    assert set(memory) == {"name", "description", "icon"} and memory["description"] and memory["icon"]


def test_tools_needs_a_key(client) -> None:
    assert client.get("/v1/tools").status_code == 401


def test_no_capability_configured_no_tools(make_settings, make_services, make_client, model) -> None:
    services = make_services(make_settings(memory={"enabled": False}, reminders={"enabled": False},
                                           code_execution={"enabled": False}), model)
    client = make_client(services)
    key, _ = services.keys.create("t")
    assert client.get("/v1/tools", headers={"Authorization": f"Bearer {key}"}).json() == {"tools": []}
    # with nothing registered, chat is the plain flow and any enabled_tools name is unknown
    response = client.post("/v1/chat", json={"message": "hi"}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200 and model.calls[-1][1].tools == ()


def _script_store_then_answer(model: ScriptedChatModel) -> None:
    model.enqueue(tool_calls=[("store_memory", {"content": "My sister is called Anna", "memory_type": "fact"})])
    model.enqueue("Noted: your sister is Anna.")


def test_chat_runs_the_tool_loop_and_reports_the_runs(client, auth, model, services) -> None:
    _script_store_then_answer(model)
    body = client.post("/v1/chat", json={"message": "Remember my sister is Anna"}, headers=auth).json()
    assert body["content"] == "Noted: your sister is Anna."
    (run,) = body["tool_runs"]
    assert run["tool"] == "store_memory" and run["status"] == "ok" and run["iteration"] == 1
    assert run["arguments"]["content"] == "My sister is called Anna" and run["result"]["stored"] is True
    assert run["message_id"] == body["id"] and run["duration_ms"] >= 0
    # the tool really ran: the memory is in the caller's store
    owner = str(services.keys.owner_user_id())
    assert any(m.content == "My sister is called Anna" for m in services.memory.list(owner))
    tools_seen = [t.name for t in model.calls[0][1].tools]
    assert "store_memory" in tools_seen and tools_seen == sorted(tools_seen)
    assert model.calls[1][0][-1].role == "tool"

    runs = client.get("/v1/tools/runs", params={"message_id": body["id"]}, headers=auth).json()["runs"]
    assert [r["id"] for r in runs] == [run["id"]]
    assert client.get("/v1/tools/runs", params={"conversation_id": body["conversation_id"]},
                      headers=auth).json()["runs"][0]["tool"] == "store_memory"


def test_tool_runs_are_private_and_sealed(client, auth, model, services) -> None:
    _script_store_then_answer(model)
    client.post("/v1/chat", json={"message": "Remember my sister is Anna"}, headers=auth)
    other, _ = services.keys.create("someone else", user_id=uuid4())
    assert client.get("/v1/tools/runs", headers={"Authorization": f"Bearer {other}"}).json() == {"runs": []}
    raw = services.db.query("SELECT arguments_sealed, result_sealed FROM tool_runs")
    assert raw and all(b"Anna" not in bytes(r["arguments_sealed"]) for r in raw)


def test_stream_sends_only_the_final_answer_and_runs_in_done(client, auth, model) -> None:
    _script_store_then_answer(model)
    response = client.post("/v1/chat/stream", json={"message": "Remember my sister is Anna"}, headers=auth)
    events = parse_sse(response.text)
    assert [name for name, _ in events][-1] == "done"
    text = "".join(data["delta"] for name, data in events if name == "message")
    assert text.replace(" ", "") == "Noted:yoursisterisAnna."
    done = events[-1][1]
    assert set(done["tokens"]) == {"prompt", "completion", "total"}
    assert [r["tool"] for r in done["tool_runs"]] == ["store_memory"]


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream"])
def test_enabled_tools_restricts_what_the_model_sees(client, auth, model, path) -> None:
    client.post(path, json={"message": "hi", "enabled_tools": ["recall_memory"]}, headers=auth)
    assert [t.name for t in model.calls[-1][1].tools] == ["recall_memory"]


def test_empty_enabled_tools_commands_and_disabled_tool_calling_use_the_plain_flow(
        make_settings, make_services, make_client, model, client, auth) -> None:
    client.post("/v1/chat", json={"message": "hi", "enabled_tools": []}, headers=auth)
    assert model.calls[-1][1].tools == ()
    client.post("/v1/chat", json={"message": "/snippet Greeting"}, headers=auth)
    assert model.calls[-1][1].tools == ()
    services = make_services(make_settings(tool_calling={"enabled": False}), model)
    other = make_client(services)
    key, _ = services.keys.create("t")
    assert other.post("/v1/chat", json={"message": "hi"}, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert model.calls[-1][1].tools == ()


def test_a_failing_tool_is_the_models_information_not_an_error(client, auth, model) -> None:
    model.enqueue(tool_calls=[("recall_memory", {"query": ""}), ("no_such_tool", {})])
    model.enqueue(tool_calls=[("recall_memory", {"query": ""})])  # the repair round (forced), still invalid
    model.enqueue("I could not look that up.")
    response = client.post("/v1/chat", json={"message": "what do you know?"}, headers=auth)
    assert response.status_code == 200
    runs = response.json()["tool_runs"]
    assert [r["status"] for r in runs] == ["repair", "error", "error"]
    assert "recall_memory did not run: invalid arguments" in runs[0]["error"]
    assert runs[0]["review"]["repair"] is True and runs[0]["review"]["problems"]
    assert "unknown or disabled tool 'no_such_tool'" in runs[1]["error"]
    assert "invalid arguments for recall_memory" in runs[2]["error"]


def test_approval_required_calls_do_not_run(make_settings, make_services, make_client, model) -> None:
    services = make_services(make_settings(tool_calling={"require_approval_for": ["store_memory"]}), model)
    client = make_client(services)
    key, _ = services.keys.create("t")
    _script_store_then_answer(model)
    body = client.post("/v1/chat", json={"message": "remember"}, headers={"Authorization": f"Bearer {key}"}).json()
    (run,) = body["tool_runs"]
    assert run["status"] == "approval_required" and run["result"]["approval_id"]
    owner = str(services.keys.owner_user_id())
    assert not any(m.content == "My sister is called Anna" for m in services.memory.list(owner))


def test_tool_runs_query_validation(client, auth) -> None:
    response = client.get("/v1/tools/runs", params={"message_id": "not-a-uuid"}, headers=auth)
    assert response.status_code == 422
    assert client.get("/v1/tools/runs", params={"limit": 0}, headers=auth).status_code == 422
