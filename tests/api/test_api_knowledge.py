"""/api/v1/knowledge: the graph (retention, limit and its maximum, as_of, centre + depth, kind), the node
with its facts and sources, search, the SSE stream with Last-Event-ID resume (against uvicorn on
loopback: the TestClient buffers a whole response), roles, isolation, the disabled graph, the document.

Memories go in through the API; the graph's extractor is a scripted one set here (scripted facts, else
capitalised words become nodes), and one fake clock drives the memory store and the graph.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
import pytest
from fastapi.testclient import TestClient

from api.schemas.knowledge import KnowledgeGraphOut, KnowledgeNodeDetail, KnowledgeNodeOut
from api.sse import event_id
from assistant.config import Settings
from assistant.graph.types import ME, Entity, Extraction, Fact, NodeKind
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import Services, build_services
from assistant.testing.graph import ScriptedExtractor
from tests.integration.support import LiveServer

G = "/api/v1/knowledge"
T0 = 1_717_200_000.0  # 2024-06-01T00:00:00Z
DAY = 86_400.0
SOME_ID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
SCRIPTS = {
    "live in Berlin": Extraction((Entity(ME, NodeKind.PERSON), Entity("Berlin", NodeKind.PLACE)),
                                 (Fact(ME, "lives in", "Berlin"),)),
    "moved to Reykjavik": Extraction((Entity(ME, NodeKind.PERSON), Entity("Reykjavik", NodeKind.PLACE)),
                                     (Fact(ME, "lives_in", "Reykjavik"),)),
    "the chain": Extraction(tuple(Entity(n, NodeKind.PERSON) for n in ("Ana", "Ben", "Cyd", "Dan")),
                            (Fact("Ana", "knows", "Ben"), Fact("Ben", "knows", "Cyd"), Fact("Cyd", "knows", "Dan"))),
}


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@dataclass
class World:
    client: httpx.Client  # a TestClient, or an httpx client of a live server
    services: Services
    clock: Clock
    auth: dict[str, str]
    other: dict[str, str]  # another user's key
    reader: dict[str, str]  # the first user's read-only key

    def add(self, content: str, summary: str | None = None, auth: dict[str, str] | None = None) -> str:
        response = self.client.post("/v1/memories", json={"content": content, "summary": summary or content},
                                    headers=auth or self.auth)
        assert response.status_code == 201, response.text
        assert self.services.graph.wait_idle()
        return response.json()["id"]

    def graph(self, auth: dict[str, str] | None = None, **query: Any) -> dict:
        response = self.client.get(f"{G}/graph", params=query, headers=auth or self.auth)
        assert response.status_code == 200, response.text
        return response.json()

    def names(self, **query: Any) -> dict[str, dict]:
        return {n["name"]: n for n in self.graph(**query)["nodes"]}


def wire(services: Services, clock: Clock) -> None:
    """The scripted extractor and one clock for the memory store and the graph."""
    graph = services.graph
    assert graph is not None
    graph.extractor, graph.fallback = ScriptedExtractor(SCRIPTS), None
    services.memory.clock = graph.clock = graph.views.clock = graph.events.clock = clock


@pytest.fixture
def make_world(tmp_path: Path, make_settings: Callable[..., Settings], make_services: Callable[..., Services],
               make_client: Callable[[Services], TestClient]) -> Callable[..., World]:
    made: list[World] = []

    def make(**sections: Any) -> World:
        data = {"server": {"data_dir": str(tmp_path / f"data{len(made)}")}}  # each world its own files
        services = make_services(make_settings(security={"rate_limit_enabled": False}, **data, **sections))
        clock = Clock()
        wire(services, clock)
        keys = [services.keys.create("a")[0], services.keys.create("b", user_id=uuid4())[0],
                services.keys.create("reader", role="read-only")[0]]
        a, b, reader = ({"Authorization": f"Bearer {k}"} for k in keys)
        made.append(World(make_client(services), services, clock, a, b, reader))
        return made[-1]

    return make


@pytest.fixture
def world(make_world: Callable[..., World]) -> World:
    return make_world()


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


def fields_of(response: httpx.Response) -> dict[str, str]:
    error = error_of(response, 422)
    assert error["code"] == "VALIDATION_ERROR"
    return {f["field"]: f["error"] for f in error["details"]["fields"]}


# --- GET /graph ----------------------------------------------------------------------------------


def test_graph_shape_and_bytes(world: World) -> None:
    world.add("Anna met Tom in Paris")
    response = world.client.get(f"{G}/graph", headers=world.auth)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    data = response.json()
    KnowledgeGraphOut.model_validate(data)  # the documented schema is the served one
    assert {n["name"] for n in data["nodes"]} == {"Anna", "Tom", "Paris"}
    node = data["nodes"][0]
    assert set(node) == set(KnowledgeNodeOut.model_fields)
    assert node["retention"] == 1.0 and node["mention_count"] == 1 and node["kind"] == "thing"
    assert node["created_at"] == "2024-06-01T00:00:00.000Z"
    assert data["edges"] == [] and not data["truncated"]
    assert (data["total_nodes"], data["returned_nodes"], data["min_retention"]) == (3, 3, 0.1)
    assert data["as_of"] == "2024-06-01T00:00:00.000Z"
    # the same bytes as the service renders: nothing parsed and written again on the way
    assert response.content == world.services.graph.graph_json(
        str(world.services.keys.authenticate(world.auth["Authorization"][7:]).user_id))


def test_edges_carry_relation_weight_and_validity(world: World) -> None:
    world.add("I live in Berlin")
    data = world.graph()
    ids = {n["id"]: n["name"] for n in data["nodes"]}
    (edge,) = data["edges"]
    assert (ids[edge["source"]], edge["relation"], ids[edge["target"]]) == (ME, "lives_in", "Berlin")
    assert edge["weight"] == 1.0 and edge["sources"] == 1 and edge["retention"] == 1.0
    assert edge["valid_at"] == "2024-06-01T00:00:00.000Z" and edge["invalid_at"] is None
    KnowledgeGraphOut.model_validate(data)


def test_retention_hides_faded_nodes_and_min_retention_shows_them(world: World) -> None:
    world.add("Anna met Tom")
    world.clock.t += 2 * DAY  # R = e^-2 = 0.135 >= 0.1: shown
    assert set(world.names()) == {"Anna", "Tom"}
    assert world.names()["Anna"]["retention"] == pytest.approx(math.exp(-2), abs=1e-4)
    world.clock.t += 1 * DAY  # e^-3 = 0.0498 < 0.1: hidden, not deleted
    assert world.names() == {}
    assert world.graph()["total_nodes"] == 0
    assert set(world.names(min_retention=0.04)) == {"Anna", "Tom"}
    assert set(world.names(min_retention=0)) == {"Anna", "Tom"}
    world.add("Anna again")  # a mention: a recall, S = 1.5, retention back to 1
    anna = world.names()["Anna"]
    assert (anna["retention"], anna["recalls"], anna["stability"]) == (1.0, 1, 1.5)
    assert set(world.names()) == {"Anna"}


def test_limit_over_the_maximum_is_422_naming_it(world: World, make_world: Callable[..., World]) -> None:
    fields = fields_of(world.client.get(f"{G}/graph?limit=5001", headers=world.auth))
    assert "5000" in fields["limit"] and "max_nodes" in fields["limit"]
    assert "5000" in error_of(world.client.get(f"{G}/graph?limit=99999999999", headers=world.auth), 422)["message"]
    assert world.client.get(f"{G}/graph?limit=5000", headers=world.auth).status_code == 200
    assert set(fields_of(world.client.get(f"{G}/graph?limit=0", headers=world.auth))) == {"limit"}
    assert set(fields_of(world.client.get(f"{G}/graph?limit=ten", headers=world.auth))) == {"limit"}
    small = make_world(knowledge_visualization={"max_nodes": 2})
    assert "at most 2 " in fields_of(small.client.get(f"{G}/graph?limit=3", headers=small.auth))["limit"]


def test_a_graph_over_the_limit_keeps_the_most_retained_nodes(make_world: Callable[..., World]) -> None:
    world = make_world(knowledge_visualization={"max_nodes": 2})
    world.add("Old")
    world.clock.t += DAY / 2
    world.add("Newer")
    world.clock.t += DAY / 2
    world.add("Newest")
    data = world.graph()  # limit defaults to max_nodes
    assert data["truncated"] and (data["total_nodes"], data["returned_nodes"]) == (3, 2)
    assert {n["name"] for n in data["nodes"]} == {"Newer", "Newest"}
    data = world.graph(limit=1)
    assert [n["name"] for n in data["nodes"]] == ["Newest"] and data["truncated"]
    assert not world.graph(limit=2, min_retention=0.5)["truncated"]  # "Old" (e^-1 = .37) no longer matches


def test_as_of_shows_the_graph_before_a_contradiction(world: World) -> None:
    world.add("I live in Berlin")
    world.clock.t += 10 * DAY
    world.add("I moved to Reykjavik")
    now = world.graph(min_retention=0)
    names = {n["id"]: n["name"] for n in now["nodes"]}
    assert [(names[e["target"]], e["invalid_at"]) for e in now["edges"]] == [("Reykjavik", None)]
    with_invalid = world.graph(min_retention=0, include_invalid="true")
    berlin = next(e for e in with_invalid["edges"] if names[e["target"]] == "Berlin")
    assert berlin["invalid_at"] == "2024-06-11T00:00:00.000Z"
    assert berlin["invalidated_by"] == now["edges"][0]["id"]
    past = world.graph(min_retention=0, as_of="2024-06-05T00:00:00Z")
    past_names = {n["id"]: n["name"] for n in past["nodes"]}
    assert set(past_names.values()) == {ME, "Berlin"}  # Reykjavik did not exist yet
    assert [past_names[e["target"]] for e in past["edges"]] == ["Berlin"]
    assert past["as_of"] == "2024-06-05T00:00:00.000Z"
    offset = world.graph(min_retention=0, as_of="2024-06-05T02:00:00+02:00")  # an offset counts
    assert offset["as_of"] == "2024-06-05T00:00:00.000Z"
    assert world.graph(as_of="2024-05-01T00:00:00")["nodes"] == []  # before anything; no offset: UTC
    assert set(fields_of(world.client.get(f"{G}/graph?as_of=yesterday", headers=world.auth))) == {"as_of"}


def test_center_and_depth_give_the_neighbourhood(world: World) -> None:
    world.add("the chain of friends")
    ids = {n["name"]: n["id"] for n in world.graph()["nodes"]}
    assert set(ids) == {"Ana", "Ben", "Cyd", "Dan"}
    by_depth = {d: {n["name"] for n in world.graph(center=ids["Ana"], depth=d)["nodes"]} for d in (1, 2, 3)}
    assert by_depth == {1: {"Ana", "Ben"}, 2: {"Ana", "Ben", "Cyd"}, 3: {"Ana", "Ben", "Cyd", "Dan"}}
    assert {n["name"] for n in world.graph(center=ids["Cyd"])["nodes"]} == {"Ben", "Cyd", "Dan"}
    assert len(world.graph(center=ids["Cyd"])["edges"]) == 2
    assert error_of(world.client.get(f"{G}/graph?center={SOME_ID}", headers=world.auth), 404)["code"] == "NOT_FOUND"
    assert set(fields_of(world.client.get(f"{G}/graph?center={ids['Ana']}&depth=4", headers=world.auth))) == {"depth"}
    assert set(fields_of(world.client.get(f"{G}/graph?center=ana", headers=world.auth))) == {"center"}


def test_kind_keeps_one_kind(world: World) -> None:
    world.add("I live in Berlin")
    world.add("Anna met Tom")
    assert set(world.names(kind="place")) == {"Berlin"}
    assert set(world.names(kind="thing")) == {"Anna", "Tom"}
    error = fields_of(world.client.get(f"{G}/graph?kind=planet", headers=world.auth))["kind"]
    assert "place" in error and "topic" in error


def test_another_users_graph_is_never_shown(world: World) -> None:
    world.add("Zanzibar is lovely")
    other = world.graph(auth=world.other)
    assert other["nodes"] == [] and other["total_nodes"] == 0
    zanzibar = world.names()["Zanzibar"]["id"]
    error = error_of(world.client.get(f"{G}/graph?center={zanzibar}", headers=world.other), 404)
    assert error["code"] == "NOT_FOUND" and "Zanzibar" not in json.dumps(error)


# --- GET /nodes/{id} -------------------------------------------------------------------------------


def test_a_node_with_its_facts_and_sources(world: World) -> None:
    first = world.add("I live in Berlin", summary="where I live")
    world.clock.t += 10 * DAY
    second = world.add("I moved to Reykjavik", summary="the move")
    ids = {n["name"]: n["id"] for n in world.graph(min_retention=0)["nodes"]}
    response = world.client.get(f"{G}/nodes/{ids[ME]}", headers=world.auth)
    assert response.status_code == 200, response.text
    node = KnowledgeNodeDetail.model_validate(response.json())
    assert (node.name, node.kind, node.mention_count, node.recalls) == (ME, NodeKind.PERSON, 2, 1)
    assert node.stability == 1.5 and node.retention == 1.0
    assert [(f.other_name, f.direction, f.relation, f.invalid_at is None) for f in node.facts] == [
        ("Berlin", "out", "lives_in", False), ("Reykjavik", "out", "lives_in", True)]
    berlin, reykjavik = node.facts
    assert berlin.invalidated_by == reykjavik.id and berlin.invalid_at == "2024-06-11T00:00:00.000Z"
    assert (berlin.source_memory_ids, reykjavik.source_memory_ids) == ([first], [second])
    assert [(s.id, s.summary) for s in node.sources] == [(second, "the move"), (first, "where I live")]
    assert (node.sources_total, node.sources_truncated) == (2, False)
    place = world.client.get(f"{G}/nodes/{ids['Berlin']}", headers=world.auth).json()
    assert [(f["direction"], f["other_id"], f["other_name"]) for f in place["facts"]] == [("in", ids[ME], ME)]
    assert place["retention"] == pytest.approx(math.exp(-10), abs=1e-4)
    capped = world.client.get(f"{G}/nodes/{ids[ME]}?sources_limit=1", headers=world.auth).json()
    assert [s["id"] for s in capped["sources"]] == [second]
    assert (capped["sources_total"], capped["sources_truncated"]) == (2, True)


def test_unknown_or_another_users_node_is_404(world: World) -> None:
    world.add("Zanzibar is lovely", summary="secret-summary-42")
    zanzibar = world.names()["Zanzibar"]["id"]
    for auth, node in ((world.auth, SOME_ID), (world.other, zanzibar)):
        error = error_of(world.client.get(f"{G}/nodes/{node}", headers=auth), 404)
        assert error["code"] == "NOT_FOUND"
        assert "secret-summary-42" not in json.dumps(error) and "Zanzibar" not in json.dumps(error)
    assert set(fields_of(world.client.get(f"{G}/nodes/zanzibar", headers=world.auth))) == {"node_id"}
    assert set(fields_of(world.client.get(f"{G}/nodes/{zanzibar}?sources_limit=201", headers=world.auth))) == {
        "sources_limit"}


# --- GET /search -----------------------------------------------------------------------------------


def test_search_by_name_fuzzy_and_isolated(world: World) -> None:
    world.add("Anna met Tom in Paris")
    world.add("Parisian cafes", auth=world.other)
    response = world.client.get(f"{G}/search", params={"q": "Pariss"}, headers=world.auth)
    assert response.status_code == 200, response.text
    hits = response.json()
    assert hits and hits[0]["name"] == "Paris" and 0 < hits[0]["score"] <= 1
    assert {"id", "name", "kind", "aliases", "retention", "score"} <= set(hits[0])
    assert "Parisian" not in response.text  # the other user's node
    theirs = world.client.get(f"{G}/search", params={"q": "Paris"}, headers=world.other).json()
    assert [h["name"] for h in theirs] == ["Parisian"]
    assert world.client.get(f"{G}/search", params={"q": "Paris", "limit": 1}, headers=world.auth).json()[0][
        "name"] == "Paris"
    assert set(fields_of(world.client.get(f"{G}/search?q=", headers=world.auth))) == {"q"}
    assert set(fields_of(world.client.get(f"{G}/search", headers=world.auth))) == {"q"}
    assert set(fields_of(world.client.get(f"{G}/search?q=x&limit=101", headers=world.auth))) == {"limit"}


# --- roles, the disabled graph, the document -----------------------------------------------------------


def test_a_read_only_key_reads_and_no_key_is_401(world: World) -> None:
    world.add("Anna met Tom")  # the read-only key belongs to the same (owner) user
    node = world.graph(auth=world.reader)["nodes"][0]["id"]
    assert world.client.get(f"{G}/nodes/{node}", headers=world.reader).status_code == 200
    assert world.client.get(f"{G}/search?q=Anna", headers=world.reader).status_code == 200
    for path in ("/graph", f"/nodes/{node}", "/search?q=Anna", "/graph/stream"):
        assert error_of(world.client.get(f"{G}{path}"), 401)["code"] == "UNAUTHORIZED"
    assert error_of(world.client.post(f"{G}/graph", headers=world.auth), 405)["code"] == "METHOD_NOT_ALLOWED"


def test_every_route_is_503_while_the_graph_is_disabled(tmp_path: Path, make_settings: Callable[..., Settings],
                                                       make_services: Callable[..., Services],
                                                       make_client: Callable[[Services], TestClient]) -> None:
    for n, sections in enumerate(({"knowledge_graph": {"enabled": False}}, {"memory": {"enabled": False}})):
        services = make_services(make_settings(server={"data_dir": str(tmp_path / f"data{n}")}, **sections))
        assert services.graph is None
        client = make_client(services)
        auth = {"Authorization": f"Bearer {services.keys.create('a')[0]}"}
        for path in ("/graph?limit=0", f"/nodes/{SOME_ID}", "/search?q=x", "/graph/stream", "/search"):
            error = error_of(client.get(f"{G}{path}", headers=auth), 503)  # before the parameters are checked
            assert error["code"] == "SERVICE_UNAVAILABLE" and "knowledge_graph" in error["message"]


def test_the_document_names_the_bounds_and_the_schema(make_world: Callable[..., World]) -> None:
    world = make_world(knowledge_visualization={"max_nodes": 1234, "min_retention_threshold": 0.2})
    document = world.client.get("/api-docs/openapi.json").json()
    operation = document["paths"][f"{G}/graph"]["get"]
    params = {p["name"]: p["schema"] for p in operation["parameters"]}
    assert (params["limit"]["maximum"], params["limit"]["default"]) == (1234, 1234)
    assert params["min_retention"]["default"] == 0.2
    assert "#/components/schemas/NodeKind" in json.dumps(params["kind"])
    assert set(document["components"]["schemas"]["NodeKind"]["enum"]) == {k.value for k in NodeKind}
    assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "KnowledgeGraphOut")
    for word in ("e^(−t/S)", "most retained", "as_of", "truncated"):
        assert word in operation["description"], word
    stream = document["paths"][f"{G}/graph/stream"]["get"]
    assert "text/event-stream" in stream["responses"]["200"]["content"]
    assert {"NodeCreated", "NodeDecayed", "EdgeCreated", "EdgeInvalidated"} <= {
        w.strip("`") for w in stream["description"].split() if w.startswith("`")}
    assert world.client.get(f"{G}/graph?limit=1234", headers=world.auth).status_code == 200
    assert world.graph()["min_retention"] == 0.2


# --- GET /graph/stream (uvicorn on loopback) --------------------------------------------------------


class Events:
    """The events (id, name, data) of an open stream, read as they come; comments (pings) are skipped."""

    def __init__(self, response: httpx.Response):
        self.lines = response.iter_lines()

    def take(self, count: int) -> list[tuple[int, str, dict]]:
        found: list[tuple[int, str, dict]] = []
        ident, name, data = 0, "message", ""
        for line in self.lines:
            if line.startswith("id:"):
                ident = int(line[3:].strip())
            elif line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif line == "" and data:
                found.append((ident, name, json.loads(data)))
                ident, name, data = 0, "message", ""
                if len(found) == count:
                    break
        return found


@pytest.fixture
def live(make_settings: Callable[..., Settings]) -> Iterator[tuple[LiveServer, World]]:
    services = build_services(make_settings(security={"rate_limit_enabled": False}), chat_model=ScriptedChatModel())
    clock = Clock()
    wire(services, clock)
    keys = [services.keys.create("a")[0], services.keys.create("b", user_id=uuid4())[0],
            services.keys.create("reader", role="read-only")[0]]
    a, b, reader = ({"Authorization": f"Bearer {k}"} for k in keys)
    with LiveServer(services) as server, httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield server, World(client, services, clock, a, b, reader)


def test_the_stream_sends_stored_then_live_events_and_resumes(live: tuple[LiveServer, World]) -> None:
    server, world = live
    owner = str(world.services.keys.owner_user_id())
    world.add("Anna met Tom")  # two stored events before anyone listens
    url = f"{server.base_url}{G}/graph/stream"
    with httpx.Client(timeout=httpx.Timeout(30.0)) as http:  # a read timeout, never a hang
        with http.stream("GET", url, headers=world.reader) as response:  # a read-only key may follow
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = Events(response)
            first = events.take(2)
            assert [(i, n, d["name"]) for i, n, d in first] == [(1, "NodeCreated", "Anna"), (2, "NodeCreated", "Tom")]
            world.add("I live in Berlin")  # live: me, Berlin, the edge
            live_events = events.take(3)
        assert [(i, n) for i, n, _ in live_events] == [(3, "NodeCreated"), (4, "NodeCreated"), (5, "EdgeCreated")]
        assert live_events[2][2]["relation"] == "lives_in"
        with http.stream("GET", url, headers={**world.auth, "Last-Event-ID": "3"}) as response:
            events = Events(response)
            assert [i for i, _, _ in events.take(2)] == [4, 5]  # stored events after 3 first
            world.add("Zoe arrived")
            assert events.take(1)[0][:2] == (6, "NodeCreated")  # then live
            anna, tom = (d["id"] for _, _, d in first)
            world.services.graph.merge_nodes(owner, anna, tom)  # what dream mode does
            assert events.take(1) == [(7, "NodeMerged", {"id": anna, "merged_id": tom, "name": "Anna",
                                                         "aliases": ["Tom"]})]
        assert [(n["name"], n["aliases"]) for n in world.graph()["nodes"] if n["id"] in (anna, tom)] == [
            ("Anna", ["Tom"])]
        with http.stream("GET", url, headers={**world.other, "Last-Event-ID": "0"}) as response:
            world.add("Yan is mine", auth=world.other)  # the other user sees only their own, numbered from 1
            assert [(i, d["name"]) for i, _, d in Events(response).take(1)] == [(1, "Yan")]
    deadline = time.monotonic() + 30  # a bound against hangs, not a timing assertion
    while world.services.graph.events.subscribers(owner) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert world.services.graph.events.subscribers(owner) == 0  # a closed stream stops following


@pytest.mark.parametrize(("header", "after"), [("7", 7), (" 12 ", 12), ("", 0), ("null", 0), ("-1", 0),
                                               ("1e3", 0), (str(2**53 + 1), 0), ("٣", 0)])
def test_last_event_id_parsing(header: str, after: int) -> None:
    assert event_id(header) == after
