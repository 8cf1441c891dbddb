"""The dashboard's graph clients: HTTP (httpx against a scripted transport: parameters, the SSE stream,
resuming with Last-Event-ID) and in process (the node answer, events from this process and, by
polling the stored log, from another graph on the same database)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from assistant.graph.service import KnowledgeGraph
from assistant.graph.types import NodeKind
from assistant.services import Services
from assistant.testing.graph import ScriptedExtractor
from dashboards.client import ClientError
from dashboards.graph_client import HttpGraphClient, LiveEvent, LocalGraphClient

KEY = "sk-test"
USER = "alice"


def sse(*events: tuple[str, int, dict]) -> bytes:
    out = ": ping\n\n"
    for kind, seq, data in events:
        out += f"event: {kind}\nid: {seq}\ndata: {json.dumps(data)}\n\n"
    return out.encode()


class Server:
    """A scripted knowledge API: records requests, answers graph/search/node, streams given events."""

    def __init__(self, streams: list[bytes]):
        self.requests: list[httpx.Request] = []
        self.streams = list(streams)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if request.headers.get("authorization") != f"Bearer {KEY}":
            return httpx.Response(401, json={"error": {"code": "UNAUTHORIZED"}})
        if path == "/api/v1/knowledge/graph":
            return httpx.Response(200, json={"nodes": [], "edges": [], "params": dict(request.url.params)})
        if path == "/api/v1/knowledge/search":
            return httpx.Response(200, json=[{"id": "n1", "name": request.url.params["q"], "score": 1.0}])
        if path == "/api/v1/knowledge/nodes/n1":
            return httpx.Response(200, json={"id": "n1", "facts": [], "sources": []})
        if path == "/api/v1/knowledge/graph/stream":
            body = self.streams.pop(0) if self.streams else b""
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(404, json={"error": {"code": "NOT_FOUND"}})


def test_http_queries_map_to_the_routes() -> None:
    server = Server([])
    client = HttpGraphClient("http://api.test/", KEY, transport=httpx.MockTransport(server))
    answer = client.graph(min_retention=0.2, limit=100, as_of=1_717_200_000.0, kind="person")
    assert answer["params"] == {"min_retention": "0.2", "limit": "100", "as_of": "2024-06-01T00:00:00.000Z",
                                "kind": "person"}
    assert client.graph(center="n1", depth=2, include_invalid=True)["params"] == {
        "center": "n1", "depth": "2", "include_invalid": "true"}
    assert client.search("Anna", 3) == [{"id": "n1", "name": "Anna", "score": 1.0}]
    assert server.requests[-1].url.params["limit"] == "3"
    assert client.node("n1")["id"] == "n1"
    with pytest.raises(ClientError):
        client.node("gone")
    client.close()


def test_http_events_arrive_and_the_stream_resumes_after_the_last_id() -> None:
    server = Server([
        sse(("NodeCreated", 1, {"id": "a", "name": "Anna"}), ("EdgeCreated", 2, {"id": "e"})),
        b"event: NodeCreated\nid: 3\ndata: {\"id\":\ndata: \"b\"}\n\n",  # data over two lines
    ])
    client = HttpGraphClient("http://api.test", KEY, retry_secs=0.01, transport=httpx.MockTransport(server))
    got: list[LiveEvent] = []
    done = threading.Event()

    def collect(event: LiveEvent) -> None:
        got.append(event)
        if len(got) == 3:
            done.set()

    client.subscribe(collect)
    assert done.wait(10)
    client.close()
    assert [(e.type, e.seq) for e in got] == [("NodeCreated", 1), ("EdgeCreated", 2), ("NodeCreated", 3)]
    assert got[2].data == {"id": "b"}
    streams = [r for r in server.requests if r.url.path.endswith("/stream")]
    assert "last-event-id" not in streams[0].headers
    assert streams[1].headers["last-event-id"] == "2"


@pytest.fixture
def graph_services(make_settings, make_services, model) -> Services:
    services = make_services(make_settings(), model)
    services.graph.extractor = ScriptedExtractor()  # capitalised words become nodes, whatever is configured
    return services


def test_local_node_answer_has_facts_and_sources(graph_services: Services) -> None:
    graph_services.memory.add(USER, "Anna met Tom in Paris")
    assert graph_services.graph.wait_idle()
    client = LocalGraphClient(graph_services.graph, USER)
    [hit] = [h for h in client.search("Anna") if h["name"] == "Anna"]
    assert hit["score"] == 1.0 and hit["kind"] in {k.value for k in NodeKind}
    node = client.node(hit["id"])
    assert set(node) >= {"id", "name", "kind", "aliases", "mention_count", "recalls", "stability", "created_at",
                         "last_seen", "retention", "facts", "sources", "sources_total", "sources_truncated"}
    assert [s["summary"] for s in node["sources"]] == ["Anna met Tom in Paris"]
    for fact in node["facts"]:
        assert fact["other_name"] in {"Tom", "Paris"} and fact["direction"] in {"out", "in"}
    client.close()


def test_local_events_from_this_process_and_from_the_stored_log(graph_services: Services) -> None:
    writer = graph_services.graph
    got: list[LiveEvent] = []
    client = LocalGraphClient(writer, USER)
    client.subscribe(got.append)
    graph_services.memory.add(USER, "Anna met Tom")
    assert writer.wait_idle()
    assert {e.data.get("name") for e in got if e.type == "NodeCreated"} == {"Anna", "Tom"}
    client.close()

    # another process's graph on the same database: only the stored event log tells it
    reader = KnowledgeGraph(writer.db, writer.store.sealer, writer.memory, writer.extractor, writer.settings,
                            graph_services.settings.memory, writer.visualization)
    assert len(reader.graph(USER)["nodes"]) == 2  # its cached view
    polled: list[LiveEvent] = []
    client = LocalGraphClient(reader, USER, poll_secs=0.05)
    client.subscribe(polled.append)
    graph_services.memory.add(USER, "Lena lives in Rome")
    assert writer.wait_idle()
    deadline = time.monotonic() + 10
    while not polled and time.monotonic() < deadline:
        time.sleep(0.05)
    client.close()
    assert {e.data.get("name") for e in polled if e.type == "NodeCreated"} == {"Lena", "Rome"}
    assert {n["name"] for n in reader.graph(USER)["nodes"]} == {"Anna", "Tom", "Lena", "Rome"}  # marked changed
