"""/v1/agent-profiles: every route, its shapes, errors, auth and isolation."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID, uuid4

import pytest

PROFILE_KEYS = {"id", "name", "role", "emoji", "skills", "style", "system_prompt_template", "inference_overrides",
                "autonomy_level", "created_at", "updated_at"}
FULL = {
    "name": "Coder",
    "role": "Writes and reviews Python.",
    "emoji": "🐍",
    "skills": ["python", "execute_code"],
    "style": {"tone": "dry", "verbosity": "terse", "reasoning_depth": "deep"},
    "system_prompt_template": "You are {name} {emoji}, {role} Today is {date}.",
    "inference_overrides": {"temperature": 0.2, "max_tokens": 300, "model": "qwen"},
    "autonomy_level": "low",
}


def fields_of(response) -> dict[str, str]:
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR", response.text
    return {f["field"]: f["error"] for f in error["details"]["fields"]}


def create(client, auth, **body) -> dict:
    response = client.post("/v1/agent-profiles", json={"name": "coder", **body}, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def other_auth(services) -> dict[str, str]:
    key, _ = services.keys.create("other", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


# --- POST /v1/agent-profiles ------------------------------------------------------------------------


def test_create_returns_the_stored_profile(client, auth) -> None:
    response = client.post("/v1/agent-profiles", json=FULL, headers=auth)
    assert response.status_code == 201
    body = response.json()
    assert set(body) == PROFILE_KEYS
    assert UUID(body["id"])
    assert {k: body[k] for k in FULL} == FULL
    assert body["created_at"].endswith("Z")
    datetime.fromisoformat(body["created_at"])
    assert body["updated_at"] == body["created_at"]
    assert client.get(f"/v1/agent-profiles/{body['id']}", headers=auth).json() == body


def test_only_the_name_is_required(client, auth) -> None:
    body = create(client, auth)
    assert {k: body[k] for k in PROFILE_KEYS - {"id", "created_at", "updated_at"}} == {
        "name": "coder", "role": "", "emoji": "", "skills": [], "system_prompt_template": "",
        "style": {"tone": "", "verbosity": "normal", "reasoning_depth": "standard"},
        "inference_overrides": {"temperature": None, "max_tokens": None, "model": None},
        "autonomy_level": "medium",
    }


def test_names_are_unique_per_user_ignoring_case(client, auth, other_auth) -> None:
    first = create(client, auth, name="Coder")
    response = client.post("/v1/agent-profiles", json={"name": "cODER"}, headers=auth)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CONFLICT"
    assert "'cODER' already exists" in error["message"]
    assert error["details"] == {"id": first["id"]}
    assert client.post("/v1/agent-profiles", json={"name": "coder"}, headers=other_auth).status_code == 201


@pytest.mark.parametrize(("body", "field", "error"), [
    ({"name": "code reviewer"}, "name", "letters, digits, '-' and '_', starting with a letter or digit"),
    ({"name": "-x"}, "name", "starting with a letter or digit"),
    ({"name": ""}, "name", "at least 1 character"),
    ({"name": "x" * 65}, "name", "at most 64 characters"),
    ({"name": 5}, "name", "valid string"),
    ({"role": "hi"}, "name", "Field required"),
    ({"name": "a", "system_prompt_template": "Hi {nme}"}, "system_prompt_template",
     "unknown placeholder {nme} (allowed: {name}, {role}, {emoji}, {skills}, {tone}, {verbosity}, "),
    ({"name": "a", "system_prompt_template": "Hi {name"}, "system_prompt_template", "malformed template"),
    ({"name": "a", "skills": ["ok", "not ok"]}, "skills.1", "a skill identifier is"),
    ({"name": "a", "skills": ["x", "X"]}, "skills.1", "duplicate skill 'X'"),
    ({"name": "a", "skills": "python"}, "skills", "valid list"),
    ({"name": "a", "style": {"verbosity": "chatty"}}, "style.verbosity", "'terse', 'normal' or 'verbose'"),
    ({"name": "a", "style": {"reasoning_depth": "shallow"}}, "style.reasoning_depth", "'standard' or 'deep'"),
    ({"name": "a", "style": {"mood": "x"}}, "style.mood", "Extra inputs are not permitted"),
    ({"name": "a", "inference_overrides": {"temperature": 2.5}}, "inference_overrides.temperature", "less than or"),
    ({"name": "a", "inference_overrides": {"temperature": -0.1}}, "inference_overrides.temperature", "greater"),
    ({"name": "a", "inference_overrides": {"max_tokens": 0}}, "inference_overrides.max_tokens", "greater"),
    ({"name": "a", "inference_overrides": {"model": ""}}, "inference_overrides.model", "at least 1 character"),
    ({"name": "a", "autonomy_level": "total"}, "autonomy_level", "'low', 'medium' or 'high'"),
    ({"name": "a", "emoji": "e" * 17}, "emoji", "at most 16 characters"),
    ({"name": "a", "colour": "red"}, "colour", "Extra inputs are not permitted"),
])
def test_invalid_bodies_are_422_naming_the_field(client, auth, body: dict, field: str, error: str) -> None:
    response = client.post("/v1/agent-profiles", json=body, headers=auth)
    assert response.status_code == 422
    errors = fields_of(response)
    assert field in errors, errors
    assert error in errors[field]
    assert client.get("/v1/agent-profiles", headers=auth).json() == []


def test_temperature_bounds_are_inclusive(client, auth) -> None:
    create(client, auth, name="cold", inference_overrides={"temperature": 0.0})
    create(client, auth, name="hot", inference_overrides={"temperature": 2.0})


def test_malformed_json_is_400(client, auth) -> None:
    response = client.post("/v1/agent-profiles", content=b"{not json", headers={**auth, "Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "BAD_REQUEST"
    response = client.post("/v1/agent-profiles", json=["coder"], headers=auth)
    assert response.status_code == 400


# --- GET /v1/agent-profiles and /{id} ----------------------------------------------------------------


def test_list_is_oldest_first_paged_and_per_user(client, auth, other_auth) -> None:
    made = [create(client, auth, name=f"p{i}") for i in range(4)]
    create(client, other_auth, name="theirs")
    assert client.get("/v1/agent-profiles", headers=auth).json() == made
    page = client.get("/v1/agent-profiles", params={"limit": 2, "offset": 1}, headers=auth).json()
    assert [p["id"] for p in page] == [made[1]["id"], made[2]["id"]]
    assert [p["name"] for p in client.get("/v1/agent-profiles", headers=other_auth).json()] == ["theirs"]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 1001}, {"offset": -1}, {"limit": "x"}])
def test_bad_paging_is_422(client, auth, params: dict) -> None:
    response = client.get("/v1/agent-profiles", params=params, headers=auth)
    assert response.status_code == 422
    assert set(fields_of(response)) <= {"limit", "offset"}


def test_get_unknown_is_404_and_a_bad_id_is_422(client, auth) -> None:
    response = client.get(f"/v1/agent-profiles/{uuid4()}", headers=auth)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"
    response = client.get("/v1/agent-profiles/not-a-uuid", headers=auth)
    assert response.status_code == 422
    assert list(fields_of(response)) == ["profile_id"]


def test_another_users_profile_is_404_everywhere(client, auth, other_auth) -> None:
    mine = create(client, auth)
    path = f"/v1/agent-profiles/{mine['id']}"
    assert client.get(path, headers=other_auth).status_code == 404
    assert client.put(path, json={"role": "stolen"}, headers=other_auth).status_code == 404
    assert client.delete(path, headers=other_auth).status_code == 404
    assert client.get(path, headers=auth).json() == mine


# --- PUT /v1/agent-profiles/{id} ----------------------------------------------------------------------


def test_update_changes_only_the_supplied_fields(client, auth) -> None:
    made = client.post("/v1/agent-profiles", json=FULL, headers=auth).json()
    response = client.put(f"/v1/agent-profiles/{made['id']}", headers=auth, json={
        "role": "Reviews only.", "style": {"verbosity": "verbose"}, "inference_overrides": {"model": None},
    })
    assert response.status_code == 200
    body = response.json()
    assert body["role"] == "Reviews only."
    assert body["style"] == {"tone": "dry", "verbosity": "verbose", "reasoning_depth": "deep"}
    assert body["inference_overrides"] == {"temperature": 0.2, "max_tokens": 300, "model": None}
    unchanged = PROFILE_KEYS - {"role", "style", "inference_overrides", "updated_at"}
    assert {k: body[k] for k in unchanged} == {k: made[k] for k in unchanged}
    assert body["updated_at"] >= made["updated_at"]
    assert client.get(f"/v1/agent-profiles/{made['id']}", headers=auth).json() == body
    assert client.put(f"/v1/agent-profiles/{made['id']}", json={}, headers=auth).json()["role"] == "Reviews only."


@pytest.mark.parametrize(("body", "field", "error"), [
    ({"role": None}, "role", "must not be null"),
    ({"name": None}, "name", "must not be null"),
    ({"style": {"tone": None}}, "style.tone", "must not be null"),
    ({"name": "bad name"}, "name", "starting with a letter or digit"),
    ({"system_prompt_template": "{who}"}, "system_prompt_template", "unknown placeholder {who}"),
    ({"autonomy_level": "total"}, "autonomy_level", "'low', 'medium' or 'high'"),
    ({"inference_overrides": {"temperature": 3}}, "inference_overrides.temperature", "less than or"),
    ({"id": "x"}, "id", "Extra inputs are not permitted"),
])
def test_invalid_updates_are_422_and_change_nothing(client, auth, body: dict, field: str, error: str) -> None:
    made = create(client, auth)
    response = client.put(f"/v1/agent-profiles/{made['id']}", json=body, headers=auth)
    assert response.status_code == 422
    errors = fields_of(response)
    assert error in errors[field]
    assert client.get(f"/v1/agent-profiles/{made['id']}", headers=auth).json() == made


def test_renaming_onto_a_taken_name_is_409_but_a_case_change_is_fine(client, auth) -> None:
    coder = create(client, auth, name="coder")
    create(client, auth, name="reviewer")
    response = client.put(f"/v1/agent-profiles/{coder['id']}", json={"name": "REVIEWER"}, headers=auth)
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "CONFLICT"
    response = client.put(f"/v1/agent-profiles/{coder['id']}", json={"name": "Coder"}, headers=auth)
    assert response.status_code == 200
    assert response.json()["name"] == "Coder"


def test_update_unknown_is_404(client, auth) -> None:
    response = client.put(f"/v1/agent-profiles/{uuid4()}", json={"role": "x"}, headers=auth)
    assert response.status_code == 404


# --- DELETE /v1/agent-profiles/{id} -------------------------------------------------------------------


def test_delete_then_gone(client, auth) -> None:
    made = create(client, auth)
    response = client.delete(f"/v1/agent-profiles/{made['id']}", headers=auth)
    assert response.status_code == 204
    assert response.content == b""
    assert client.get(f"/v1/agent-profiles/{made['id']}", headers=auth).status_code == 404
    assert client.delete(f"/v1/agent-profiles/{made['id']}", headers=auth).status_code == 404
    response = client.post("/v1/chat", json={"message": "hi", "mentioned_profile_ids": [made["id"]]}, headers=auth)
    assert response.status_code == 422
    create(client, auth)  # the name is free again


# --- auth and docs ------------------------------------------------------------------------------------

ROUTES = [
    ("GET", "/v1/agent-profiles", None),
    ("POST", "/v1/agent-profiles", {"name": "x"}),
    ("GET", f"/v1/agent-profiles/{uuid4()}", None),
    ("PUT", f"/v1/agent-profiles/{uuid4()}", {"role": "x"}),
    ("DELETE", f"/v1/agent-profiles/{uuid4()}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_401_without_or_with_a_wrong_key(client, method: str, path: str, body) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-key"}):
        response = client.request(method, path, json=body, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "UNAUTHORIZED"


def test_read_only_key_may_read_but_not_write(client, auth, read_only_auth) -> None:
    made = create(client, auth)
    assert client.get("/v1/agent-profiles", headers=read_only_auth).json() == [made]
    assert client.get(f"/v1/agent-profiles/{made['id']}", headers=read_only_auth).status_code == 200
    for method, path, body in [("POST", "/v1/agent-profiles", {"name": "new"}),
                               ("PUT", f"/v1/agent-profiles/{made['id']}", {"role": "x"}),
                               ("DELETE", f"/v1/agent-profiles/{made['id']}", None)]:
        response = client.request(method, path, json=body, headers=read_only_auth)
        assert response.status_code == 403, method
        assert response.json()["error"]["code"] == "FORBIDDEN"
    assert client.get("/v1/agent-profiles", headers=auth).json() == [made]


def test_routes_are_documented(client) -> None:
    paths = client.get("/api-docs/openapi.json").json()["paths"]
    assert set(paths["/v1/agent-profiles"]) == {"get", "post"}
    assert set(paths["/v1/agent-profiles/{profile_id}"]) == {"get", "put", "delete"}
    post = paths["/v1/agent-profiles"]["post"]
    assert {"201", "409", "422"} <= set(post["responses"])
    assert "appended" in post["description"] and "request's" in post["description"]
    assert "oldest first" in paths["/v1/agent-profiles"]["get"]["description"]
    assert "204" in paths["/v1/agent-profiles/{profile_id}"]["delete"]["responses"]
