"""The distillation routes (/api/distillation) over HTTP: 503 naming distillation.enabled while disabled (before
the body), a precise 503 while lora.enabled is false or no teacher is configured, a run started (202) from the
caller's own past questions and followed to its end, a given prompt list, 422 for bad or too few prompts, 409
while a run is under way, cancel, roles (read-only reads, cannot start), another user's run 404, the teacher's
key never shown, and the real training service refusing a dataset when its base model is missing.

Real storage and the real Distillation service; its teacher and (except in the last test) its training pipeline
are the fakes of tests/assistant/learning/distill_fakes.py."""

from __future__ import annotations

import threading
import time
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from assistant.learning.types import RunState
from assistant.services import Services
from tests.assistant.learning.distill_fakes import FakeRun, FakeTeacher, FakeTraining

D = "/api/distillation"
TEACHER = {"teacher_base_url": "https://gpu-box:8443/v1", "teacher_model": "big-teacher",
           "teacher_api_key": "sk-do-not-show"}


def ask(services: Services, user: str, *questions: str) -> None:
    for i, q in enumerate(questions):
        services.conversations.record_exchange(user_id=user, conversation_id=None, user_message=q, reply="ok",
                                               model="m", prompt_tokens=1, completion_tokens=1,
                                               at=f"2025-01-01T00:00:{i:02d}Z")


@pytest.fixture
def distil(make_settings, make_services, make_client, model):  # noqa: ANN001, ANN201
    services = make_services(make_settings(distillation={"enabled": True, **TEACHER},
                                           lora={"enabled": True, "min_samples": 3}), model)
    key, _ = services.keys.create("owner")
    reader, _ = services.keys.create("reader", user_id=services.keys.owner_user_id(), role="read-only")
    other, _ = services.keys.create("other", user_id=uuid4())
    auth = {name: {"Authorization": f"Bearer {k}"} for name, k in (("a", key), ("reader", reader), ("b", other))}
    teacher, training = FakeTeacher(), FakeTraining()
    services.distillation.teachers = lambda user_id: teacher
    services.distillation.training = training
    services.distillation.poll_secs = 0.01
    return make_client(services), services, auth, teacher, training


def until(client: TestClient, headers: dict[str, str], done) -> dict:  # noqa: ANN001
    deadline = time.monotonic() + 60  # a bound against hangs, not a timing assertion
    while True:
        body = client.get(f"{D}/status", headers=headers).json()
        if done(body) or time.monotonic() > deadline:
            return body
        time.sleep(0.02)


def test_disabled_is_503_naming_the_key_before_the_body(client: TestClient, auth: dict[str, str]) -> None:
    for method, path, body in (("POST", f"{D}/start", {"prompts": "not a list"}), ("GET", f"{D}/status", None),
                               ("POST", f"{D}/cancel", None)):
        response = client.request(method, path, json=body, headers=auth)
        assert response.status_code == 503, (path, response.text)
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "distillation.enabled = false" in error["message"]


@pytest.mark.parametrize(("sections", "named"), [
    ({"distillation": {"enabled": True, **TEACHER}}, "lora.enabled = false"),
    ({"distillation": {"enabled": True}, "lora": {"enabled": True}}, "distillation.teacher_base_url"),
])
def test_start_is_a_precise_503_without_lora_or_teacher(make_settings, make_services, make_client, sections,  # noqa: ANN001
                                                         named) -> None:
    services = make_services(make_settings(**sections))
    key, _ = services.keys.create("owner")
    client, auth = make_client(services), {"Authorization": f"Bearer {key}"}
    response = client.post(f"{D}/start", json={"prompts": 7}, headers=auth)  # refused before the body
    assert response.status_code == 503 and named in response.json()["error"]["message"]
    status = client.get(f"{D}/status", headers=auth).json()
    assert status["phase"] == "idle" and status["ready"] is False and named in status["unavailable"]


def test_a_run_from_past_questions_to_active(distil) -> None:  # noqa: ANN001
    client, services, auth, teacher, training = distil
    owner = str(services.keys.owner_user_id())
    ask(services, owner, "What is RAG?", "Explain LoRA", "what is rag?", "Plan my week")
    ask(services, str(uuid4()), "not the caller's question")
    idle = client.get(f"{D}/status", headers=auth["a"]).json()
    assert idle["phase"] == "idle" and idle["ready"] and idle["teacher"] == {
        "engine": "openai_compatible", "model": "big-teacher", "host": "https://gpu-box:8443"}
    started = client.post(f"{D}/start", headers=auth["a"])
    assert started.status_code == 202, started.text
    body = started.json()
    assert body["phase"] == "collecting" and body["prompts"] == 3 and body["prompt_source"] == "history"
    assert "sk-do-not-show" not in started.text
    training_phase = until(client, auth["a"], lambda b: b["phase"] == "training")
    assert training_phase["answered"] == 3 and training_phase["dataset_size"] == 3 and training_phase["done"] == 3
    assert sorted(teacher.asked) == ["Explain LoRA", "Plan my week", "what is rag?"]
    assert [s.messages[-1]["content"] for s in training.started[0][1]] == ["Plan my week", "what is rag?",
                                                                           "Explain LoRA"]
    training.finish(RunState.ACTIVE)
    final = until(client, auth["reader"], lambda b: b["phase"] == "active")  # a read-only key reads it
    assert final["progress"] == 1.0 and final["training_run_id"] in training.runs and final["finished_at"]
    assert client.get(f"{D}/status", params={"run_id": final["run_id"]}, headers=auth["a"]).json()["phase"] == "active"
    assert client.get(f"{D}/status", params={"run_id": final["run_id"]}, headers=auth["b"]).status_code == 404
    assert client.get(f"{D}/status", headers=auth["b"]).json()["phase"] == "idle"
    assert client.get(f"{D}/status", params={"run_id": "nope"}, headers=auth["a"]).status_code == 422


def test_given_prompts_are_checked(distil) -> None:  # noqa: ANN001
    client, services, auth, _, _ = distil
    too_long = client.post(f"{D}/start", json={"prompts": ["ok", "", "x" * 4001]}, headers=auth["a"])
    assert too_long.status_code == 422
    assert [f["field"] for f in too_long.json()["error"]["details"]["fields"]] == ["prompts[1]", "prompts[2]"]
    few = client.post(f"{D}/start", json={"prompts": ["a", "A", "b"]}, headers=auth["a"])
    assert few.status_code == 422 and "lora.min_samples = 3" in few.json()["error"]["message"]
    many = client.post(f"{D}/start", json={"prompts": [f"p{i}" for i in range(201)]}, headers=auth["a"])
    assert many.status_code == 422 and "distillation.max_prompts" in many.text
    extra = client.post(f"{D}/start", json={"prompt": ["a"]}, headers=auth["a"])
    assert extra.status_code == 422 and extra.json()["error"]["details"]["fields"][0]["field"] == "prompt"
    history = client.post(f"{D}/start", headers=auth["a"])  # no past questions yet
    assert history.status_code == 422 and "0 distinct past questions" in history.json()["error"]["message"]
    assert client.post(f"{D}/start", json={"prompts": ["a", "b", "c"]}, headers=auth["reader"]).status_code == 403


def test_409_while_under_way_then_cancel(distil) -> None:  # noqa: ANN001
    client, services, auth, teacher, training = distil
    teacher.gate = threading.Semaphore(0)
    run_id = client.post(f"{D}/start", json={"prompts": ["a", "b", "c"]}, headers=auth["a"]).json()["run_id"]
    second = client.post(f"{D}/start", json={"prompts": ["d", "e", "f"]}, headers=auth["a"])
    assert second.status_code == 409 and second.json()["error"]["details"] == {"run_id": run_id,
                                                                               "kind": "distillation"}
    assert client.post(f"{D}/cancel", headers=auth["b"]).status_code == 404  # not theirs: none under way for them
    assert client.post(f"{D}/cancel", headers=auth["reader"]).status_code == 403
    cancelled = client.post(f"{D}/cancel", headers=auth["a"])
    assert cancelled.status_code == 202 and cancelled.json()["run_id"] == run_id
    final = until(client, auth["a"], lambda b: b["phase"] == "cancelled")
    assert final["phase"] == "cancelled" and not training.started
    assert client.post(f"{D}/cancel", headers=auth["a"]).status_code == 404
    training.busy[str(services.keys.owner_user_id())] = FakeRun("t-1", RunState.TRAINING.value)
    busy = client.post(f"{D}/start", json={"prompts": ["d", "e", "f"]}, headers=auth["a"])
    assert busy.status_code == 409 and busy.json()["error"]["details"] == {"run_id": "t-1", "kind": "training"}


def test_the_real_training_service_refuses_without_its_base_model(make_settings, make_services,  # noqa: ANN001
                                                                  make_client, tmp_path) -> None:
    services = make_services(make_settings(
        distillation={"enabled": True, **TEACHER},
        lora={"enabled": True, "min_samples": 3, "base_model_path": str(tmp_path / "missing.gguf")}))
    key, _ = services.keys.create("owner")
    services.distillation.teachers = lambda user_id: FakeTeacher()
    client, auth = make_client(services), {"Authorization": f"Bearer {key}"}
    assert client.post(f"{D}/start", json={"prompts": ["a", "b", "c"]}, headers=auth).status_code == 202
    final = until(client, auth, lambda b: b["phase"] not in ("collecting", "training", "evaluating"))
    assert final["phase"] == "failed" and final["dataset_size"] == 3
    assert final["error"].startswith("the training pipeline refused the dataset: LoRA training needs the base model")
