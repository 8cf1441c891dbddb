"""POST /v1/chat and /v1/chat/stream."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from uuid import UUID, uuid4

import pytest

from assistant.errors import UpstreamError
from assistant.llm.base import ChatMessage, Delta
from assistant.llm.scripted import ScriptedChatModel


def is_uuid(value: str) -> bool:
    try:
        UUID(value)
    except (ValueError, TypeError):
        return False
    return True


def fields_of(response) -> list[str]:  # noqa: ANN001
    return [f["field"] for f in response.json()["error"]["details"]["fields"]]


# --- POST /v1/chat ---------------------------------------------------------------------------------


def test_chat_response_shape(client, auth, model: ScriptedChatModel) -> None:
    model.enqueue("The capital of France is Paris.")
    response = client.post("/v1/chat", json={"message": "What is the capital of France?"}, headers=auth)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"id", "conversation_id", "role", "content", "model", "tokens", "created_at", "tool_runs",
                         "memories"}
    assert is_uuid(body["id"])
    assert is_uuid(body["conversation_id"])
    assert body["role"] == "assistant"
    assert body["content"] == "The capital of France is Paris."
    assert body["model"] == "scripted"
    tokens = body["tokens"]
    assert set(tokens) == {"prompt", "completion", "total"}
    assert tokens["completion"] == 6
    assert tokens["prompt"] > 0
    assert tokens["total"] == tokens["prompt"] + tokens["completion"]
    assert body["created_at"].endswith("Z")
    created = datetime.fromisoformat(body["created_at"].replace("Z", "+00:00"))
    assert created.tzinfo is not None
    assert abs((datetime.now(UTC) - created).total_seconds()) < 3600  # a current UTC time, not local time


def test_chat_continues_a_conversation(client, auth, model: ScriptedChatModel) -> None:
    model.enqueue("Noted: you like tea.")
    first = client.post("/v1/chat", json={"message": "I like tea."}, headers=auth).json()
    second = client.post(
        "/v1/chat", json={"message": "What do I like?", "conversation_id": first["conversation_id"]}, headers=auth
    )
    assert second.status_code == 200
    assert second.json()["conversation_id"] == first["conversation_id"]
    assert second.json()["id"] != first["id"]
    messages, _ = model.calls[-1]
    assert [m for m in messages if m.role != "system"] == [
        ChatMessage("user", "I like tea."),
        ChatMessage("assistant", "Noted: you like tea."),
        ChatMessage("user", "What do I like?"),
    ]


def test_new_chats_get_new_conversations(client, auth) -> None:
    a = client.post("/v1/chat", json={"message": "one"}, headers=auth).json()
    b = client.post("/v1/chat", json={"message": "two"}, headers=auth).json()
    assert a["conversation_id"] != b["conversation_id"]


def test_unknown_conversation_is_404(client, auth, model: ScriptedChatModel) -> None:
    response = client.post("/v1/chat", json={"message": "hi", "conversation_id": str(uuid4())}, headers=auth)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "NOT_FOUND"
    assert error["message"]
    assert error["request_id"] == response.headers["x-request-id"]
    assert model.calls == []


def test_another_users_conversation_is_404(client, auth, services) -> None:
    mine = client.post("/v1/chat", json={"message": "private"}, headers=auth).json()
    other_key, _ = services.keys.create("someone-else", user_id=uuid4())
    response = client.post(
        "/v1/chat",
        json={"message": "hi", "conversation_id": mine["conversation_id"]},
        headers={"Authorization": f"Bearer {other_key}"},
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"


def test_invalid_conversation_id_is_422(client, auth) -> None:
    response = client.post("/v1/chat", json={"message": "hi", "conversation_id": "not-a-uuid"}, headers=auth)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert fields_of(response) == ["conversation_id"]


def test_options_reach_the_model(client, auth, model: ScriptedChatModel) -> None:
    response = client.post(
        "/v1/chat",
        json={"message": "hi", "temperature": 0.25, "max_tokens": 40, "system_prompt": "Answer in French.",
              "model": "another-model"},
        headers=auth,
    )
    assert response.status_code == 200
    assert response.json()["model"] == "another-model"
    messages, options = model.calls[0]
    assert messages[0] == ChatMessage("system", "Answer in French.")
    assert (options.temperature, options.max_tokens, options.model) == (0.25, 40, "another-model")


@pytest.mark.parametrize("temperature", [0.0, 2.0])
def test_temperature_bounds_are_inclusive(client, auth, temperature: float) -> None:
    assert client.post("/v1/chat", json={"message": "hi", "temperature": temperature}, headers=auth).status_code == 200


@pytest.mark.parametrize("temperature", [2.5, -0.1])
def test_temperature_out_of_range_is_422(client, auth, temperature: float) -> None:
    response = client.post("/v1/chat", json={"message": "hi", "temperature": temperature}, headers=auth)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert "temperature" in fields_of(response)
    [field] = error["details"]["fields"]
    assert field["error"]


@pytest.mark.parametrize("message", ["", "   ", "\n\t"])
def test_empty_message_is_422(client, auth, message: str) -> None:
    response = client.post("/v1/chat", json={"message": message}, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["message"]


def test_missing_message_is_422(client, auth) -> None:
    response = client.post("/v1/chat", json={"temperature": 0.5}, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["message"]


def test_too_long_message_is_422(client, auth) -> None:
    response = client.post("/v1/chat", json={"message": "x" * 32_001}, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": "hi", "temperature": "hot"}, "temperature"),
        ({"message": "hi", "max_tokens": "x"}, "max_tokens"),
        ({"message": "hi", "max_tokens": 0}, "max_tokens"),
        ({"message": 42}, "message"),
        ({"message": "hi", "enabled_tools": "get_weather"}, "enabled_tools"),
        ({"message": "hi", "unknown_field": 1}, "unknown_field"),
    ],
)
def test_wrong_fields_are_422(client, auth, body: dict, field: str) -> None:
    response = client.post("/v1/chat", json=body, headers=auth)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert field in fields_of(response)


def test_max_tokens_above_the_context_length_is_422(client, auth, services) -> None:
    limit = services.settings.inference.context_length
    response = client.post("/v1/chat", json={"message": "hi", "max_tokens": limit + 1}, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["max_tokens"]


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream"])
def test_unknown_tools_are_422_naming_them(client, auth, path: str, model: ScriptedChatModel) -> None:
    response = client.post(path, json={"message": "hi", "enabled_tools": ["get_weather"]}, headers=auth)
    assert response.status_code == 422
    [field] = response.json()["error"]["details"]["fields"]
    assert field["field"] == "enabled_tools"
    assert "get_weather" in field["error"]
    assert model.calls == []


def test_null_enabled_tools_means_all(client, auth) -> None:
    assert client.post("/v1/chat", json={"message": "hi", "enabled_tools": None}, headers=auth).status_code == 200


# --- POST /v1/chat/stream ----------------------------------------------------------------------------


def test_stream_events(client, auth, model: ScriptedChatModel, sse) -> None:
    model.enqueue("Streaming works one token at a time.")
    response = client.post("/v1/chat/stream", json={"message": "stream please"}, headers=auth)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse(response.text)
    names = [name for name, _ in events]
    assert names[-1] == "done"
    assert set(names[:-1]) == {"message"}
    assert len(names) == 1 + 7
    assert all(set(data) == {"delta"} for _, data in events[:-1])
    assert "".join(data["delta"] for _, data in events[:-1]) == "Streaming works one token at a time."
    done = events[-1][1]
    tokens = done["tokens"]
    assert set(tokens) == {"prompt", "completion", "total"}
    assert tokens["completion"] == 7
    assert tokens["total"] == tokens["prompt"] + tokens["completion"]


def test_streamed_exchange_is_persisted_and_can_be_continued(client, auth, model: ScriptedChatModel, sse) -> None:
    model.enqueue("Remembered: blue.")
    events = sse(client.post("/v1/chat/stream", json={"message": "My colour is blue."}, headers=auth).text)
    done = events[-1][1]
    conversation_id = done["conversation_id"]
    assert is_uuid(conversation_id)
    response = client.post(
        "/v1/chat/stream", json={"message": "What is my colour?", "conversation_id": conversation_id}, headers=auth
    )
    assert response.status_code == 200
    messages, _ = model.calls[-1]
    assert [m for m in messages if m.role != "system"] == [
        ChatMessage("user", "My colour is blue."),
        ChatMessage("assistant", "Remembered: blue."),
        ChatMessage("user", "What is my colour?"),
    ]
    assert sse(response.text)[-1][1]["conversation_id"] == conversation_id
    plain = client.post("/v1/chat", json={"message": "again", "conversation_id": conversation_id}, headers=auth)
    assert plain.status_code == 200


def test_stream_and_plain_chat_agree(client, auth, model: ScriptedChatModel, sse) -> None:
    events = sse(client.post("/v1/chat/stream", json={"message": "same words"}, headers=auth).text)
    streamed = "".join(d["delta"] for n, d in events if n == "message")
    plain = client.post("/v1/chat", json={"message": "same words"}, headers=auth).json()
    assert streamed == plain["content"] == "You said: same words"
    # Completion tokens agree; the prompts differ: the first exchange was learned as a memory and
    # is injected into the second request's system prompt.
    assert events[-1][1]["tokens"]["completion"] == plain["tokens"]["completion"]


def test_stream_errors_before_the_first_token_are_plain_responses(client, auth, model: ScriptedChatModel) -> None:
    response = client.post("/v1/chat/stream", json={"message": "hi", "conversation_id": str(uuid4())}, headers=auth)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "NOT_FOUND"
    model.enqueue(error=UpstreamError("engine exploded"))
    response = client.post("/v1/chat/stream", json={"message": "hi"}, headers=auth)
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "UPSTREAM_ERROR"


class FailsAfterOneToken(ScriptedChatModel):
    def stream(self, messages, options):  # noqa: ANN001, ANN201
        self.calls.append((list(messages), options))
        yield Delta("partial")
        raise UpstreamError("connection to the engine dropped")


def test_stream_error_after_tokens_is_an_error_event(make_settings, make_services, make_client, sse) -> None:
    services = make_services(make_settings(), FailsAfterOneToken())
    client = make_client(services)
    key, _ = services.keys.create("k")
    response = client.post("/v1/chat/stream", json={"message": "hi"}, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200
    events = sse(response.text)
    assert events[0] == ("message", {"delta": "partial"})
    name, data = events[-1]
    assert name == "error"
    assert data["error"]["code"] == "UPSTREAM_ERROR"
    assert data["error"]["request_id"] == response.headers["x-request-id"]
    assert "done" not in [n for n, _ in events]
    assert services.db.scalar("SELECT count(*) FROM messages") == 0  # a failed answer is not stored


def test_stream_sse_data_is_json(client, auth) -> None:
    response = client.post("/v1/chat/stream", json={"message": "quote \" and newline\n"}, headers=auth)
    data_lines = [line for line in response.text.replace("\r\n", "\n").split("\n") if line.startswith("data:")]
    assert data_lines
    for line in data_lines:
        json.loads(line[5:])


# --- agent profiles: mentioned_profile_ids and @name --------------------------------------------------


def make_profile(client, auth, **body) -> dict:
    response = client.post("/v1/agent-profiles", json=body, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


def send(client, auth, path: str, body: dict, sse):
    response = client.post(path, json=body, headers=auth)
    assert response.status_code == 200, response.text
    if path.endswith("/stream"):
        assert sse(response.text)[-1][0] == "done"
    return response


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream"])
def test_a_mentioned_profile_id_shapes_what_the_model_receives(client, auth, services, path: str,
                                                               model: ScriptedChatModel, sse) -> None:
    p = make_profile(client, auth, name="coder", role="Writes Python.", skills=["python"],
                     style={"tone": "dry", "verbosity": "terse", "reasoning_depth": "deep"},
                     system_prompt_template="You are {name}. The user asks: {user_prompt}",
                     inference_overrides={"temperature": 0.3}, autonomy_level="low")
    send(client, auth, path, {"message": "fix the bug", "mentioned_profile_ids": [p["id"]]}, sse)
    messages, options = model.calls[0]
    system = messages[0]
    assert system.role == "system"
    assert system.content.startswith(services.settings.inference.system_prompt + "\n\n"
                                     "You are coder. The user asks: fix the bug\n\nTone: dry.\nVerbosity: terse")
    assert "Reasoning: deep" in system.content and "Skills: python." in system.content
    assert "Autonomy: low" in system.content
    assert messages[-1] == ChatMessage("user", "fix the bug")
    assert (options.temperature, options.max_tokens) == (0.3, 256)


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream"])
def test_an_at_name_in_the_message_applies_the_profile(client, auth, path: str, model: ScriptedChatModel,
                                                       sse) -> None:
    make_profile(client, auth, name="Reviewer", emoji="🔍", inference_overrides={"temperature": 1.1})
    send(client, auth, path, {"message": "@reviewer please look, and ask @nobody"}, sse)
    messages, options = model.calls[0]
    assert "You are Reviewer 🔍." in messages[0].content
    assert options.temperature == 1.1
    assert messages[-1].content == "@reviewer please look, and ask @nobody"


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream"])
def test_request_values_win_over_the_profile(client, auth, path: str, model: ScriptedChatModel, sse) -> None:
    p = make_profile(client, auth, name="coder", skills=["list_reminders"],
                     inference_overrides={"temperature": 0.3, "max_tokens": 300, "model": "profile-model"})
    send(client, auth, path, {"message": "@coder hi"}, sse)
    send(client, auth, path, {"message": "hi", "mentioned_profile_ids": [p["id"]], "temperature": 0.9,
                              "max_tokens": 20, "model": "request-model", "system_prompt": "Be brief.",
                              "enabled_tools": ["create_reminder"]}, sse)
    (_, by_profile), (messages, by_request) = model.calls[0], model.calls[1]
    assert (by_profile.temperature, by_profile.max_tokens, by_profile.model) == (0.3, 300, "profile-model")
    assert [t.name for t in by_profile.tools] == ["list_reminders"]
    assert (by_request.temperature, by_request.max_tokens, by_request.model) == (0.9, 20, "request-model")
    assert [t.name for t in by_request.tools] == ["create_reminder"]
    assert messages[0].content.startswith("Be brief.\n\nYou are coder.")


@pytest.mark.parametrize("path", ["/v1/chat", "/v1/chat/stream"])
def test_unknown_profile_ids_are_422_naming_them(client, auth, services, path: str,
                                                 model: ScriptedChatModel) -> None:
    other_key, _ = services.keys.create("someone-else", user_id=uuid4())
    theirs = make_profile(client, {"Authorization": f"Bearer {other_key}"}, name="coder")
    response = client.post(path, json={"message": "hi", "mentioned_profile_ids": ["p-1", theirs["id"]]}, headers=auth)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["fields"] == [
        {"field": "mentioned_profile_ids", "error": "unknown agent profile 'p-1'"},
        {"field": "mentioned_profile_ids", "error": f"unknown agent profile {theirs['id']!r}"},
    ]
    assert model.calls == []


def test_several_profiles_the_first_mentioned_is_primary(client, auth, model: ScriptedChatModel) -> None:
    make_profile(client, auth, name="alpha", role="Plans.", inference_overrides={"temperature": 0.1})
    beta = make_profile(client, auth, name="beta", role="Builds.", inference_overrides={"temperature": 0.9})
    response = client.post("/v1/chat", json={"message": "@alpha with @beta", "mentioned_profile_ids": [beta["id"]]},
                           headers=auth)
    assert response.status_code == 200
    messages, options = model.calls[0]
    assert "You are beta. Your role: Builds." in messages[0].content
    assert messages[0].content.endswith("\n- alpha: Plans.")
    assert options.temperature == 0.9
