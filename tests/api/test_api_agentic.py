"""/v1/agentic/tasks: create, get, list, stream, cancel, approve; errors, ownership, disabled mode."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from uuid import UUID, uuid4

import pytest

from tests.assistant.agents.agentic_fakes import AgentModel, Meter, Step, toolbox_with

TASK_KEYS = {"task_id", "status", "description", "plan_summary", "sub_agents", "result", "created_at",
             "require_approval", "error", "updated_at", "finished_at"}
SUB_AGENT_KEYS = {"id", "description", "status", "profile", "tools", "result", "error", "started_at", "finished_at"}
FINAL = {"completed", "failed", "cancelled", "timed_out"}
DISABLED = "agentic mode is disabled ([agentic] enabled = false)"


def plan(*descriptions: str) -> dict[str, Any]:
    return {"summary": "the plan", "sub_tasks": [{"description": d} for d in descriptions]}


@pytest.fixture
def meter() -> Iterator[Meter]:
    m = Meter()
    yield m
    m.release.set()


@pytest.fixture
def agent_model(meter: Meter) -> AgentModel:
    return AgentModel(plan=plan("first", "second"),
                      scripts={"blocked": [Step(call=("block", {})), Step(text="unblocked")]})


@pytest.fixture
def env(make_settings, make_services, make_client, agent_model: AgentModel, meter: Meter):
    """(client, auth, services) with the agent model and a toolbox of probe/block tools."""
    services = make_services(make_settings(agentic={"max_concurrent_sub_agents": 2}), agent_model)
    services.agentic.toolbox = toolbox_with(meter)
    client = make_client(services)
    key, _ = services.keys.create("agentic")
    return client, {"Authorization": f"Bearer {key}"}, services


@pytest.fixture
def other_auth(env) -> dict[str, str]:
    key, _ = env[2].keys.create("other", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


def create(client, auth, **body) -> dict:
    response = client.post("/v1/agentic/tasks", json={"description": "Plan a trip", **body}, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


def wait_for(client, auth, task_id: str, statuses: set[str]) -> dict:
    deadline = time.monotonic() + 60  # a bound against hangs, not a timing assertion
    while time.monotonic() < deadline:
        task = client.get(f"/v1/agentic/tasks/{task_id}", headers=auth).json()
        if task["status"] in statuses:
            return task
        time.sleep(0.02)
    raise AssertionError(f"task {task_id} never reached {statuses}: {task}")


def until(condition) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "condition never met"
        time.sleep(0.01)


def error_of(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["request_id"]
    return error


# --- create, get, stream -------------------------------------------------------------------------------


def test_create_answers_planning_and_the_task_completes(env, sse) -> None:
    client, auth, _ = env
    body = create(client, auth)
    assert set(body) == {"task_id", "status", "created_at"}
    assert UUID(body["task_id"]) and body["status"] == "planning" and body["created_at"].endswith("Z")

    stream = client.get(f"/v1/agentic/tasks/{body['task_id']}/stream", headers=auth)
    assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
    events = sse(stream.text)
    kinds = [name for name, _ in events]
    assert kinds[:2] == ["task_started", "plan_created"] and kinds[-1] == "task_completed"
    assert sorted(kinds[2:-1]) == ["sub_agent_completed"] * 2 + ["sub_agent_started"] * 2
    data = dict(events[:2])
    assert data["task_started"] == {"task_id": body["task_id"], "description": "Plan a trip"}
    assert [s["description"] for s in data["plan_created"]["sub_tasks"]] == ["first", "second"]
    assert data["plan_created"]["task_id"] == body["task_id"]
    started = [d for n, d in events if n == "sub_agent_started"]
    assert all(set(d) == {"sub_agent_id", "description"} for d in started)
    done = [d for n, d in events if n == "sub_agent_completed"]
    assert all(set(d) == {"sub_agent_id", "result"} for d in done)
    assert events[-1][1] == {"task_id": body["task_id"], "result": "SYNTHESIS"}
    assert "id: 1" in stream.text  # each event carries its sequence number

    task = client.get(f"/v1/agentic/tasks/{body['task_id']}", headers=auth).json()
    assert set(task) == TASK_KEYS
    assert task["status"] == "completed" and task["result"] == "SYNTHESIS"
    assert task["plan_summary"] == "the plan" and task["description"] == "Plan a trip"
    assert task["created_at"] == body["created_at"] and task["require_approval"] is False
    assert [set(s) for s in task["sub_agents"]] == [SUB_AGENT_KEYS] * 2
    assert [(s["description"], s["status"], s["result"]) for s in task["sub_agents"]] == [
        ("first", "completed", "result of first"), ("second", "completed", "result of second")]
    assert {s["id"] for s in task["sub_agents"]} == {d["sub_agent_id"] for d in started}


def test_a_late_subscriber_gets_the_whole_history_and_can_resume(env, sse) -> None:
    client, auth, _ = env
    task_id = create(client, auth)["task_id"]
    wait_for(client, auth, task_id, FINAL)
    whole = sse(client.get(f"/v1/agentic/tasks/{task_id}/stream", headers=auth).text)
    assert whole[0][0] == "task_started" and whole[-1][0] == "task_completed"
    again = sse(client.get(f"/v1/agentic/tasks/{task_id}/stream", headers=auth).text)
    assert again == whole
    resumed = sse(client.get(f"/v1/agentic/tasks/{task_id}/stream", headers={**auth, "Last-Event-ID": "3"}).text)
    assert resumed == whole[3:]
    for absent in ("null", "", "undefined", "-1", "3.5", str(2**63)):  # not an event id: from the start
        response = client.get(f"/v1/agentic/tasks/{task_id}/stream", headers={**auth, "Last-Event-ID": absent})
        assert response.status_code == 200, (absent, response.text)
        assert sse(response.text) == whole, absent


def test_list_is_newest_first_and_only_the_callers(env, other_auth) -> None:
    client, auth, _ = env
    first = create(client, auth, description="one")["task_id"]
    second = create(client, auth, description="two")["task_id"]
    for task_id in (first, second):
        wait_for(client, auth, task_id, FINAL)
    listed = client.get("/v1/agentic/tasks", headers=auth).json()["tasks"]
    assert [t["task_id"] for t in listed] == [second, first]
    assert client.get("/v1/agentic/tasks?limit=1&offset=1", headers=auth).json()["tasks"][0]["task_id"] == first
    assert client.get("/v1/agentic/tasks", headers=other_auth).json() == {"tasks": []}


# --- cancel and approve --------------------------------------------------------------------------------


def test_cancel_mid_run_cancels_every_sub_agent(env, agent_model: AgentModel, meter: Meter, sse) -> None:
    client, auth, _ = env
    agent_model.plan = plan("blocked", "blocked too", "blocked three")
    agent_model.scripts.update({k: [Step(call=("block", {}))] for k in ("blocked too", "blocked three")})
    task_id = create(client, auth)["task_id"]
    until(lambda: meter.inside == 2)  # two running (the bound), one pending

    response = client.post(f"/v1/agentic/tasks/{task_id}/cancel", headers=auth)
    assert response.status_code == 200
    assert response.json() == {"task_id": task_id, "status": "cancelled"}
    task = client.get(f"/v1/agentic/tasks/{task_id}", headers=auth).json()
    assert task["status"] == "cancelled" and task["finished_at"]
    assert [s["status"] for s in task["sub_agents"]] == ["cancelled"] * 3
    events = sse(client.get(f"/v1/agentic/tasks/{task_id}/stream", headers=auth).text)
    assert events[-1] == ("task_cancelled", {"task_id": task_id,
                                             "cancelled_sub_agents": [s["id"] for s in task["sub_agents"]]})

    again = error_of(client.post(f"/v1/agentic/tasks/{task_id}/cancel", headers=auth), 409, "CONFLICT")
    assert again["details"] == {"status": "cancelled"}


def test_cancelling_a_completed_task_is_409(env) -> None:
    client, auth, _ = env
    task_id = create(client, auth)["task_id"]
    wait_for(client, auth, task_id, FINAL)
    error = error_of(client.post(f"/v1/agentic/tasks/{task_id}/cancel", headers=auth), 409, "CONFLICT")
    assert error["details"] == {"status": "completed"} and "already ended" in error["message"]


def test_require_approval_holds_the_plan_until_approved(env, agent_model: AgentModel, sse) -> None:
    client, auth, _ = env
    body = create(client, auth, require_approval=True)
    assert body["status"] == "planning"
    task_id = body["task_id"]
    held = wait_for(client, auth, task_id, {"awaiting_approval"})
    assert held["require_approval"] is True and held["plan_summary"] == "the plan"
    assert [s["status"] for s in held["sub_agents"]] == ["pending", "pending"]
    assert [k for k, _ in agent_model.calls] == ["plan"]

    response = client.post(f"/v1/agentic/tasks/{task_id}/approve", headers=auth)
    assert response.status_code == 200 and response.json() == {"task_id": task_id, "status": "running"}
    events = sse(client.get(f"/v1/agentic/tasks/{task_id}/stream", headers=auth).text)
    kinds = [name for name, _ in events]
    assert kinds[:4] == ["task_started", "plan_created", "approval_required", "plan_approved"]
    assert kinds[-1] == "task_completed"
    error = error_of(client.post(f"/v1/agentic/tasks/{task_id}/approve", headers=auth), 409, "CONFLICT")
    assert error["details"] == {"status": "completed"}


def test_cancelling_a_held_plan(env) -> None:
    client, auth, _ = env
    task_id = create(client, auth, require_approval=True)["task_id"]
    wait_for(client, auth, task_id, {"awaiting_approval"})
    assert client.post(f"/v1/agentic/tasks/{task_id}/cancel", headers=auth).json()["status"] == "cancelled"
    error_of(client.post(f"/v1/agentic/tasks/{task_id}/approve", headers=auth), 409, "CONFLICT")


# --- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, field", [
    ({}, "description"),
    ({"description": ""}, "description"),
    ({"description": "   "}, "description"),
    ({"description": "x" * 10_001}, "description"),
    ({"description": "ok", "require_approval": "perhaps"}, "require_approval"),
    ({"description": "ok", "priority": 1}, "priority"),
])
def test_invalid_bodies_are_422_naming_the_field(env, body, field) -> None:
    client, auth, _ = env
    error = error_of(client.post("/v1/agentic/tasks", json=body, headers=auth), 422, "VALIDATION_ERROR")
    assert [f["field"] for f in error["details"]["fields"]] == [field]


def test_a_body_that_is_not_json_is_400(env) -> None:
    client, auth, _ = env
    response = client.post("/v1/agentic/tasks", content=b"{nope", headers={**auth, "Content-Type": "application/json"})
    error_of(response, 400, "BAD_REQUEST")


def test_unknown_and_malformed_ids(env) -> None:
    client, auth, _ = env
    missing = str(uuid4())
    for method, path in (("GET", ""), ("GET", "/stream"), ("POST", "/cancel"), ("POST", "/approve")):
        error = error_of(client.request(method, f"/v1/agentic/tasks/{missing}{path}", headers=auth), 404, "NOT_FOUND")
        assert missing in error["message"]
        error_of(client.request(method, f"/v1/agentic/tasks/not-a-uuid{path}", headers=auth), 422,
                 "VALIDATION_ERROR")


def test_another_users_task_is_404(env, other_auth) -> None:
    client, auth, _ = env
    task_id = create(client, auth)["task_id"]
    wait_for(client, auth, task_id, FINAL)
    for method, path in (("GET", ""), ("GET", "/stream"), ("POST", "/cancel"), ("POST", "/approve")):
        error_of(client.request(method, f"/v1/agentic/tasks/{task_id}{path}", headers=other_auth), 404, "NOT_FOUND")
    assert client.get(f"/v1/agentic/tasks/{task_id}", headers=auth).json()["status"] == "completed"


def test_without_a_key_it_is_401(env) -> None:
    client, _, _ = env
    error_of(client.post("/v1/agentic/tasks", json={"description": "x"}), 401, "UNAUTHORIZED")


def test_disabled_agentic_mode_is_503_on_every_route(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(agentic={"enabled": False}), AgentModel())
    client = make_client(services)
    key, _ = services.keys.create("k")
    auth = {"Authorization": f"Bearer {key}"}
    some = str(uuid4())
    for method, path, body in (("POST", "", {"description": "x"}), ("POST", "", {"bad": 1}), ("GET", "", None),
                               ("GET", f"/{some}", None), ("GET", f"/{some}/stream", None),
                               ("POST", f"/{some}/cancel", None), ("POST", f"/{some}/approve", None)):
        response = client.request(method, f"/v1/agentic/tasks{path}", json=body, headers=auth)
        assert error_of(response, 503, "SERVICE_UNAVAILABLE")["message"] == DISABLED


def test_the_openapi_document_describes_states_and_routes(env) -> None:
    client, _, _ = env
    doc = client.get("/api-docs/openapi.json").json()
    paths = doc["paths"]
    for path in ("/v1/agentic/tasks", "/v1/agentic/tasks/{task_id}", "/v1/agentic/tasks/{task_id}/stream",
                 "/v1/agentic/tasks/{task_id}/cancel", "/v1/agentic/tasks/{task_id}/approve"):
        assert path in paths
    described = paths["/v1/agentic/tasks"]["post"]["description"]
    for state in ("planning", "awaiting_approval", "running", "completed", "failed", "cancelled", "timed_out",
                  "interrupted by a server restart"):
        assert state in described
    assert "409" in paths["/v1/agentic/tasks/{task_id}/cancel"]["post"]["responses"]
    assert "task_cancelled" in paths["/v1/agentic/tasks/{task_id}/stream"]["get"]["description"]
    assert paths["/v1/agentic/tasks"]["post"]["responses"]["201"]
