"""The real embedded model (Qwen2.5-Coder-0.5B, llama.cpp) runs a small agentic task to completion
over HTTP: planned with the schema-constrained plan tool (or the documented fallback), sub-agents
through the tool loop, a synthesis, the events streamed. States and events are asserted, not wording."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from assistant.services import Services
from tests.integration.support import parse_sse, serve

pytestmark = pytest.mark.integration


@pytest.fixture
def agentic_server(tmp_path: Path, default_model_path: Path) -> Iterator[tuple[str, dict[str, str], Services]]:
    live, key = serve(
        tmp_path,
        inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0, "max_tokens": 40},
        security={"rate_limit_enabled": False},
        tool_calling={"enabled": False},  # keep it short: the sub-agents answer without tools
        agentic={"max_sub_agents_per_task": 2, "max_concurrent_sub_agents": 2, "total_timeout_minutes": 15,
                 "sub_agent_timeout_minutes": 10},
    )
    live.services.agentic.planner_max_tokens = 160  # two short sub-tasks fit
    with live:
        yield live.base_url, {"Authorization": f"Bearer {key}"}, live.services


def test_a_small_task_runs_to_completion_with_the_embedded_model(agentic_server) -> None:
    base, headers, _ = agentic_server
    with httpx.Client(base_url=base, headers=headers, timeout=900) as client:
        created = client.post("/v1/agentic/tasks", json={
            "description": "Write one sentence about the sea, and one sentence about the mountains."})
        assert created.status_code == 201, created.text
        task_id = created.json()["task_id"]
        assert created.json()["status"] == "planning"

        with client.stream("GET", f"/v1/agentic/tasks/{task_id}/stream") as response:
            assert response.status_code == 200
            events = [(name, json.loads(data)) for name, data in parse_sse(list(response.iter_lines()))]
        task = client.get(f"/v1/agentic/tasks/{task_id}").json()

    names = [name for name, _ in events]
    assert names[:2] == ["task_started", "plan_created"], names
    assert names[-1] == "task_completed", events[-1]
    sub_tasks = events[1][1]["sub_tasks"]
    assert events[1][1]["fallback"] is False  # the model's own plan, decoded against the plan schema
    assert 1 <= len(sub_tasks) <= 2
    assert all(s["description"].strip() for s in sub_tasks)
    started = [data["sub_agent_id"] for name, data in events if name == "sub_agent_started"]
    completed = {data["sub_agent_id"]: data["result"] for name, data in events if name == "sub_agent_completed"}
    assert sorted(started) == sorted(completed) == sorted(s["id"] for s in sub_tasks)
    assert all(result.strip() for result in completed.values())
    result = events[-1][1]["result"]
    assert result.strip()

    assert task["status"] == "completed"
    assert task["result"] == result and task["plan_summary"]
    assert [s["status"] for s in task["sub_agents"]] == ["completed"] * len(sub_tasks)
    assert [s["result"] for s in task["sub_agents"]] == [completed[s["id"]] for s in task["sub_agents"]]
