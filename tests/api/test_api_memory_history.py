"""GET /v1/memories/{id}/history, the relevance breakdown of GET /v1/memories/search and the list filters
of GET /v1/memories: shapes, the owner rule (another user's memory is 404), the read-only role, 422s."""

from __future__ import annotations

from uuid import uuid4

import pytest

from assistant.dream.types import EntryStatus, Operation, Phase


def create(client, auth, **body) -> dict:  # noqa: ANN001
    payload = {"content": "Alice likes green tea.", "summary": "likes green tea", **body}
    response = client.post("/v1/memories", json=payload, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def other_auth(services) -> dict[str, str]:  # noqa: ANN001
    key, _ = services.keys.create("other", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


def test_history_shape_with_a_dream_entry(client, auth, services) -> None:  # noqa: ANN001
    memory = create(client, auth, memory_type="context", importance=0.5)
    user = str(services.keys.owner_user_id())
    dreams = services.dream.store
    session = dreams.create_session(user, 1, "manual")
    entry = dreams.begin_entry(session, 1, Phase.NREM, Operation.MEMORY_DEDUPLICATED, "dedupe:x", {"kept": memory["id"]},
                               memories=[memory["id"]])
    dreams.finish_entry(entry, EntryStatus.APPLIED)
    response = client.get(f"/v1/memories/{memory['id']}/history", headers=auth, params={"days": 40})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["memory"]["id"] == memory["id"]
    assert [e["kind"] for e in body["events"]] == ["created", "merged"]
    assert body["events"][0]["importance"] == 0.5
    assert body["events"][1]["details"]["operation"] == "MemoryDeduplicated"
    decay = body["decay"]
    assert decay["floor"] == 0.1 and decay["archive_in_days"] == 62 and len(decay["projection"]) == 41
    assert decay["projection"][1] == {"day": 1.0, "importance": pytest.approx(0.475)}


def test_history_owner_rule_and_roles(client, auth, other_auth, read_only_auth) -> None:  # noqa: ANN001
    memory = create(client, auth)
    assert client.get(f"/v1/memories/{memory['id']}/history", headers=read_only_auth).status_code == 200
    mine_elsewhere = client.get(f"/v1/memories/{memory['id']}/history", headers=other_auth)
    unknown = client.get(f"/v1/memories/{uuid4()}/history", headers=other_auth)
    assert mine_elsewhere.status_code == unknown.status_code == 404
    assert mine_elsewhere.json()["error"]["code"] == "NOT_FOUND"
    assert client.get(f"/v1/memories/{memory['id']}/history").status_code == 401
    assert client.get("/v1/memories/not-a-uuid/history", headers=auth).status_code == 422
    assert client.get(f"/v1/memories/{memory['id']}/history", headers=auth, params={"days": 0}).status_code == 422


def test_history_route_documents_role_and_owner(client) -> None:  # noqa: ANN001
    operation = client.get("/api-docs/openapi.json").json()["paths"]["/v1/memories/{memory_id}/history"]["get"]
    assert "Role: any key (`read-only` included)" in operation["description"]
    assert "another user's is 404" in operation["description"]


def test_search_hits_carry_their_relevance_parts(client, auth) -> None:  # noqa: ANN001
    create(client, auth, content="I live in Reykjavik", summary="home", memory_type="fact", importance=0.8)
    found = client.get("/v1/memories/search", params={"q": "where do I live Reykjavik"}, headers=auth).json()
    assert found
    for hit in found:
        p = hit["relevance_parts"]
        assert set(p) == {"similarity", "importance", "freshness", "factor", "retrieval_similarity"}
        assert (p["similarity"] + p["importance"] + p["freshness"]) * p["factor"] == pytest.approx(hit["relevance"],
                                                                                                   abs=1e-5)
        assert p["importance"] == pytest.approx(0.2 * hit["importance"], abs=1e-6)


def test_list_filters(client, auth, other_auth) -> None:  # noqa: ANN001
    fact = create(client, auth, content="My sister is Ada", memory_type="fact", importance=0.9)
    pref = create(client, auth, content="I like tea", memory_type="preference", importance=0.3)
    ctx = create(client, auth, content="Raining today", importance=0.5)

    def ids(**params) -> list[str]:  # noqa: ANN003
        response = client.get("/v1/memories", params=params, headers=auth)
        assert response.status_code == 200, response.text
        return [m["id"] for m in response.json()]

    assert ids(memory_type=["fact", "Preference"]) == [pref["id"], fact["id"]]
    assert ids(min_importance=0.4, max_importance=0.6) == [ctx["id"]]
    assert ids(created_after="2000-01-01", created_before="2999-01-01") == [ctx["id"], pref["id"], fact["id"]]
    assert ids(created_before="2000-01-01") == []
    assert client.get("/v1/memories", params={"memory_type": "fact"}, headers=other_auth).json() == []
    for bad in ({"memory_type": "nonsense"}, {"created_after": "yesterday"}, {"min_importance": 2},
                {"min_importance": 0.8, "max_importance": 0.1}):
        response = client.get("/v1/memories", params=bad, headers=auth)
        assert response.status_code == 422, bad
        assert response.json()["error"]["code"] == "VALIDATION_ERROR"


def test_search_takes_the_filters(client, auth) -> None:  # noqa: ANN001
    create(client, auth, content="Tea at the harbour cafe", memory_type="preference", importance=0.7)
    create(client, auth, content="The harbour cafe closes at six", memory_type="fact", importance=0.4)
    search = lambda **p: client.get("/v1/memories/search", params={"q": "harbour cafe", **p}, headers=auth)  # noqa: E731
    assert {h["memory_type"] for h in search().json()} == {"Preference", "Fact"}
    assert [h["memory_type"] for h in search(memory_type="fact").json()] == ["Fact"]
    assert [h["memory_type"] for h in search(min_importance=0.5).json()] == ["Preference"]
    assert search(created_before="2000-01-01").json() == []
    assert search(created_after="nonsense").status_code == 422
