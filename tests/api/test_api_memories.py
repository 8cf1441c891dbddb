"""/v1/memories: every route, its exact shapes, errors, auth, isolation and the disabled store."""

from __future__ import annotations

import math
import re
from datetime import datetime
from uuid import UUID, uuid4

import apsw
import pytest

MEMORY_KEYS = {"id", "content", "summary", "memory_type", "importance", "access_count", "tags", "created_at",
               "updated_at"}
SCORED_KEYS = MEMORY_KEYS | {"relevance", "similarity", "keyword_score", "freshness", "relevance_parts"}


def fields_of(response) -> list[str]:  # noqa: ANN001
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    return [f["field"] for f in error["details"]["fields"]]


def create(client, auth, **body) -> dict:  # noqa: ANN001
    payload = {"content": "Alice likes green tea.", "summary": "likes green tea", **body}
    response = client.post("/v1/memories", json=payload, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def other_auth(services) -> dict[str, str]:  # noqa: ANN001
    key, principal = services.keys.create("other", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


# --- POST /v1/memories -----------------------------------------------------------------------------


def test_create_shape(client, auth) -> None:
    response = client.post(
        "/v1/memories",
        json={"content": "The build server is at 10.0.0.5.", "summary": "build server address",
              "memory_type": "tool_result", "importance": 0.7, "tags": ["infra", "build"]},
        headers=auth,
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) == MEMORY_KEYS
    assert UUID(body["id"])
    assert body["content"] == "The build server is at 10.0.0.5."
    assert body["summary"] == "build server address"
    assert body["memory_type"] == "ToolResult"
    assert body["importance"] == 0.7
    assert body["access_count"] == 0
    assert body["tags"] == ["infra", "build"]
    assert body["created_at"].endswith("Z")
    datetime.fromisoformat(body["created_at"].replace("Z", "+00:00"))
    assert body["updated_at"] == body["created_at"]


@pytest.mark.parametrize(
    ("request_type", "response_type"),
    [("fact", "Fact"), ("preference", "Preference"), ("tool_result", "ToolResult"), ("correction", "Correction"),
     ("context", "Context")],
)
def test_every_request_type_renders_capitalised(client, auth, request_type: str, response_type: str) -> None:
    assert create(client, auth, memory_type=request_type)["memory_type"] == response_type


def test_create_defaults(client, auth) -> None:
    body = create(client, auth)
    assert body["memory_type"] == "Context"
    assert body["importance"] == 0.5
    assert body["tags"] == []


def test_created_memory_is_stored_for_the_caller(client, auth, services, api_key) -> None:
    body = create(client, auth, memory_type="fact")
    user_id = str(services.keys.authenticate(api_key).user_id)
    assert services.memory.get(user_id, body["id"]).content == "Alice likes green tea."


# --- GET /v1/memories -------------------------------------------------------------------------------


def test_list(client, auth) -> None:
    assert client.get("/v1/memories", headers=auth).json() == []
    a = create(client, auth, content="first memory")
    b = create(client, auth, content="second memory")
    response = client.get("/v1/memories", headers=auth)
    assert response.status_code == 200
    listed = response.json()
    assert isinstance(listed, list)
    assert {m["id"] for m in listed} == {a["id"], b["id"]}
    assert all(set(m) == MEMORY_KEYS for m in listed)
    assert {m["id"]: m for m in listed}[a["id"]] == a


def test_list_paging(client, auth) -> None:
    for n in range(3):
        create(client, auth, content=f"memory {n}")
    assert len(client.get("/v1/memories?limit=2", headers=auth).json()) == 2
    assert len(client.get("/v1/memories?limit=2&offset=2", headers=auth).json()) == 1


# --- GET /v1/memories/search --------------------------------------------------------------------------


def test_search_is_ranked_with_relevance_fields(client, auth) -> None:
    target = create(client, auth, content="Alice's dentist appointment is on Friday at nine.", summary="dentist")
    create(client, auth, content="The recipe needs three eggs and flour.", summary="recipe")
    create(client, auth, content="Bob plays football on Sundays.", summary="football")
    response = client.get("/v1/memories/search", params={"q": "dentist appointment Friday"}, headers=auth)
    assert response.status_code == 200
    found = response.json()
    assert found[0]["id"] == target["id"]
    assert all(set(m) == SCORED_KEYS for m in found)
    relevance = [m["relevance"] for m in found]
    assert relevance == sorted(relevance, reverse=True)
    top = found[0]
    assert 0.0 < top["similarity"] <= 1.0
    assert top["keyword_score"] == 1.0
    assert top["freshness"] == pytest.approx(1.0, abs=1e-3)
    # relevance = similarity x 0.50 + importance x 0.20 + freshness x 0.30, with the fused similarity
    fused = 0.6 * top["similarity"] + 0.4 * top["keyword_score"]
    assert top["relevance"] == pytest.approx(fused * 0.5 + top["importance"] * 0.2 + top["freshness"] * 0.3, abs=1e-5)


def test_search_limit(client, auth) -> None:
    for n in range(4):
        create(client, auth, content=f"tea memory number {n}")
    assert len(client.get("/v1/memories/search", params={"q": "tea", "limit": 2}, headers=auth).json()) == 2


def test_search_without_q_is_422(client, auth) -> None:
    response = client.get("/v1/memories/search", headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["q"]


def test_search_with_empty_q_is_422(client, auth) -> None:
    response = client.get("/v1/memories/search", params={"q": ""}, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["q"]


# --- GET /v1/memories/stats ---------------------------------------------------------------------------


def test_stats_with_display_names(client, auth) -> None:
    assert client.get("/v1/memories/stats", headers=auth).json() == {"total": 0, "by_type": []}
    for t in ("tool_result", "tool_result", "fact", "preference", "correction", "context"):
        create(client, auth, memory_type=t, content=f"{t} {uuid4()}")
    response = client.get("/v1/memories/stats", headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"total", "by_type"}
    assert body["total"] == 6
    assert all(set(row) == {"memory_type", "count"} for row in body["by_type"])
    assert {row["memory_type"]: row["count"] for row in body["by_type"]} == {
        "Tool Result": 2, "Fact": 1, "Preference": 1, "Correction": 1, "Context": 1,
    }


# --- POST /v1/memories/decay -------------------------------------------------------------------------


def test_decay_shape(client, auth) -> None:
    a = create(client, auth, memory_type="context", importance=0.8)
    create(client, auth, memory_type="fact", importance=0.6, content="another")
    response = client.post("/v1/memories/decay", headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"ran_at", "processed", "changed", "cleaned_up", "changes"}
    assert body["ran_at"].endswith("Z")
    assert body["processed"] == 2
    assert body["cleaned_up"] == 0
    assert isinstance(body["changes"], list)
    assert body["changed"] == len(body["changes"])
    for change in body["changes"]:
        assert set(change) == {"id", "before", "after"}
    # right after creation almost no time passed: importance essentially unchanged
    kept = client.get(f"/v1/memories/{a['id']}", headers=auth).json()
    assert kept["importance"] == pytest.approx(0.8, abs=1e-6)


def test_decay_only_touches_the_callers_memories(client, auth, other_auth) -> None:
    create(client, auth)
    create(client, other_auth)
    create(client, other_auth, content="more")
    assert client.post("/v1/memories/decay", headers=auth).json()["processed"] == 1
    assert client.post("/v1/memories/decay", headers=other_auth).json()["processed"] == 2


def test_decay_runs_the_formula_over_elapsed_days(client, auth, services, api_key) -> None:
    body = create(client, auth, memory_type="context", importance=0.8)
    # simulate ten idle days: move the memory's last decay back
    services.db.execute("UPDATE memory_scores SET decay_ts = decay_ts - 10 * 86400 "
                        "WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = ?)", (body["id"],))
    result = client.post("/v1/memories/decay", headers=auth).json()
    assert result["changed"] == 1
    change = result["changes"][0]
    assert change["id"] == body["id"]
    assert change["before"] == 0.8
    assert change["after"] == pytest.approx(0.8 * math.exp(math.log(0.95) * 10), abs=1e-4)
    got = client.get(f"/v1/memories/{body['id']}", headers=auth).json()
    assert got["importance"] == pytest.approx(change["after"], abs=1e-9)


# --- GET and DELETE /v1/memories/{id} -------------------------------------------------------------------


def test_get_and_delete(client, auth) -> None:
    body = create(client, auth, memory_type="preference", tags=["drinks"])
    got = client.get(f"/v1/memories/{body['id']}", headers=auth)
    assert got.status_code == 200
    assert got.json() == body
    deleted = client.delete(f"/v1/memories/{body['id']}", headers=auth)
    assert deleted.status_code == 204
    assert deleted.content == b""
    gone = client.get(f"/v1/memories/{body['id']}", headers=auth)
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "NOT_FOUND"
    assert client.delete(f"/v1/memories/{body['id']}", headers=auth).status_code == 404
    assert client.get("/v1/memories", headers=auth).json() == []


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_unknown_id_is_404(client, auth, method: str) -> None:
    response = client.request(method, f"/v1/memories/{uuid4()}", headers=auth)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "NOT_FOUND"
    assert error["message"]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_invalid_uuid_path_is_422(client, auth, method: str) -> None:
    response = client.request(method, "/v1/memories/not-a-uuid", headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["memory_id"]


# --- isolation ----------------------------------------------------------------------------------


def test_another_users_memory_is_404_everywhere(client, auth, other_auth) -> None:
    mine = create(client, auth, content="Alice keeps the spare key under the blue flowerpot.", memory_type="fact")
    get = client.get(f"/v1/memories/{mine['id']}", headers=other_auth)
    assert get.status_code == 404
    assert get.json()["error"]["code"] == "NOT_FOUND"
    delete = client.delete(f"/v1/memories/{mine['id']}", headers=other_auth)
    assert delete.status_code == 404
    assert client.get("/v1/memories", headers=other_auth).json() == []
    assert client.get("/v1/memories/search", params={"q": "spare key flowerpot"}, headers=other_auth).json() == []
    assert client.get("/v1/memories/stats", headers=other_auth).json() == {"total": 0, "by_type": []}
    # still there for its owner
    assert client.get(f"/v1/memories/{mine['id']}", headers=auth).json() == mine


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "x", "summary": "s", "importance": 1.5}, "importance"),
        ({"content": "x", "summary": "s", "importance": -0.1}, "importance"),
        ({"content": "", "summary": "s"}, "content"),
        ({"content": "   ", "summary": "s"}, "content"),
        ({"content": "x", "summary": "s", "memory_type": "opinion"}, "memory_type"),
        ({"content": "x", "summary": "s", "memory_type": "Tool Result"}, "memory_type"),
        ({"summary": "s"}, "content"),
        ({"content": "x"}, "summary"),
        ({"content": "x", "summary": "s", "tags": "not-a-list"}, "tags"),
    ],
)
def test_invalid_create_is_422_with_fields(client, auth, body: dict, field: str) -> None:
    response = client.post("/v1/memories", json=body, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == [field]
    error = response.json()["error"]["details"]["fields"][0]
    assert error["error"]
    assert client.get("/v1/memories", headers=auth).json() == []


def test_several_invalid_fields_are_all_named(client, auth) -> None:
    response = client.post("/v1/memories", json={"content": "", "summary": "s", "importance": 1.5,
                                                 "memory_type": "opinion"}, headers=auth)
    assert response.status_code == 422
    assert sorted(fields_of(response)) == ["content", "importance", "memory_type"]


# --- auth and the disabled store -------------------------------------------------------------------


ROUTES = [
    ("GET", "/v1/memories", None),
    ("POST", "/v1/memories", {"content": "x", "summary": "s"}),
    ("GET", "/v1/memories/search?q=tea", None),
    ("GET", "/v1/memories/stats", None),
    ("POST", "/v1/memories/decay", None),
    ("GET", "/v1/memories/00000000-0000-4000-8000-000000000000", None),
    ("DELETE", "/v1/memories/00000000-0000-4000-8000-000000000000", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_401_without_a_key(client, method: str, path: str, body) -> None:  # noqa: ANN001
    response = client.request(method, path, json=body)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_401_with_a_wrong_key(client, method: str, path: str, body) -> None:  # noqa: ANN001
    response = client.request(method, path, json=body, headers={"Authorization": "Bearer not-a-key"})
    assert response.status_code == 401


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_memory_disabled_is_503(make_settings, make_services, make_client, method: str, path: str, body) -> None:  # noqa: ANN001
    services = make_services(make_settings(memory={"enabled": False}))
    assert services.memory is None
    client = make_client(services)
    key, _ = services.keys.create("test")
    response = client.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "SERVICE_UNAVAILABLE"
    assert "memory" in error["message"]


@pytest.mark.parametrize(("sent", "stored"), [
    ("context", "Context"), ("Context", "Context"), ("CONTEXT", "Context"), ("tool_result", "ToolResult"),
    ("ToolResult", "ToolResult"), ("TOOL_RESULT", "ToolResult"), ("fact", "Fact"), ("Preference", "Preference"),
])
def test_memory_type_is_read_ignoring_case_and_answered_in_the_stored_form(client, auth, sent: str,
                                                                          stored: str) -> None:
    response = client.post("/v1/memories", json={"content": "x", "summary": "s", "memory_type": sent}, headers=auth)
    assert response.status_code == 201, response.text
    assert response.json()["memory_type"] == stored
    pattern = client.get("/api-docs/openapi.json").json()["components"]["schemas"]["MemoryCreate"]["properties"][
        "memory_type"]["pattern"]
    assert re.fullmatch(pattern, sent)


# --- sealed values are bound to their row and user ---------------------------------------------------


def swap_in_file(services, first: str, second: str) -> None:  # noqa: ANN001
    """Swap two memories' sealed content, summary and tags in the SQLite file, behind the server's back
    (once the knowledge graph has read them: its worker must not hold the write lock meanwhile)."""
    if services.graph is not None:
        assert services.graph.wait_idle()
    conn = apsw.Connection(str(services.db.path))
    conn.set_busy_timeout(5000)
    try:
        with conn:
            for column in ("content", "summary", "tags"):
                a = conn.execute(f"SELECT {column} FROM memories WHERE id = ?", (first,)).fetchone()[0]
                b = conn.execute(f"SELECT {column} FROM memories WHERE id = ?", (second,)).fetchone()[0]
                conn.execute(f"UPDATE memories SET {column} = ? WHERE id = ?", (b, first))
                conn.execute(f"UPDATE memories SET {column} = ? WHERE id = ?", (a, second))
    finally:
        conn.close()


def assert_integrity_error(response, memory_id: str, *never: str) -> None:  # noqa: ANN001
    assert response.status_code == 500
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == "INTERNAL_ERROR"
    assert error["message"].startswith("data integrity error")
    assert f"memories.content of row {memory_id}" in error["message"]
    assert error["details"] == {"table": "memories", "column": "content", "row_id": memory_id}
    assert "Traceback" not in response.text
    for text in never:
        assert text not in response.text


@pytest.mark.parametrize("same_user", [False, True], ids=["two users", "one user"])
def test_a_ciphertext_swapped_in_the_file_is_an_integrity_error_not_the_other_text(
        client, auth, other_auth, services, same_user: bool) -> None:  # noqa: ANN001
    mine = create(client, auth, content="Alice's locker code is 4711.", summary="locker code", tags=["alice"])
    other = create(client, auth if same_user else other_auth, content="Bob's safe code is 9001.",
                   summary="safe code", tags=["bob"])
    swap_in_file(services, mine["id"], other["id"])
    secrets = ("9001", "Bob", "safe code", "4711")
    assert_integrity_error(client.get(f"/v1/memories/{mine['id']}", headers=auth), mine["id"], *secrets)
    assert_integrity_error(client.get("/v1/memories", headers=auth), mine["id"] if not same_user else other["id"],
                           *secrets)
    search = client.get("/v1/memories/search", params={"q": "code", "mode": "keyword"}, headers=auth)
    assert search.status_code == 500 and "9001" not in search.text and "4711" not in search.text
    owner = auth if same_user else other_auth
    assert_integrity_error(client.get(f"/v1/memories/{other['id']}", headers=owner), other["id"], *secrets)
