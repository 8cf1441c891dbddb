"""The Graph-style sender against the loopback stand-in of the Send API (a real HTTP server): the
endpoint follows the recipient (Messenger or WhatsApp Cloud style), long texts go in parts, refusals
and unreachable servers are errors that never show the access token."""

from __future__ import annotations

import httpx
import pytest

from assistant.messaging.sender import (
    GraphMessageSender,
    MessageSendError,
    Recipient,
    SentMessage,
    split_text,
)
from tests.integration.tools.graph_api_server import GraphApi, graph_api  # noqa: F401

TOKEN = "page-token-xyz"


@pytest.fixture
def sender(graph_api: GraphApi) -> GraphMessageSender:  # noqa: F811
    made = GraphMessageSender(graph_api.base_url, TOKEN)
    yield made
    made.close()


def test_messenger_style_reply(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    sent = sender.send_text(Recipient("psid-1"), "Hello there")
    assert sent == SentMessage("messenger", ("m_1",)) and sent.message_id == "m_1"
    (request,) = graph_api.requests
    assert request["path"] == "/me/messages" and request["query"] == {"access_token": [TOKEN]}
    assert request["body"] == {"recipient": {"id": "psid-1"}, "messaging_type": "RESPONSE",
                               "message": {"text": "Hello there"}}
    assert request["content_type"] == "application/json" and request["authorization"] is None


def test_a_tagged_messenger_message(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    sender.send_text(Recipient("psid-1"), "Reminder: tea", tag="CONFIRMED_EVENT_UPDATE")
    assert graph_api.requests[0]["body"] == {"recipient": {"id": "psid-1"}, "messaging_type": "MESSAGE_TAG",
                                             "tag": "CONFIRMED_EVENT_UPDATE", "message": {"text": "Reminder: tea"}}


def test_whatsapp_style_reply_goes_to_the_receiving_number(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    sent = sender.send_text(Recipient("16505551234", "106540352242922"), "Hi!", tag="ignored for whatsapp")
    assert sent == SentMessage("whatsapp", ("wamid.1",))
    (request,) = graph_api.requests
    assert request["path"] == "/106540352242922/messages"
    assert request["query"] == {} and request["authorization"] == f"Bearer {TOKEN}"
    assert request["body"] == {"messaging_product": "whatsapp", "to": "16505551234", "type": "text",
                               "text": {"body": "Hi!"}}


def test_a_base_url_with_a_version_prefix(graph_api: GraphApi) -> None:  # noqa: F811
    sender = GraphMessageSender(graph_api.base_url + "/v19.0/", TOKEN)
    try:
        with pytest.raises(MessageSendError, match="HTTP 404: unknown path /v19.0/me/messages"):
            sender.send_text(Recipient("psid-1"), "hi")  # the stand-in serves no version prefix: the path shows it
    finally:
        sender.close()


def test_long_texts_go_in_parts_in_order(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    paragraph = ("word " * 300).strip()  # 1,499 characters
    sent = sender.send_text(Recipient("psid-1"), f"{paragraph}\n\n{paragraph}")
    assert sent.message_ids == ("m_1", "m_2")
    texts = [r["body"]["message"]["text"] for r in graph_api.requests]
    assert texts == [paragraph, paragraph]
    graph_api.requests.clear()
    sender.send_text(Recipient("1650", "99"), "x" * 5000)
    assert [len(r["body"]["text"]["body"]) for r in graph_api.requests] == [4096, 904]


def test_a_refusal_is_an_error_without_the_token(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    graph_api.refuse_with = 400
    with pytest.raises(MessageSendError) as refused:
        sender.send_text(Recipient("psid-1"), "hi")
    assert str(refused.value) == "messenger API answered HTTP 400: (#100) No matching user found"
    with pytest.raises(MessageSendError, match="^whatsapp API answered HTTP 400"):
        sender.send_text(Recipient("1650", "99"), "hi")


def test_a_failing_part_stops_the_rest() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 2:
            return httpx.Response(500, json={"error": {"message": "try later"}})
        return httpx.Response(200, json={"message_id": f"m{len(calls)}"})

    sender = GraphMessageSender("http://graph.test", TOKEN, client=httpx.Client(transport=httpx.MockTransport(handler)))
    with pytest.raises(MessageSendError, match="^part 2 of 3: messenger API answered HTTP 500: try later$"):
        sender.send_text(Recipient("psid-1"), "a" * 2000 + "b" * 2000 + "c")
    assert len(calls) == 2
    sender.close()


def test_an_unreachable_api_is_an_error_without_the_token() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot reach {request.url}")

    sender = GraphMessageSender("http://graph.test", TOKEN, client=httpx.Client(transport=httpx.MockTransport(handler)))
    with pytest.raises(MessageSendError) as unreachable:
        sender.send_text(Recipient("psid-1"), "hi")
    assert str(unreachable.value).startswith("messenger API unreachable: ConnectError:")
    assert TOKEN not in str(unreachable.value) and "***" in str(unreachable.value)


def test_empty_text_is_not_sent(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    with pytest.raises(MessageSendError, match="empty"):
        sender.send_text(Recipient("psid-1"), "  \n ")
    assert graph_api.requests == []


def test_the_sender_reopens_after_close(sender: GraphMessageSender, graph_api: GraphApi) -> None:  # noqa: F811
    sender.send_text(Recipient("psid-1"), "one")
    sender.close()
    sender.send_text(Recipient("psid-1"), "two")
    assert [r["body"]["message"]["text"] for r in graph_api.requests] == ["one", "two"]


def test_split_text_cuts_at_boundaries() -> None:
    assert split_text("short", 10) == ["short"]
    assert split_text("  ", 10) == []
    assert split_text("aaaa bbbb cccc", 10) == ["aaaa bbbb", "cccc"]
    assert split_text("aaaa\nbbb ccc dd", 10) == ["aaaa\nbbb", "ccc dd"]
    assert split_text("one two\n\nthree four", 12) == ["one two", "three four"]
    assert split_text("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    text = "lorem ipsum dolor sit amet " * 200
    assert all(len(part) <= 100 for part in split_text(text, 100))
    assert " ".join(split_text(text, 100)).split() == text.split()
