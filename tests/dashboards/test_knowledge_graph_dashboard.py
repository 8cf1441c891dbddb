"""The knowledge-graph dashboard over real services (SQLite, the hashing embedder, the provisional
extractor: capitalised words become nodes), through the in-process client."""

from __future__ import annotations

import time

import numpy as np
import panel as pn
import param
import pytest

from assistant.graph.types import Entity, Extraction, Fact, NodeKind
from assistant.services import Services
from assistant.testing.graph import ScriptedExtractor
from benchmarks.graph_dashboard import synthetic_graph
from dashboards.graph_client import LocalGraphClient
from dashboards.graph_layout import PositionCache, force_layout
from dashboards.knowledge_graph import KnowledgeGraphView, build_figure, details_markdown

USER = "alice"
DAY = 86_400.0


PERSON, PLACE = NodeKind.PERSON, NodeKind.PLACE
SCRIPTS = {  # anything else: its capitalised words, as things
    "Anna met Tom": Extraction((Entity("Anna", PERSON), Entity("Tom", PERSON), Entity("Paris", PLACE)),
                               (Fact("Anna", "met", "Tom"), Fact("Anna", "visited", "Paris"))),
    "Tom likes Oslo": Extraction((Entity("Tom", PERSON), Entity("Oslo", PLACE)), (Fact("Tom", "likes", "Oslo"),)),
}


@pytest.fixture
def graph_services(make_settings, make_services, model) -> Services:
    services = make_services(make_settings(), model)
    services.graph.extractor = ScriptedExtractor(SCRIPTS)  # whatever the configured one: known facts
    return services


def remember(services: Services, *texts: str) -> None:
    for text in texts:
        services.memory.add(USER, text)
    assert services.graph.wait_idle()


def node_trace(view: KnowledgeGraphView):
    [trace] = [t for t in view.plot.object.data if t.name == "nodes"]
    return trace


def shown(view: KnowledgeGraphView) -> dict[str, str]:
    """name -> id of the nodes drawn."""
    trace = node_trace(view)
    return dict(zip(trace.text, trace.customdata, strict=True))


@pytest.fixture
def view(graph_services: Services):
    remember(graph_services, "Anna met Tom in Paris", "Anna and Lena went to Rome")
    client = LocalGraphClient(graph_services.graph, USER)
    view = KnowledgeGraphView(client)
    yield view
    client.close()


def test_the_figure_has_the_nodes_coloured_sized_and_the_edges_binned(view: KnowledgeGraphView) -> None:
    assert set(shown(view)) == {"Anna", "Tom", "Paris", "Lena", "Rome"}
    trace = node_trace(view)
    names = list(trace.text)
    sizes = dict(zip(names, trace.marker.size, strict=True))
    assert sizes["Anna"] > sizes["Tom"]  # two mentions against one
    assert list(trace.marker.color) == [1.0] * 5 and trace.marker.colorscale is not None
    [lines] = [t for t in view.plot.object.data if t.mode == "lines"]  # two facts of weight 1: one bin
    assert np.isfinite(np.asarray(lines.x, dtype=float)).sum() == 4 and lines.line.width == 2.6
    pn.panel(view)  # lays out without error


def test_the_retention_slider_hides_nodes(view: KnowledgeGraphView, graph_services: Services) -> None:
    graph = graph_services.graph
    later = time.time() + DAY  # a day on: once-mentioned nodes e^-1 = .37, Anna (recalled: S 1.5) e^-(2/3) = .51
    graph.clock = graph.views.clock = lambda: later
    view.min_retention = 0.3
    assert set(shown(view)) == {"Anna", "Tom", "Paris", "Lena", "Rome"}
    view.min_retention = 0.45
    assert set(shown(view)) == {"Anna"}
    retention = dict(zip(node_trace(view).text, node_trace(view).marker.color, strict=True))
    assert retention["Anna"] == pytest.approx(np.exp(-1 / 1.5), abs=1e-3)


def test_search_centres_on_an_entity_and_shows_its_details(view: KnowledgeGraphView, graph_services) -> None:
    remember(graph_services, "Tom likes Oslo")
    view.refresh()
    assert "Oslo" in shown(view)
    assert view.find("tom") is not None
    assert set(shown(view)) == {"Tom", "Anna", "Oslo"}  # one hop: Anna met Tom, Tom likes Oslo
    view.depth = 2
    assert set(shown(view)) == {"Tom", "Anna", "Oslo", "Paris"}
    assert "Centred on **Tom**" in view.status.object
    assert any(t.name == "centre" for t in view.plot.object.data)
    assert view.details.object.startswith("### Tom")
    assert "Tom likes Oslo" in view.details.object  # a source memory
    view.center = None
    assert len(shown(view)) == 6
    view.select("no-such-node")
    assert view.details.object.startswith("The node could not be read")


def test_the_widgets_drive_the_view(view: KnowledgeGraphView) -> None:
    view.search_box.value = "Tom"  # Enter in the search box
    assert view.center == shown(view)["Tom"] and set(shown(view)) == {"Tom", "Anna"}
    view.clear_button.clicks += 1
    assert view.center is None and len(shown(view)) == 5
    paris = shown(view)["Paris"]
    view.plot.click_data = {"points": [{"curveNumber": 1, "customdata": paris}]}  # a click on a node
    assert view.selected == paris and view.details.object.startswith("### Paris")
    assert "Anna —visited→ Paris" in view.details.object
    past = view.timeline.start + (view.timeline.end - view.timeline.start) / 10
    with param.edit_constant(view.timeline):  # as the browser sets it when the handle is let go
        view.timeline.value_throttled = past  # before any memory
    assert view.as_of is not None and shown(view) == {}
    with param.edit_constant(view.timeline):
        view.timeline.value_throttled = view.timeline.end
    assert view.as_of is None and len(shown(view)) == 5


def test_as_of_hides_later_nodes(view: KnowledgeGraphView, graph_services: Services) -> None:
    before = time.time()
    time.sleep(0.05)
    remember(graph_services, "Mara visited Kyoto")
    view.refresh()
    assert {"Mara", "Kyoto"} <= set(shown(view))
    view.as_of = before
    assert set(shown(view)) == {"Anna", "Tom", "Paris", "Lena", "Rome"}
    view.as_of = None
    assert {"Mara", "Kyoto"} <= set(shown(view))


def test_the_kind_filter(view: KnowledgeGraphView) -> None:
    view.kind = NodeKind.PERSON.value
    assert set(shown(view)) == {"Anna", "Tom"}
    view.kind = NodeKind.THING.value
    assert set(shown(view)) == {"Lena", "Rome"}


def test_a_new_memory_appears_after_the_debounced_refresh(view: KnowledgeGraphView, graph_services) -> None:
    positions = {n: view.positions.positions[i] for n, i in shown(view).items()}
    assert view.poll() is False  # nothing happened: no redraw
    remember(graph_services, "Anna flew to Lisbon")
    assert "Lisbon" not in shown(view)  # events only mark the view stale
    assert view.poll() is True
    assert "Lisbon" in shown(view)
    after = {n: view.positions.positions[i] for n, i in shown(view).items()}
    assert all(after[n] == p for n, p in positions.items())  # the others did not move


def test_user_content_is_shown_as_text() -> None:
    node = {"name": "<img src=x onerror=alert(1)>", "kind": "thing", "retention": 1.0, "mention_count": 1,
            "recalls": 0, "stability": 1.0, "created_at": "2024-06-01T00:00:00.000Z",
            "last_seen": "2024-06-01T00:00:00.000Z", "aliases": ["**bold**"], "facts": [],
            "sources": [{"created_at": "2024-06-01T00:00:00.000Z", "summary": "[click](javascript:alert(1))"}]}
    text = details_markdown(node)
    assert "<img" not in text and "&lt;img src=x onerror=alert\\(1\\)&gt;" in text
    assert "\\*\\*bold\\*\\*" in text and "\\[click\\]\\(javascript:alert\\(1\\)\\)" in text
    data = {"nodes": [node | {"id": "n"}], "edges": [], "total_nodes": 1, "returned_nodes": 1, "returned_edges": 0,
            "truncated": False, "as_of": "2024-06-01T00:00:00.000Z"}
    fig = build_figure(data, np.zeros((1, 2)))
    assert "<img" not in fig.data[0].hovertext[0] and "<img" not in fig.layout.annotations[0].text


def test_an_unreadable_graph_is_reported_and_the_plot_kept(view: KnowledgeGraphView) -> None:
    before = view.plot.object

    def down(**query: object) -> dict:
        raise ConnectionError("the server is down")

    view.client.graph = down
    view.refresh()
    assert view.status.object.startswith("**The graph could not be read:** the server is down")
    assert view.plot.object is before


def test_details_markdown_of_a_fact() -> None:
    node = {"name": "me", "kind": "person", "retention": 0.5, "mention_count": 2, "recalls": 1, "stability": 1.5,
            "created_at": "2024-06-01T00:00:00.000Z", "last_seen": "2024-06-02T00:00:00.000Z", "aliases": [],
            "facts": [{"relation": "lives_in", "direction": "out", "other_name": "Berlin", "weight": 1.0,
                       "invalid_at": "2024-06-10T00:00:00.000Z"}],
            "sources": [{"created_at": "2024-06-01T00:00:00.000Z", "summary": "I live in Berlin"}],
            "sources_total": 3, "sources_truncated": True}
    text = details_markdown(node)
    assert "me —lives\\_in→ Berlin" in text and "~~invalid since 2024-06-10" in text
    assert "2024-06-01: I live in Berlin" in text and "… 2 more" in text


def test_a_5000_node_graph_renders(graph_services: Services) -> None:
    synthetic_graph(graph_services.graph, USER, 5000, 20_000)  # straight through the store
    client = LocalGraphClient(graph_services.graph, USER)
    view = KnowledgeGraphView(client, live=False, min_retention=0.0)
    trace = node_trace(view)
    assert len(trace.customdata) == 5000
    lines = [t for t in view.plot.object.data if t.mode == "lines"]
    assert 1 <= len(lines) <= 4
    assert sum(np.isfinite(np.asarray(t.x, dtype=float)).sum() for t in lines) // 2 == view.data["returned_edges"]
    assert np.isfinite(np.asarray(trace.x, dtype=float)).all()
    view.min_retention = 0.5  # a quarter of them are under: fewer drawn, positions kept
    assert 0 < len(node_trace(view).customdata) < 5000
    client.close()


def test_positions_stay_put_when_a_node_is_added() -> None:
    cache = PositionCache(iterations=30)
    ids = [f"n{i}" for i in range(50)]
    edges = [(f"n{i}", f"n{(i * 7 + 1) % 50}", 1.0) for i in range(50)]
    first = cache.place(ids, edges)
    second = cache.place([*ids, "new"], [*edges, ("new", "n3", 1.0)])
    assert np.array_equal(second[:50], first)
    assert np.linalg.norm(second[50] - first[3]) < np.ptp(first, axis=0).max() / 2  # near its neighbour


def test_force_layout_separates_nodes_and_keeps_them_in_view() -> None:
    pos = force_layout(200, np.arange(199), np.arange(1, 200), iterations=50)
    assert np.isfinite(pos).all()
    distances = np.linalg.norm(pos[:, None] - pos[None], axis=-1)[np.triu_indices(200, 1)]
    assert distances.min() > 0
    assert np.abs(pos).max() < 10


def test_build_figure_of_an_empty_graph() -> None:
    data = {"nodes": [], "edges": [], "total_nodes": 0, "returned_nodes": 0, "returned_edges": 0,
            "truncated": False, "as_of": "2024-06-01T00:00:00.000Z"}
    fig = build_figure(data, np.zeros((0, 2)))
    assert [t.name for t in fig.data] == ["nodes"]
