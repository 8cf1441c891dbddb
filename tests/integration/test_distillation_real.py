"""Distillation with a REAL teacher: this project's own server on loopback, serving the packaged small model
(SmolLM2-135M on llama.cpp) at its OpenAI-compatible ``/v1/chat/completions``, answers the student's past
questions over HTTP; the student's ``POST /api/distillation/start`` collects those real answers into the dataset
handed to the training pipeline. A wrong teacher key is then a run failed with the counts.

The training pipeline here is the fake of tests/assistant/learning/distill_fakes.py (it records the dataset and
is moved to ``active`` by the test): training, conversion and the activation rule with the real trainer are the
training service's integration test's. Everything else is real: the teacher engine (assistant/llm/openai_compat.py
built from ``[distillation]``), the HTTP hop, the sealed conversation store the questions come from."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from assistant.config.extended import DistillationSettings
from assistant.learning.types import RunState
from assistant.llm.catalog import SMALL_MODEL
from tests.assistant.learning.distill_fakes import FakeTraining
from tests.integration.support import serve

pytestmark = pytest.mark.integration

QUESTIONS = ("Name one planet of the solar system.", "What colour is the sky on a clear day?",
             "name one planet of the  solar system.", "How many legs does a cat have?")
D = "/api/distillation"


def until(client: TestClient, headers: dict[str, str], phases: set[str]) -> dict:
    deadline = time.monotonic() + 300  # a bound against hangs, not a timing assertion
    while True:
        body = client.get(f"{D}/status", headers=headers).json()
        if body["phase"] in phases or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def test_a_real_teacher_answers_the_users_questions_into_the_dataset(tmp_path: Path, small_model_path: Path,
                                                                       make_settings, make_services,  # noqa: ANN001
                                                                       make_client) -> None:  # noqa: ANN001
    teacher, teacher_key = serve(
        tmp_path / "teacher", security={"rate_limit_enabled": False}, memory={"enabled": False},
        inference={"model": SMALL_MODEL, "model_path": str(small_model_path), "threads": 1, "temperature": 0.0})
    with teacher:
        served = httpx.get(f"{teacher.base_url}/v1/models", headers={"Authorization": f"Bearer {teacher_key}"},
                           timeout=60).json()
        model_id = next(m["id"] for m in served["data"])
        distillation = {"enabled": True, "teacher_engine": "openai_compatible",
                        "teacher_base_url": f"{teacher.base_url}/v1", "teacher_model": model_id,
                        "teacher_api_key": teacher_key, "max_tokens": 24, "temperature": 0.0, "timeout_secs": 300}
        student = make_services(make_settings(distillation=distillation, lora={"enabled": True, "min_samples": 3}))
        training = FakeTraining()
        student.distillation.training, student.distillation.poll_secs = training, 0.05
        key, principal = student.keys.create("student")
        headers = {"Authorization": f"Bearer {key}"}
        for i, question in enumerate(QUESTIONS):  # a second apart, in this order
            student.conversations.record_exchange(user_id=principal.user_id, conversation_id=None,
                                                  user_message=question, reply="(the student's answer)", model="s",
                                                  prompt_tokens=1, completion_tokens=1, at=f"2025-01-01T00:00:0{i}Z")
        client = make_client(student)

        started = client.post(f"{D}/start", headers=headers)
        assert started.status_code == 202, started.text
        assert started.json()["prompts"] == 3 and started.json()["teacher"] == {
            "engine": "openai_compatible", "model": model_id, "host": teacher.base_url}
        assert teacher_key not in started.text
        handed = until(client, headers, {"training", "failed"})
        assert handed["phase"] == "training", handed["error"]
        assert (handed["answered"], handed["failed"], handed["flagged"], handed["dataset_size"]) == (3, 0, 0, 3)
        (user, samples), = training.started
        assert user == str(principal.user_id)
        asked = [s.messages[-1]["content"] for s in samples]
        assert asked == ["How many legs does a cat have?", "name one planet of the  solar system.",
                         "What colour is the sky on a clear day?"]  # newest first: the older wording dropped
        for sample in samples:
            assert sample.source == "distillation" and sample.messages[0]["role"] == "system"
            assert sample.answer.strip() and sample.answer != sample.messages[-1]["content"]
            assert sample.answer != "(the student's answer)"  # the teacher's, not what the student once said
        training.finish(RunState.ACTIVE)
        assert until(client, headers, {"active"})["phase"] == "active"

        student.distillation.settings = DistillationSettings(**distillation | {"teacher_api_key": "wrong-key"})
        student.distillation.teachers = _real_teachers(student)
        assert client.post(f"{D}/start", headers=headers).status_code == 202
        refused = until(client, headers, {"failed", "training"})
        assert (refused["phase"], refused["answered"], refused["failed"]) == ("failed", 0, 3)
        assert refused["error"] == ("the teacher gave 0 usable answers to 3 prompts (3 failed, 0 flagged by the "
                                    "defence); training needs at least lora.min_samples = 3")
        assert len(training.started) == 1


def _real_teachers(services):  # noqa: ANN001, ANN202
    from assistant.learning.distill_teacher import engine_teachers

    return engine_teachers(services.distillation.settings, services.data_dir,
                           system_prompt=services.settings.inference.system_prompt, detector=services.defence)
