"""The training routes with the fake trainer, scorer and converter: feedback (also while LoRA is off),
status, start (202, 409 with the running id, too few samples), a run, cancel, 404 for others, 503."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from assistant.services import Services
from tests.assistant.learning.training_support import FakeTrainer, base_file, use_fakes

MIN = 3
DISABLED = "LoRA training is disabled (lora.enabled = false)"


@pytest.fixture
def svc(make_services: Callable[..., Services], make_settings: Callable[..., object], tmp_path: Path) -> Services:
    services = make_services(make_settings(lora={"enabled": True, "min_samples": MIN, "auto_start": False,
                                                 "base_model_path": str(base_file(tmp_path))}))
    use_fakes(services)
    return services


@pytest.fixture
def api(make_client: Callable[[Services], TestClient], svc: Services) -> TestClient:
    return make_client(svc)


@pytest.fixture
def headers(svc: Services) -> dict[str, str]:
    key, _ = svc.keys.create("alice")
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def other(svc: Services) -> dict[str, str]:
    key, _ = svc.keys.create("bob", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


def reply_id(api: TestClient, headers: dict[str, str], text: str = "What is the capital of Australia?") -> str:
    response = api.post("/v1/chat", json={"message": text}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["id"]


def rate(api: TestClient, headers: dict[str, str], n: int) -> None:
    for i in range(n):
        message = reply_id(api, headers, f"Question {i}?")
        body = {"message_id": message, "rating": -1, "preferred_answer": f"Answer {i}."}
        assert api.post("/api/training/feedback", json=body, headers=headers).status_code == 200


def wait_for(api: TestClient, headers: dict[str, str], run_id: str, done: Callable[[dict], bool]) -> dict:
    deadline = time.monotonic() + 60  # a bound against hangs, not a timing assertion
    while True:
        run = api.get(f"/api/training/runs/{run_id}", headers=headers).json()
        if done(run) or time.monotonic() > deadline:
            return run
        time.sleep(0.02)


def test_feedback_then_a_run_to_active(api: TestClient, headers: dict[str, str]) -> None:
    message = reply_id(api, headers)
    response = api.post("/api/training/feedback", headers=headers, json={
        "message_id": message, "rating": -1, "correction": "It is Canberra.",
        "preferred_answer": "The capital of Australia is Canberra.", "useful_memory_ids": [str(uuid4())]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["kind"], body["rating"], body["sample"], body["training_enabled"]) == ("explicit", -1, True, True)
    assert body["preferred_answer"] == "The capital of Australia is Canberra." and body["run_started"] is None
    status = api.get("/api/training/status", headers=headers).json()
    assert status["state"] == "idle" and status["run"] is None and status["active_adapter"] is None
    assert status["samples"] == {"feedback": 1, "samples": 1, "new_samples": 1, "min_samples": MIN, "positive": 0,
                                 "neutral": 0, "negative": 1, "implicit": 0}
    refused = api.post("/api/training/start", headers=headers)
    assert refused.status_code == 409
    assert refused.json()["error"]["details"]["reason"] == "not_enough_samples"
    rate(api, headers, MIN - 1)
    started = api.post("/api/training/start", headers=headers)
    assert started.status_code == 202, started.text
    run = started.json()
    assert (run["state"], run["progress"]["phase"], run["source"]) == ("preparing", "queued", "feedback")
    done = wait_for(api, headers, run["id"], lambda r: r["finished_at"] is not None)
    assert done["state"] == "active", done
    assert done["losses"] == [2.0, 1.0, pytest.approx(0.666667)]
    assert done["metrics"]["regression"]["candidate"] == 1.02
    status = api.get("/api/training/status", headers=headers).json()
    assert status["state"] == "active" and status["loss_curve"] == done["losses"]
    assert status["progress"]["phase"] == "active"
    assert status["active_adapter"]["run_id"] == run["id"] and status["active_adapter"]["size_bytes"] > 0
    assert [r["id"] for r in status["runs"]] == [run["id"]]


def test_409_with_the_running_id_and_cancel(api: TestClient, svc: Services, headers: dict[str, str],
                                            other: dict[str, str]) -> None:
    assert svc.training is not None
    gate = threading.Event()
    trainer = FakeTrainer(gate=gate)
    svc.training.trainer = trainer
    rate(api, headers, MIN)
    run = api.post("/api/training/start", headers=headers).json()
    assert trainer.started.wait(10)
    again = api.post("/api/training/start", headers=headers)
    assert again.status_code == 409
    assert again.json()["error"]["details"]["run_id"] == run["id"]
    for method, path in (("GET", f"/api/training/runs/{run['id']}"), ("POST", f"/api/training/runs/{run['id']}/cancel"),
                         ("GET", f"/api/training/runs/{uuid4()}")):
        response = api.request(method, path, headers=other)
        assert response.status_code == 404, response.text
        assert run["id"] not in response.text or path.endswith(("cancel", run["id"]))
    assert api.get("/api/training/status", headers=other).json()["runs"] == []
    cancelled = api.post(f"/api/training/runs/{run['id']}/cancel", headers=headers)
    assert cancelled.status_code == 200
    done = wait_for(api, headers, run["id"], lambda r: r["finished_at"] is not None)
    assert done["state"] == "cancelled"
    over = api.post(f"/api/training/runs/{run['id']}/cancel", headers=headers)
    assert over.status_code == 409 and over.json()["error"]["details"]["state"] == "cancelled"
    gate.set()


def test_feedback_for_another_users_or_an_unknown_message_is_the_same_404(api: TestClient, headers: dict[str, str],
                                                                         other: dict[str, str]) -> None:
    message = reply_id(api, headers)
    theirs = api.post("/api/training/feedback", json={"message_id": message, "rating": 1}, headers=other)
    unknown_id = str(uuid4())
    unknown = api.post("/api/training/feedback", json={"message_id": unknown_id, "rating": 1}, headers=other)
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"]["message"] == f"message {message} not found"
    assert unknown.json()["error"]["message"] == f"message {unknown_id} not found"


@pytest.mark.parametrize(("body", "field"), [
    ({"rating": 1}, "message_id"),
    ({"message_id": "not-a-uuid", "rating": 1}, "message_id"),
    ({"message_id": str(uuid4()), "rating": 2}, "rating"),
    ({"message_id": str(uuid4()), "rating": 1, "correction": "x" * 8001}, "correction"),
    ({"message_id": str(uuid4()), "rating": 1, "useful_memory_ids": ["nope"]}, "useful_memory_ids"),
])
def test_bad_feedback_is_422_naming_the_field(api: TestClient, headers: dict[str, str], body: dict, field: str) -> None:
    response = api.post("/api/training/feedback", json=body, headers=headers)
    assert response.status_code == 422, response.text
    fields = [f["field"] for f in response.json()["error"]["details"]["fields"]]
    assert any(f.startswith(field) for f in fields), fields


def test_a_read_only_key_reads_but_cannot_give_feedback(api: TestClient, svc: Services, headers: dict[str, str]) -> None:
    key, _ = svc.keys.create("reader", role="read-only")
    reader = {"Authorization": f"Bearer {key}"}
    assert api.get("/api/training/status", headers=reader).status_code == 200
    message = reply_id(api, headers)
    assert api.post("/api/training/feedback", json={"message_id": message, "rating": 1},
                    headers=reader).status_code == 403
    assert api.post("/api/training/start", headers=reader).status_code == 403


def test_disabled_lora_is_503_but_feedback_is_kept(make_services: Callable[..., Services],
                                                  make_settings: Callable[..., object],
                                                  make_client: Callable[[Services], TestClient]) -> None:
    services = make_services(make_settings())
    api = make_client(services)
    key, _ = services.keys.create("alice")
    headers = {"Authorization": f"Bearer {key}"}
    for method, path in (("GET", "/api/training/status"), ("POST", "/api/training/start"),
                         ("GET", f"/api/training/runs/{uuid4()}"), ("POST", f"/api/training/runs/{uuid4()}/cancel"),
                         ("GET", "/api/training/runs/not-a-uuid")):
        response = api.request(method, path, headers=headers)
        assert response.status_code == 503, (path, response.text)
        assert response.json()["error"]["message"] == DISABLED
    message = reply_id(api, headers)
    kept = api.post("/api/training/feedback", json={"message_id": message, "rating": 1}, headers=headers)
    assert kept.status_code == 200 and kept.json()["training_enabled"] is False
    assert api.post("/api/training/feedback", json={"rating": 1}, headers={}).status_code == 401
