"""The memory explorer's clients over real services (SQLite, the hashing embedder): the in-process client
and the HTTP one (an httpx transport into the app's TestClient: the real routes) answer the same JSON for
search (with the relevance breakdown), the filtered list and a memory's history; failures are
ClientErrors a page can show (404, 422, an unreachable server, a refused key)."""

from __future__ import annotations

import time

import httpx
import pytest

from assistant.dream.types import EntryStatus, Operation, Phase
from assistant.services import Services
from dashboards.client import ApiUnreachable, ClientError, KeyRefused
from dashboards.memory_client import HttpMemoryClient, LocalMemoryClient


def owner(services: Services) -> str:
    return str(services.keys.owner_user_id())


def transport(client) -> httpx.MockTransport:  # noqa: ANN001
    def handle(request: httpx.Request) -> httpx.Response:
        # the raw path and query: a repeated parameter (memory_type=a&memory_type=b) stays repeated
        answer = client.request(request.method, request.url.raw_path.decode(), content=request.content,
                                headers=dict(request.headers))
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    return httpx.MockTransport(handle)


@pytest.fixture
def planted(services: Services, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    user, memory = owner(services), services.memory
    ids = {
        "tea": memory.add(user, "I drink green tea every morning", memory_type="preference", importance=0.7).id,
        "sister": memory.add(user, "My sister Ada lives in Lisbon", memory_type="fact", importance=0.9).id,
        "rain": memory.add(user, "It rained on the way to the tea shop", importance=0.3).id,
    }
    dreams = services.dream.store
    session = dreams.create_session(user, 1, "manual")
    entry = dreams.begin_entry(session, 1, Phase.NREM, Operation.MEMORY_DEDUPLICATED, "dedupe:t", {"kept": ids["tea"]},
                               memories=[ids["tea"]], before={"contents": ["I drink green tea every morning"]})
    dreams.finish_entry(entry, EntryStatus.APPLIED)
    memory.quarantine(user, ids["rain"], "stale: weather of a past day")
    later = time.time() + 5 * 3600.0
    monkeypatch.setattr(memory, "clock", lambda: later)  # both clients read at the same moment: same freshness
    return ids


@pytest.fixture
def local(services: Services) -> LocalMemoryClient:
    return LocalMemoryClient(services.memory, owner(services), services.dream.store.memory_journal)


@pytest.fixture
def http(client, api_key) -> HttpMemoryClient:  # noqa: ANN001
    return HttpMemoryClient("http://api.test", api_key, transport=transport(client))


def test_both_clients_answer_the_same_json(planted, local, http) -> None:  # noqa: ANN001
    for filters in ({}, {"memory_type": ["fact", "Preference"]}, {"min_importance": 0.8},
                    {"created_after": "2000-01-01", "created_before": "2999-01-01"}):
        assert local.memories(**filters) == http.memories(**filters), filters
        assert local.search("tea", **filters) == http.search("tea", **filters), filters
    hits = local.search("green tea")
    assert hits[0]["id"] == planted["tea"]
    parts = hits[0]["relevance_parts"]
    assert (parts["similarity"] + parts["importance"] + parts["freshness"]) * parts["factor"] == pytest.approx(
        hits[0]["relevance"], abs=1e-5)
    assert [m["id"] for m in local.memories(memory_type=["fact"])] == [planted["sister"]]
    for key in ("tea", "rain"):
        assert local.history(planted[key]) == http.history(planted[key])
    history = local.history(planted["tea"], days=10)
    assert [e["kind"] for e in history["events"]] == ["created", "merged"]
    assert history["events"][1]["details"]["operation"] == "MemoryDeduplicated"
    assert len(history["decay"]["projection"]) == 11
    rain = local.history(planted["rain"])
    assert rain["events"][-1]["details"]["reason"] == "stale: weather of a past day" and rain["decay"] is None


def test_failures_are_client_errors(planted, local, http, client) -> None:  # noqa: ANN001
    for c in (local, http):
        with pytest.raises(ClientError) as missing:
            c.history("00000000-0000-4000-8000-000000000000")
        assert missing.value.status == 404
        with pytest.raises(ClientError) as bad:
            c.memories(memory_type=["nonsense"])
        assert bad.value.status == 422 and "nonsense" in str(bad.value)
    with pytest.raises(KeyRefused):
        HttpMemoryClient("http://api.test", "not-a-key", transport=transport(client)).search("tea")
    with pytest.raises(ApiUnreachable):
        HttpMemoryClient("http://127.0.0.1:9", "k", timeout=5).memories()
