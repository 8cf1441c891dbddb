"""/v1/snippets: every route, its exact shapes, ordering, limits, errors, auth and isolation."""

from __future__ import annotations

import itertools
from datetime import datetime
from uuid import UUID, uuid4

import apsw
import pytest

SNIPPET_KEYS = {"id", "title", "content", "created_at", "updated_at"}
MISSING = "00000000-0000-4000-8000-000000000000"


def fields_of(response) -> list[str]:
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR", error
    assert error["message"]
    assert all(f["error"] for f in error["details"]["fields"])
    return [f["field"] for f in error["details"]["fields"]]


def create(client, auth, title: str = "Signature", content: str | None = "Regards, Ann") -> dict:
    body = {"title": title} if content is None else {"title": title, "content": content}
    response = client.post("/v1/snippets", json=body, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def other_auth(services) -> dict[str, str]:
    key, _ = services.keys.create("other", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def ticking(services):
    """The store's clock advances one second per write, so updated_at comparisons are exact."""
    ticks = (f"2024-05-01T12:00:{s:02d}.000Z" for s in itertools.count())
    services.snippets.clock = lambda: next(ticks)


# --- POST /v1/snippets -----------------------------------------------------------------------------


def test_create_shape(client, auth) -> None:
    response = client.post("/v1/snippets", json={"title": "  Standup  ", "content": "- done\n- next"}, headers=auth)
    assert response.status_code == 201
    body = response.json()
    assert set(body) == SNIPPET_KEYS
    assert UUID(body["id"])
    assert body["title"] == "Standup"
    assert body["content"] == "- done\n- next"
    assert body["created_at"].endswith("Z")
    datetime.fromisoformat(body["created_at"])
    assert body["updated_at"] == body["created_at"]


def test_content_is_optional(client, auth) -> None:
    assert create(client, auth, "Blank", content=None)["content"] == ""


def test_created_snippet_is_sealed_and_stored_for_the_caller(client, auth, services) -> None:
    body = create(client, auth, "Door code", "4711")
    row = services.db.one("SELECT * FROM snippets WHERE id = ?", (body["id"],))
    assert b"4711" not in bytes(row["content_sealed"]) and b"Door" not in bytes(row["title_sealed"])
    assert client.get(f"/v1/snippets/{body['id']}", headers=auth).json() == body


def test_duplicate_title_is_409_naming_it(client, auth, other_auth) -> None:
    first = create(client, auth, "Weekly Report")
    response = client.post("/v1/snippets", json={"title": "weekly report"}, headers=auth)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CONFLICT"
    assert "'weekly report'" in error["message"] and "'Weekly Report'" in error["message"]
    assert error["details"] == {"title": "Weekly Report", "snippet_id": first["id"]}
    assert error["request_id"]
    assert client.get("/v1/snippets", headers=auth).json()["total"] == 1
    assert client.post("/v1/snippets", json={"title": "Weekly Report"}, headers=other_auth).status_code == 201


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, ["title"]),
        ({"content": "x"}, ["title"]),
        ({"title": ""}, ["title"]),
        ({"title": "   "}, ["title"]),
        ({"title": "x" * 201}, ["title"]),
        ({"title": "line\nbreak"}, ["title"]),
        ({"title": 5}, ["title"]),
        ({"title": None}, ["title"]),
        ({"title": "ok", "content": None}, ["content"]),
        ({"title": "ok", "content": 3}, ["content"]),
        ({"title": "ok", "content": "x" * 50_001}, ["content"]),
        ({"title": "x" * 201, "content": "x" * 50_001}, ["title", "content"]),
        ({"title": "ok", "tags": ["x"]}, ["tags"]),
    ],
)
def test_invalid_create_is_422_with_fields(client, auth, body: dict, fields: list[str]) -> None:
    response = client.post("/v1/snippets", json=body, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == fields
    assert client.get("/v1/snippets", headers=auth).json() == {"snippets": [], "total": 0}


def test_limits_at_the_edge_are_accepted(client, auth) -> None:
    body = create(client, auth, " " + "t" * 200 + " ", "c" * 50_000)
    assert body["title"] == "t" * 200
    assert len(body["content"]) == 50_000


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]"])
def test_unreadable_body_is_400(client, auth, raw: str) -> None:
    response = client.post("/v1/snippets", content=raw, headers={**auth, "Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "BAD_REQUEST"


# --- GET /v1/snippets ------------------------------------------------------------------------------


def test_list_is_ordered_by_title_and_paged(client, auth, other_auth) -> None:
    for title in ["banana", "Apple", "cherry", "apricot"]:
        create(client, auth, title)
    create(client, other_auth, "aardvark")
    body = client.get("/v1/snippets", headers=auth).json()
    assert set(body) == {"snippets", "total"}
    assert [s["title"] for s in body["snippets"]] == ["Apple", "apricot", "banana", "cherry"]
    assert all(set(s) == SNIPPET_KEYS for s in body["snippets"])
    assert body["total"] == 4
    page = client.get("/v1/snippets", params={"limit": 2, "offset": 1}, headers=auth).json()
    assert [s["title"] for s in page["snippets"]] == ["apricot", "banana"]
    assert page["total"] == 4
    assert client.get("/v1/snippets", params={"offset": 9}, headers=auth).json() == {"snippets": [], "total": 4}


def test_an_empty_list(client, auth) -> None:
    assert client.get("/v1/snippets", headers=auth).json() == {"snippets": [], "total": 0}


@pytest.mark.parametrize(("params", "field"), [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"),
                                              ({"offset": -1}, "offset"), ({"limit": "many"}, "limit")])
def test_bad_paging_is_422(client, auth, params: dict, field: str) -> None:
    response = client.get("/v1/snippets", params=params, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == [field]


# --- GET /v1/snippets/search -----------------------------------------------------------------------


def test_search_matches_titles_case_insensitively(client, auth, other_auth) -> None:
    for title in ["Meeting Notes", "notes", "Notes archive", "Recipe"]:
        create(client, auth, title, "notes notes notes")
    create(client, other_auth, "Notes of another user")
    body = client.get("/v1/snippets/search", params={"q": "NOTES"}, headers=auth).json()
    assert [s["title"] for s in body["snippets"]] == ["notes", "Notes archive", "Meeting Notes"]
    assert body["total"] == 3
    assert all(set(s) == SNIPPET_KEYS for s in body["snippets"])
    page = client.get("/v1/snippets/search", params={"q": "notes", "limit": 1, "offset": 2}, headers=auth).json()
    assert [s["title"] for s in page["snippets"]] == ["Meeting Notes"]
    assert page["total"] == 3
    assert client.get("/v1/snippets/search", params={"q": "zzz"}, headers=auth).json() == {"snippets": [], "total": 0}


@pytest.mark.parametrize("params", [{}, {"q": ""}, {"q": "   "}, {"q": "x" * 201}])
def test_search_without_a_usable_q_is_422(client, auth, params: dict) -> None:
    response = client.get("/v1/snippets/search", params=params, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["q"]


# --- GET /v1/snippets/{id} and /resolved -------------------------------------------------------------


def test_get(client, auth) -> None:
    body = create(client, auth)
    response = client.get(f"/v1/snippets/{body['id']}", headers=auth)
    assert response.status_code == 200
    assert response.json() == body


def test_resolved_view(client, auth) -> None:
    sign = create(client, auth, "Signature", "Regards,\nAnn\n")
    create(client, auth, "Footer", "---\n/snippet signature\n/snippet Unknown One")
    mail = create(client, auth, "Mail", "Hi Bob,\n/snippet FOOTER")
    response = client.get(f"/v1/snippets/{mail['id']}/resolved", headers=auth)
    assert response.status_code == 200
    assert response.json() == {
        "id": mail["id"],
        "title": "Mail",
        "resolved_content": "Hi Bob,\n---\nRegards,\nAnn\n/snippet Unknown One [snippet not found]",
        "original_content": "Hi Bob,\n/snippet FOOTER",
    }
    plain = client.get(f"/v1/snippets/{sign['id']}/resolved", headers=auth).json()
    assert plain["resolved_content"] == plain["original_content"] == "Regards,\nAnn\n"


def test_resolved_view_matches_the_longest_title_before_punctuation(client, auth) -> None:
    create(client, auth, "Name", "Ann")
    create(client, auth, "Name long", "Ann Smith")
    root = create(client, auth, "Root", "Hello /snippet Name! Dear /snippet name LONG, bye /snippet Names")
    body = client.get(f"/v1/snippets/{root['id']}/resolved", headers=auth).json()
    assert body["resolved_content"] == "Hello Ann! Dear Ann Smith, bye /snippet Names [snippet not found]"


def test_resolved_view_with_a_cycle_answers(client, auth) -> None:
    a = create(client, auth, "A", "a /snippet B")
    create(client, auth, "B", "b /snippet C")
    create(client, auth, "C", "c /snippet a")
    body = client.get(f"/v1/snippets/{a['id']}/resolved", headers=auth).json()
    assert body["resolved_content"] == "a b c /snippet a [cycle: A → B → C → A]"


def test_resolved_view_stops_at_depth_10(client, auth) -> None:
    ids = [create(client, auth, f"S{i}", f"{i} /snippet S{i + 1}")["id"] for i in range(12)]
    body = client.get(f"/v1/snippets/{ids[0]}/resolved", headers=auth).json()
    assert body["resolved_content"] == " ".join(str(i) for i in range(11)) + " /snippet S11 [depth limit 10 reached]"
    one_less = client.get(f"/v1/snippets/{ids[1]}/resolved", headers=auth).json()
    assert one_less["resolved_content"] == " ".join(str(i) for i in range(1, 12)) + " /snippet S12 [snippet not found]"


def test_resolution_follows_renames_and_deletes(client, auth) -> None:
    part = create(client, auth, "Part", "p")
    root = create(client, auth, "Root", "/snippet Piece")
    resolved = f"/v1/snippets/{root['id']}/resolved"
    assert client.get(resolved, headers=auth).json()["resolved_content"] == "/snippet Piece [snippet not found]"
    client.put(f"/v1/snippets/{part['id']}", json={"title": "Piece"}, headers=auth)
    assert client.get(resolved, headers=auth).json()["resolved_content"] == "p"
    client.delete(f"/v1/snippets/{part['id']}", headers=auth)
    assert client.get(resolved, headers=auth).json()["resolved_content"] == "/snippet Piece [snippet not found]"


# --- PUT /v1/snippets/{id} ---------------------------------------------------------------------------


def test_update_changes_only_the_supplied_fields(client, auth, ticking) -> None:
    made = create(client, auth, "Title", "body")
    response = client.put(f"/v1/snippets/{made['id']}", json={"title": "  New Title "}, headers=auth)
    assert response.status_code == 200
    renamed = response.json()
    assert set(renamed) == SNIPPET_KEYS
    assert (renamed["title"], renamed["content"]) == ("New Title", "body")
    assert renamed["created_at"] == made["created_at"]
    assert renamed["updated_at"] > made["updated_at"]
    rewritten = client.put(f"/v1/snippets/{made['id']}", json={"content": ""}, headers=auth).json()
    assert (rewritten["title"], rewritten["content"]) == ("New Title", "")
    assert rewritten["updated_at"] > renamed["updated_at"]
    both = client.put(f"/v1/snippets/{made['id']}", json={"title": "T", "content": "c"}, headers=auth).json()
    assert (both["title"], both["content"]) == ("T", "c")
    assert client.get(f"/v1/snippets/{made['id']}", headers=auth).json() == both


def test_update_without_a_change_keeps_updated_at(client, auth, ticking) -> None:
    made = create(client, auth, "Title", "body")
    response = client.put(f"/v1/snippets/{made['id']}", json={"title": "Title", "content": "body"}, headers=auth)
    assert response.status_code == 200
    assert response.json() == made


def test_update_may_change_the_case_of_its_own_title(client, auth) -> None:
    made = create(client, auth, "title")
    assert client.put(f"/v1/snippets/{made['id']}", json={"title": "TITLE"}, headers=auth).json()["title"] == "TITLE"


def test_update_to_a_taken_title_is_409(client, auth) -> None:
    made = create(client, auth, "Mine")
    taken = create(client, auth, "Taken")
    response = client.put(f"/v1/snippets/{made['id']}", json={"title": "TAKEN"}, headers=auth)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "CONFLICT"
    assert "'TAKEN'" in error["message"]
    assert error["details"] == {"title": "Taken", "snippet_id": taken["id"]}
    assert client.get(f"/v1/snippets/{made['id']}", headers=auth).json()["title"] == "Mine"


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, ["body"]),
        ({"title": None}, ["title"]),
        ({"content": None}, ["content"]),
        ({"title": ""}, ["title"]),
        ({"title": "x" * 201}, ["title"]),
        ({"content": "x" * 50_001}, ["content"]),
        ({"title": "", "content": "x" * 50_001}, ["title", "content"]),
        ({"title": "ok", "colour": "red"}, ["colour"]),
    ],
)
def test_invalid_update_is_422_with_fields(client, auth, body: dict, fields: list[str]) -> None:
    made = create(client, auth, "Title", "body")
    response = client.put(f"/v1/snippets/{made['id']}", json=body, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == fields
    assert client.get(f"/v1/snippets/{made['id']}", headers=auth).json() == made


# --- DELETE /v1/snippets/{id} -------------------------------------------------------------------------


def test_delete(client, auth) -> None:
    made = create(client, auth)
    response = client.delete(f"/v1/snippets/{made['id']}", headers=auth)
    assert response.status_code == 204
    assert response.content == b""
    gone = client.get(f"/v1/snippets/{made['id']}", headers=auth)
    assert gone.status_code == 404
    assert client.delete(f"/v1/snippets/{made['id']}", headers=auth).status_code == 404
    assert client.get("/v1/snippets", headers=auth).json()["total"] == 0


# --- not found, bad ids, isolation --------------------------------------------------------------------


ID_ROUTES = [("GET", ""), ("GET", "/resolved"), ("PUT", ""), ("DELETE", "")]


@pytest.mark.parametrize(("method", "suffix"), ID_ROUTES)
def test_unknown_id_is_404(client, auth, method: str, suffix: str) -> None:
    body = {"content": "x"} if method == "PUT" else None
    response = client.request(method, f"/v1/snippets/{uuid4()}{suffix}", json=body, headers=auth)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "NOT_FOUND"
    assert "snippet" in error["message"]


@pytest.mark.parametrize(("method", "suffix"), ID_ROUTES)
def test_invalid_uuid_path_is_422(client, auth, method: str, suffix: str) -> None:
    body = {"content": "x"} if method == "PUT" else None
    response = client.request(method, f"/v1/snippets/not-a-uuid{suffix}", json=body, headers=auth)
    assert response.status_code == 422
    assert fields_of(response) == ["snippet_id"]


def test_another_users_snippet_is_404_everywhere(client, auth, other_auth) -> None:
    mine = create(client, auth, "Private", "secret")
    for method, suffix in ID_ROUTES:
        body = {"content": "stolen"} if method == "PUT" else None
        response = client.request(method, f"/v1/snippets/{mine['id']}{suffix}", json=body, headers=other_auth)
        assert response.status_code == 404, (method, suffix)
        assert response.json()["error"]["code"] == "NOT_FOUND"
    assert client.get("/v1/snippets", headers=other_auth).json() == {"snippets": [], "total": 0}
    assert client.get("/v1/snippets/search", params={"q": "private"}, headers=other_auth).json()["total"] == 0
    other = create(client, other_auth, "Other", "/snippet Private")
    resolved = client.get(f"/v1/snippets/{other['id']}/resolved", headers=other_auth).json()
    assert resolved["resolved_content"] == "/snippet Private [snippet not found]"
    assert client.get(f"/v1/snippets/{mine['id']}", headers=auth).json() == mine


# --- auth ---------------------------------------------------------------------------------------------


ROUTES = [
    ("GET", "/v1/snippets", None),
    ("GET", "/v1/snippets/search?q=x", None),
    ("GET", f"/v1/snippets/{MISSING}", None),
    ("GET", f"/v1/snippets/{MISSING}/resolved", None),
    ("POST", "/v1/snippets", {"title": "x"}),
    ("PUT", f"/v1/snippets/{MISSING}", {"title": "x"}),
    ("DELETE", f"/v1/snippets/{MISSING}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_401_without_a_key(client, method: str, path: str, body) -> None:
    response = client.request(method, path, json=body)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_401_with_a_wrong_key(client, method: str, path: str, body) -> None:
    response = client.request(method, path, json=body, headers={"Authorization": "Bearer not-a-key"})
    assert response.status_code == 401


def test_read_only_key_may_read_but_not_write(client, auth, read_only_auth) -> None:
    made = create(client, auth)
    assert client.get("/v1/snippets", headers=read_only_auth).status_code == 200
    assert client.get("/v1/snippets/search", params={"q": "sig"}, headers=read_only_auth).status_code == 200
    assert client.get(f"/v1/snippets/{made['id']}", headers=read_only_auth).status_code == 200
    assert client.get(f"/v1/snippets/{made['id']}/resolved", headers=read_only_auth).status_code == 200
    writes = [
        ("POST", "/v1/snippets", {"title": "New"}),
        ("PUT", f"/v1/snippets/{made['id']}", {"content": "changed"}),
        ("DELETE", f"/v1/snippets/{made['id']}", None),
    ]
    for method, path, body in writes:
        response = client.request(method, path, json=body, headers=read_only_auth)
        assert response.status_code == 403, method
        assert response.json()["error"]["code"] == "FORBIDDEN"
    assert client.get("/v1/snippets", headers=auth).json()["snippets"] == [made]


def test_routes_are_documented(client) -> None:
    spec = client.get("/api-docs/openapi.json").json()
    paths = spec["paths"]
    assert set(paths["/v1/snippets"]) == {"get", "post"}
    assert set(paths["/v1/snippets/{snippet_id}"]) == {"get", "put", "delete"}
    assert "409" in paths["/v1/snippets"]["post"]["responses"]
    assert "depth" in paths["/v1/snippets/{snippet_id}/resolved"]["get"]["description"]
    assert "A→Z" in paths["/v1/snippets"]["get"]["description"]


# --- sealed values are bound to their row and user ---------------------------------------------------


def test_a_snippet_ciphertext_swapped_in_the_file_is_an_integrity_error(client, auth, other_auth, services) -> None:
    mine = create(client, auth, "Mine", "Alice's door code is 4711")
    theirs = create(client, other_auth, "Theirs", "Bob's door code is 9001")
    conn = apsw.Connection(str(services.db.path))
    try:
        with conn:
            a = conn.execute("SELECT content_sealed FROM snippets WHERE id = ?", (mine["id"],)).fetchone()[0]
            b = conn.execute("SELECT content_sealed FROM snippets WHERE id = ?", (theirs["id"],)).fetchone()[0]
            conn.execute("UPDATE snippets SET content_sealed = ? WHERE id = ?", (b, mine["id"]))
            conn.execute("UPDATE snippets SET content_sealed = ? WHERE id = ?", (a, theirs["id"]))
    finally:
        conn.close()
    response = client.get(f"/v1/snippets/{mine['id']}", headers=auth)
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "INTERNAL_ERROR"
    assert f"snippets.content_sealed of row {mine['id']}" in error["message"]
    assert "9001" not in response.text and "Bob" not in response.text and "Traceback" not in response.text
    assert client.get("/v1/snippets", headers=auth).status_code == 500
    assert client.get(f"/v1/snippets/{theirs['id']}", headers=other_auth).status_code == 500
