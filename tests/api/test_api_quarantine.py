"""The quarantine routes: GET /v1/memories/quarantine (reasons, pages, bounds) and
POST /v1/memories/{id}/restore (the type given back; 409 when not quarantined; 404 saying when and why
for a purged memory; another user's is 404; read-only 403); the route order (`quarantine` is never a
memory id); with sanitation off the memory store still answers.

Real storage (SQLite), the hashing embedder; memories are quarantined with MemoryStore.quarantine (what
a sanitation run calls) and purged as the run does (tombstone, then delete).
"""

from __future__ import annotations

import time
from uuid import uuid4

import pytest

from assistant.memory import quarantine as Q
from assistant.services import Services

M = "/v1/memories"
UNKNOWN = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def add(client, auth, content: str, memory_type: str = "fact") -> str:  # noqa: ANN001
    response = client.post(M, json={"content": content, "summary": content[:20], "memory_type": memory_type},
                           headers=auth)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def owner(services: Services) -> str:
    return str(services.keys.owner_user_id())


@pytest.fixture
def other(services: Services) -> tuple[str, dict[str, str]]:
    user = uuid4()
    key, _ = services.keys.create("other", user_id=user)
    return str(user), {"Authorization": f"Bearer {key}"}


def test_the_list_shows_reasons_newest_first_paged(client, services, auth, read_only_auth) -> None:
    ids = [add(client, auth, f"memory number {n}") for n in range(3)]
    for n, mid in enumerate(ids):
        services.memory.quarantine(owner(services), mid, f"stale: reason {n}")
    body = client.get(f"{M}/quarantine", headers=read_only_auth).json()
    assert body["total"] == 3 and body["limit"] == 50 and body["offset"] == 0
    assert {m["quarantine_reason"] for m in body["memories"]} == {"stale: reason 0", "stale: reason 1",
                                                                   "stale: reason 2"}
    first = body["memories"][0]
    assert first["memory_type"] == "Quarantined" and first["original_memory_type"] == "Fact"
    assert first["quarantined_at"]
    page = client.get(f"{M}/quarantine?limit=2&offset=2", headers=auth).json()
    assert len(page["memories"]) == 1 and page["total"] == 3
    # the normal list and search no longer offer them... but /quarantine is not read as an id
    assert client.get(f"{M}/quarantine", headers=auth).status_code == 200


@pytest.mark.parametrize("query", ["limit=0", "limit=201", "offset=-1", "offset=1000000001", "limit=x"])
def test_paging_out_of_bounds_is_a_precise_422(client, auth, query) -> None:
    response = client.get(f"{M}/quarantine?{query}", headers=auth)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["fields"][0]["field"].endswith(query.split("=")[0])


def test_restore_gives_the_type_back_and_the_memory_is_found_again(client, services, auth) -> None:
    mid = add(client, auth, "Anna prefers green tea", "preference")
    services.memory.quarantine(owner(services), mid, "contradicted: a newer memory says coffee")
    assert client.get(f"{M}/{mid}", headers=auth).json()["memory_type"] == "Quarantined"
    response = client.post(f"{M}/{mid}/restore", headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["memory_type"] == "Preference" and body["quarantined_at"] is None
    assert body["quarantine_reason"] is None
    assert client.get(f"{M}/quarantine", headers=auth).json()["total"] == 0
    assert services.memory.get(owner(services), mid).memory_type.value == "Preference"
    again = client.post(f"{M}/{mid}/restore", json={}, headers=auth)
    assert again.status_code == 409 and "not quarantined" in again.json()["error"]["message"]


def test_restore_of_a_purged_memory_is_404_saying_when_and_why(client, services, auth) -> None:
    mid = add(client, auth, "meeting tomorrow at 3")
    services.memory.quarantine(owner(services), mid, "stale: the meeting was last week")
    rows = [r for r in Q.expired(services.memory, owner(services), time.time() + 86_400, 0) if r["id"] == mid]
    with services.db.transaction() as db:
        services.sanitation.store.record_purges(db, owner(services), rows)
        Q.purge(db, rows)
    response = client.post(f"{M}/{mid}/restore", headers=auth)
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "purged at" in message and "stale: the meeting was last week" in message


def test_another_users_memory_is_404_and_read_only_is_403(client, services, auth, read_only_auth, other) -> None:
    mid = add(client, auth, "my secret")
    services.memory.quarantine(owner(services), mid, "poisoned: instructions")
    _, other_auth = other
    assert client.get(f"{M}/quarantine", headers=other_auth).json()["total"] == 0
    assert client.post(f"{M}/{mid}/restore", headers=other_auth).status_code == 404
    refused = client.post(f"{M}/{mid}/restore", headers=read_only_auth)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    assert services.memory.get(owner(services), mid).memory_type.value == "Quarantined"


def test_bad_ids_and_bodies(client, auth) -> None:
    assert client.post(f"{M}/not-a-uuid/restore", headers=auth).status_code == 422
    assert client.post(f"{M}/{UNKNOWN}/restore", headers=auth).status_code == 404
    body = client.post(f"{M}/{UNKNOWN}/restore", json={"force": True}, headers=auth)
    assert body.status_code == 422
    assert client.post(f"{M}/quarantine", headers=auth).status_code == 405
    assert client.get(f"{M}/quarantine").status_code == 401


def test_with_sanitation_off_the_memory_store_still_answers(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(sanitation={"enabled": False}))
    assert services.sanitation is None
    client = make_client(services)
    key, _ = services.keys.create("k")
    auth = {"X-API-Key": key}
    mid = add(client, auth, "something to set aside")
    services.memory.quarantine(owner(services), mid, "stale")
    assert client.get(f"{M}/quarantine", headers=auth).json()["total"] == 1
    assert client.post(f"{M}/{mid}/restore", headers=auth).json()["memory_type"] == "Fact"


def test_with_memory_off_the_routes_are_503(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(memory={"enabled": False}))
    client = make_client(services)
    key, _ = services.keys.create("k")
    for method, path in (("GET", f"{M}/quarantine"), ("POST", f"{M}/{UNKNOWN}/restore")):
        response = client.request(method, path, headers={"X-API-Key": key})
        assert response.status_code == 503, path
        assert "memory.enabled" in response.json()["error"]["message"]
