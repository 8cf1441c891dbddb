"""The memory explorer over real services (SQLite, the hashing embedder) through the in-process client: the
list with its filters, a search with the relevance breakdown (table and stacked bars), a selected memory's
history (time line, events, decay projection), and the banner when the client fails (the API unreachable,
the key refused, a bad filter)."""

from __future__ import annotations

from datetime import date

import httpx
import pytest

from assistant.services import Services
from dashboards.memory_client import HttpMemoryClient, LocalMemoryClient
from dashboards.memory_explorer import MemoryExplorer, decay_figure, hits_frame, parts_figure, timeline_figure


def owner(services: Services) -> str:
    return str(services.keys.owner_user_id())


@pytest.fixture
def explorer(services: Services) -> MemoryExplorer:
    user, memory = owner(services), services.memory
    memory.add(user, "I drink green tea every morning", memory_type="preference", importance=0.7)
    memory.add(user, "My sister Ada lives in Lisbon", memory_type="fact", importance=0.9)
    memory.add(user, "It rained on the way to the tea shop", importance=0.3)
    return MemoryExplorer(LocalMemoryClient(services.memory, user, services.dream.store.memory_journal))


def test_the_list_then_a_search_with_the_breakdown(explorer: MemoryExplorer) -> None:
    assert len(explorer.table.value) == 3 and explorer.table.value["relevance"].isna().all()
    assert not explorer.banner.visible
    explorer.query.value = "green tea"
    explorer.refresh()
    table = explorer.table.value
    assert table.iloc[0]["content"] == "I drink green tea every morning"
    assert table["relevance"].notna().all() and list(table["relevance"]) == sorted(table["relevance"], reverse=True)
    row = table.iloc[0]
    assert row["similarity part"] + row["importance part"] + row["freshness part"] == pytest.approx(row["relevance"],
                                                                                                  abs=1e-5)
    figure = explorer.parts.object
    assert [t.name for t in figure.data] == ["0.50 × similarity", "0.20 × importance", "0.30 × freshness", "relevance"]
    assert len(figure.data[0].y) == len(table)
    assert "green tea" in explorer.status.object


def test_filters_reach_the_client(explorer: MemoryExplorer) -> None:
    explorer.types.value = ["Fact"]
    assert list(explorer.table.value["type"]) == ["Fact"]
    explorer.types.value = []
    explorer.importance.value = (0.5, 1.0)
    assert set(explorer.table.value["type"]) == {"Fact", "Preference"}
    explorer.importance.value = (0.0, 1.0)
    explorer.before.value = date(2000, 1, 1)
    assert explorer.table.value.empty
    explorer.before.value = None
    explorer.after.value = date(2000, 1, 1)
    assert len(explorer.table.value) == 3


def test_selecting_a_memory_shows_its_history(explorer: MemoryExplorer) -> None:
    explorer.table.selection = [1]
    selected = explorer.table.value.iloc[1]
    assert explorer.history["memory"]["id"] == selected["id"]
    assert list(explorer.events.value["kind"]) == ["created"]
    assert [t.name for t in explorer.timeline.object.data] == ["created"]
    decay = explorer.decay.object
    assert len(decay.data[0].x) == 91 and decay.data[0].y[0] == pytest.approx(selected["importance"])
    assert "effective rate" in explorer.summary.object


def test_figures_without_data() -> None:
    assert hits_frame([]).empty and len(parts_figure([]).data) == 4
    assert timeline_figure(None).data == () and decay_figure(None).data == ()


def test_failures_show_a_banner(services: Services, client) -> None:  # noqa: ANN001
    unreachable = MemoryExplorer(HttpMemoryClient("http://127.0.0.1:9", "k", timeout=5))
    assert unreachable.banner.visible and "did not answer" in unreachable.banner.object
    assert unreachable.table.value.empty

    def handle(request: httpx.Request) -> httpx.Response:
        answer = client.request(request.method, request.url.raw_path.decode(), headers=dict(request.headers))
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    refused = MemoryExplorer(HttpMemoryClient("http://api.test", "wrong", transport=httpx.MockTransport(handle)))
    assert refused.banner.visible and "refused the key" in refused.banner.object


def test_a_missing_memory_says_so(explorer: MemoryExplorer) -> None:
    assert explorer.show_history("00000000-0000-4000-8000-000000000000") is None
    assert explorer.banner.visible and "not found" in explorer.banner.object
    explorer.refresh()
    assert not explorer.banner.visible
