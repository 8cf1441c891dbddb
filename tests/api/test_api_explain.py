"""GET /api/chat/{message_id}/explain and GET /api/v1/cognitive-load over HTTP: the spec's shape, roles,
owner rule, the 404 reasons, 422 for a malformed id, 503 while disabled."""

from __future__ import annotations

from uuid import uuid4

import pytest

from assistant.extended.cognitive import COMPONENTS

EXPLAIN = "/api/chat/{}/explain"


def answer(client, auth, message: str = "hello") -> dict:  # noqa: ANN001
    response = client.post("/v1/chat", json={"message": message, "enabled_tools": []}, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


def without_request_id(body: dict) -> dict:
    return {k: v for k, v in body["error"].items() if k != "request_id"}


def test_an_answer_is_explained(client, auth, services) -> None:  # noqa: ANN001
    services.memory.add(str(services.keys.owner_user_id()), "My sister Anna lives in Reykjavik.")
    reply = answer(client, auth, "Where does my sister Anna live?")
    response = client.get(EXPLAIN.format(reply["id"]), headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body["steps"], list) and body["steps"] and isinstance(body["summary"], list)
    assert body["message_id"] == reply["id"] and body["conversation_id"] == reply["conversation_id"]
    assert body["model"] == reply["model"] and body["engine"] == "scripted"
    assert body["tokens"]["prompt"] == reply["tokens"]["prompt"]
    assert body["tokens"]["completion"] == reply["tokens"]["completion"]
    for step in body["steps"]:
        assert set(step) == {"kind", "label", "started_ms", "duration_ms", "data"}
    (memories,) = [s for s in body["steps"] if s["kind"] == "memories"]
    injected = [c["id"] for c in memories["data"]["candidates"] if c["status"] == "injected"]
    assert injected == [m["id"] for m in reply["memories"]]


def test_a_streamed_answer_is_explained_by_its_message_id(client, auth, sse) -> None:  # noqa: ANN001
    response = client.post("/v1/chat/stream", json={"message": "hello", "enabled_tools": []}, headers=auth)
    done = [data for name, data in sse(response.text) if name == "done"][0]
    body = client.get(EXPLAIN.format(done["message_id"]), headers=auth).json()
    assert body["message_id"] == done["message_id"] and body["tokens"]["completion"] == done["tokens"]["completion"]


def test_read_only_and_x_api_key_may_read(client, auth, read_only_auth, api_key) -> None:  # noqa: ANN001
    reply = answer(client, auth)
    assert client.get(EXPLAIN.format(reply["id"]), headers=read_only_auth).status_code == 200
    assert client.get(EXPLAIN.format(reply["id"]), headers={"X-API-Key": api_key}).status_code == 200
    assert client.get(EXPLAIN.format(reply["id"])).status_code == 401


def test_another_users_answer_is_404_like_an_unknown_one(client, auth, services) -> None:  # noqa: ANN001
    reply = answer(client, auth)
    key, _ = services.keys.create("other", user_id=uuid4())
    other = {"Authorization": f"Bearer {key}"}
    theirs = client.get(EXPLAIN.format(reply["id"]), headers=other)
    unknown_id = str(uuid4())
    unknown = client.get(EXPLAIN.format(unknown_id), headers=other)
    assert theirs.status_code == unknown.status_code == 404
    assert without_request_id(theirs.json()) == {"code": "NOT_FOUND", "message": f"message {reply['id']} not found"}
    assert without_request_id(unknown.json()) == {"code": "NOT_FOUND", "message": f"message {unknown_id} not found"}
    assert "Reykjavik" not in theirs.text and str(services.keys.owner_user_id()) not in theirs.text


def test_an_answer_stored_before_recording_is_404_with_the_reason(client, auth, services) -> None:  # noqa: ANN001
    user = services.keys.owner_user_id()
    _, old, _ = services.conversations.record_exchange(
        user_id=user, conversation_id=None, user_message="q", reply="a", model="m", prompt_tokens=1,
        completion_tokens=1)
    services.db.execute("UPDATE messages SET created_at = '2020-01-01T00:00:00.000Z' WHERE id = ?", (old,))
    response = client.get(EXPLAIN.format(old), headers=auth)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "NOT_FOUND" and "predates explanation recording" in error["message"]
    assert error["details"]["reason"] == "predates_recording" and error["details"]["recording_began_at"]


def test_the_users_own_message_is_not_an_answer(client, auth, services) -> None:  # noqa: ANN001
    reply = answer(client, auth)
    question = services.conversations.messages(reply["conversation_id"])[0]
    response = client.get(EXPLAIN.format(question.id), headers=auth)
    assert response.status_code == 404 and response.json()["error"]["details"]["reason"] == "not_an_answer"


def test_a_malformed_id_is_422_naming_it(client, auth) -> None:  # noqa: ANN001
    response = client.get(EXPLAIN.format("not-a-uuid"), headers=auth)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [f["field"] for f in error["details"]["fields"]] == ["message_id"]


@pytest.fixture
def disabled(make_settings, make_services, make_client, model):  # noqa: ANN001, ANN201
    services = make_services(make_settings(sovereign_intelligence={"enabled": False},
                                           cognitive_load={"enabled": False}), model)
    key, _ = services.keys.create("k")
    return make_client(services), {"Authorization": f"Bearer {key}"}, services


def test_disabled_is_503_naming_the_key_before_the_id(disabled) -> None:  # noqa: ANN001
    client, auth, services = disabled
    reply = answer(client, auth)
    assert services.db.scalar("SELECT count(*) FROM explanations") == 0
    for ident in (reply["id"], "not-a-uuid"):
        response = client.get(EXPLAIN.format(ident), headers=auth)
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "sovereign_intelligence.enabled = false" in error["message"]
    response = client.get("/api/v1/cognitive-load", headers=auth)
    assert response.status_code == 503 and "cognitive_load.enabled = false" in response.json()["error"]["message"]


@pytest.fixture
def cognitive(make_settings, make_services, make_client, model):  # noqa: ANN001, ANN201
    services = make_services(make_settings(cognitive_load={"enabled": True}), model)
    key, _ = services.keys.create("k")
    reader, _ = services.keys.create("r", role="read-only")
    return make_client(services), {"Authorization": f"Bearer {key}"}, {"Authorization": f"Bearer {reader}"}, services


def test_the_callers_cognitive_load(cognitive) -> None:  # noqa: ANN001
    client, auth, reader, services = cognitive
    first = client.get("/api/v1/cognitive-load", headers=reader)
    assert first.status_code == 200, first.text
    body = first.json()
    assert set(body["components"]) == set(COMPONENTS) and 0.0 <= body["load"] <= 1.0
    assert body["weights"] == {"circadian": 0.3, "duration": 0.25, "latency": 0.2, "complexity": 0.15,
                               "multitask": 0.1}
    assert body["format"] in ("Narrative", "BulletPoints", "TlDrFirst")
    assert body["details"]["messages_in_session"] == 0
    for n in range(3):  # three conversations at once: multitasking
        answer(client, auth, f"topic {n}")
    after = client.get("/api/v1/cognitive-load", headers=auth).json()
    assert after["details"]["messages_in_session"] == 3 and after["details"]["conversations_in_window"] == 3
    assert after["components"]["multitask"] == pytest.approx(2 / 3, abs=1e-4)
    # another user's activity is not the caller's
    key, _ = services.keys.create("other", user_id=uuid4())
    theirs = client.get("/api/v1/cognitive-load", headers={"Authorization": f"Bearer {key}"}).json()
    assert theirs["details"]["messages_in_session"] == 0 and theirs["components"]["multitask"] == 0.0
    # the answers were explained with the estimate that shaped them
    (step,) = [s for s in client.get(EXPLAIN.format(answer(client, auth)["id"]), headers=auth).json()["steps"]
               if s["kind"] == "cognitive_load"]
    assert set(step["data"]["components"]) == set(COMPONENTS)
