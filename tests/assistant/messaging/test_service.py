"""The messaging service with real parts: the service's SQLite, the real chat service with the scripted
model, and the loopback stand-in of the Graph Send API. Deliveries are answered in background tasks;
tests wait for them with ``wait_idle`` (or poll the log), never on the clock."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from assistant.chat.service import ChatReply, ChatRequest
from assistant.config import Settings
from assistant.errors import UpstreamError
from assistant.llm.scripted import ScriptedChatModel
from assistant.messaging.sender import GraphMessageSender
from assistant.messaging.service import INTERRUPTED, MAX_TEXT_CHARS, MessagingService, Receipt, create_messaging
from assistant.messaging.webhook import InboundMessage, SignatureError, Status, WebhookLog, signature_of
from assistant.services import Services
from assistant.tools.reminders import MessengerDelivery
from tests.integration.tools.graph_api_server import GraphApi, graph_api  # noqa: F401

SECRET = "app-secret-1"
TOKEN = "page-token-xyz"
NUMBER = "106540352242922"  # the business number that receives (metadata.phone_number_id)
ALICE, BOB = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01", "0b6e2d4f-9c3a-4e21-8f57-6d0a1b2c3d4e"
ALICE_PHONE, BOB_PHONE, STRANGER = "16505551234", "447700900123", "15550000000"


def messenger_settings(graph_api: GraphApi, **values: Any) -> dict[str, Any]:  # noqa: F811
    return {"enabled": True, "verify_token": "verify-me", "app_secret": SECRET, "access_token": TOKEN,
            "api_base_url": graph_api.base_url, "allowed_senders": {ALICE_PHONE: ALICE, BOB_PHONE: BOB}, **values}


@pytest.fixture
def make(make_settings: Callable[..., Settings], make_services: Callable[..., Services],
         model: ScriptedChatModel, graph_api: GraphApi) -> Callable[..., Services]:  # noqa: F811
    def build(**values: Any) -> Services:
        return make_services(make_settings(messenger=messenger_settings(graph_api, **values)), model)

    return build


@pytest.fixture
def services(make: Callable[..., Services]) -> Services:
    return make()


def cloud(*messages: dict, phone_number_id: str | None = NUMBER) -> bytes:
    value: dict = {"messaging_product": "whatsapp", "messages": list(messages)}
    if phone_number_id is not None:
        value["metadata"] = {"phone_number_id": phone_number_id}
    return json.dumps({"object": "whatsapp_business_account",
                       "entry": [{"id": "1", "changes": [{"field": "messages", "value": value}]}]}).encode()


def text(sender: str, body: str, message_id: str) -> dict:
    return {"from": sender, "id": message_id, "type": "text", "text": {"body": body}}


async def deliver(messaging: MessagingService, body: bytes) -> Receipt:
    return await messaging.receive("messenger", body, signature_of(SECRET, body))


def run(messaging: MessagingService, *bodies: bytes) -> list[Receipt]:
    """Deliver each body in turn, then wait until the background work is done."""
    async def main() -> list[Receipt]:
        receipts = [await deliver(messaging, body) for body in bodies]
        await messaging.wait_idle()
        return receipts

    return asyncio.run(main())


def test_a_text_message_is_answered_through_chat_and_replied_to_the_sender(
    services: Services, model: ScriptedChatModel, graph_api: GraphApi  # noqa: F811
) -> None:
    model.enqueue("Paris is the capital of France.")
    (receipt,) = run(services.messaging, cloud(text(ALICE_PHONE, "Capital of France?", "wamid.A1")))
    assert receipt == Receipt(messages=1, duplicates=0, ignored=0)

    (request,) = graph_api.requests
    assert request["path"] == f"/{NUMBER}/messages" and request["authorization"] == f"Bearer {TOKEN}"
    assert request["body"] == {"messaging_product": "whatsapp", "to": ALICE_PHONE, "type": "text",
                               "text": {"body": "Paris is the capital of France."}}
    record = services.messaging.log.get("wamid.A1")
    assert (record.status, record.user_id, record.reply_ids, record.detail) == (Status.REPLIED, ALICE, ("wamid.1",), None)
    stored = services.conversations.messages(record.conversation_id)
    assert [(m.role, m.content) for m in stored] == [("user", "Capital of France?"),
                                                     ("assistant", "Paris is the capital of France.")]
    assert services.conversations.get(ALICE, record.conversation_id)  # the mapped user owns it


def test_a_payload_without_a_phone_number_id_is_answered_messenger_style(
    services: Services, graph_api: GraphApi  # noqa: F811
) -> None:
    run(services.messaging, cloud(text(ALICE_PHONE, "hello", "m.1"), phone_number_id=None))
    (request,) = graph_api.requests
    assert request["path"] == "/me/messages" and request["query"] == {"access_token": [TOKEN]}
    assert request["body"] == {"recipient": {"id": ALICE_PHONE}, "messaging_type": "RESPONSE",
                               "message": {"text": "You said: hello"}}


def test_each_sender_keeps_one_conversation(services: Services, model: ScriptedChatModel,
                                            graph_api: GraphApi) -> None:  # noqa: F811
    run(services.messaging,
        cloud(text(ALICE_PHONE, "my name is Alice", "a1"), text(ALICE_PHONE, "what is my name?", "a2")),
        cloud(text(BOB_PHONE, "hi, Bob here", "b1")),
        cloud(text(ALICE_PHONE, "and again", "a3")))
    log = services.messaging.log
    alice = {log.get(i).conversation_id for i in ("a1", "a2", "a3")}
    assert len(alice) == 1 and log.get("b1").conversation_id not in alice
    assert log.conversation_for(ALICE_PHONE, ALICE) in alice
    assert [m.content for m in services.conversations.messages(alice.pop()) if m.role == "user"] == [
        "my name is Alice", "what is my name?", "and again"]
    prompts = [[m.content for m in messages if m.role != "system"] for messages, _ in model.calls]
    assert ["my name is Alice", "You said: my name is Alice", "what is my name?"] in prompts  # with its history
    assert ["hi, Bob here"] in prompts
    # One sender's messages are answered one at a time, in order; senders do not wait for each other.
    sent = [(r["body"]["to"], r["body"]["text"]["body"]) for r in graph_api.requests]
    assert [body for to, body in sent if to == ALICE_PHONE] == [
        "You said: my name is Alice", "You said: what is my name?", "You said: and again"]
    assert [body for to, body in sent if to == BOB_PHONE] == ["You said: hi, Bob here"]


def test_a_deleted_conversation_is_replaced(services: Services) -> None:
    services.messaging.log.remember_conversation(ALICE_PHONE, ALICE, "00000000-0000-4000-8000-000000000000")
    run(services.messaging, cloud(text(ALICE_PHONE, "hi", "x1")))
    record = services.messaging.log.get("x1")
    assert record.status is Status.REPLIED
    assert services.messaging.log.conversation_for(ALICE_PHONE, ALICE) == record.conversation_id
    assert record.conversation_id != "00000000-0000-4000-8000-000000000000"


def test_an_unmapped_sender_is_recorded_and_ignored(services: Services, model: ScriptedChatModel,
                                                   graph_api: GraphApi) -> None:  # noqa: F811
    (receipt,) = run(services.messaging, cloud(text(STRANGER, "let me in", "s1")))
    assert receipt == Receipt(messages=0, duplicates=0, ignored=1)
    record = services.messaging.log.get("s1")
    assert record.status is Status.IGNORED and record.user_id is None
    assert record.detail == f"sender {STRANGER} is not mapped to a user (messenger.allowed_senders)"
    assert model.calls == [] and graph_api.requests == []


@pytest.mark.parametrize(("message", "reason"), [
    ({"from": ALICE_PHONE, "id": "n1", "type": "image", "image": {"id": "img-1"}},
     "message type 'image' is not handled: only text messages are"),
    ({"from": ALICE_PHONE, "id": "n1", "type": "text", "text": {"body": "   "}}, "the text is empty"),
    ({"from": ALICE_PHONE, "id": "n1", "type": "text", "text": {"body": "x" * (MAX_TEXT_CHARS + 1)}},
     "the text is longer than 32,000 characters"),
])
def test_messages_that_are_not_usable_text_are_ignored_with_a_reason(
    services: Services, model: ScriptedChatModel, graph_api: GraphApi, message: dict, reason: str  # noqa: F811
) -> None:
    (receipt,) = run(services.messaging, cloud(message))
    assert receipt == Receipt(messages=0, duplicates=0, ignored=1)
    record = services.messaging.log.get("n1")
    assert (record.status, record.detail, record.user_id) == (Status.IGNORED, reason, ALICE)
    assert model.calls == [] and graph_api.requests == []


def test_a_replayed_delivery_is_processed_once(services: Services, model: ScriptedChatModel,
                                               graph_api: GraphApi) -> None:  # noqa: F811
    body = cloud(text(ALICE_PHONE, "once please", "r1"), text(STRANGER, "hi", "r2"))
    first, again = run(services.messaging, body, body)
    assert first == Receipt(messages=1, duplicates=0, ignored=1)
    assert again == Receipt(messages=0, duplicates=2, ignored=0)
    assert len(model.calls) == 1 and len(graph_api.requests) == 1


def test_concurrent_copies_of_a_delivery_are_processed_once(services: Services, model: ScriptedChatModel,
                                                            graph_api: GraphApi) -> None:  # noqa: F811
    body = cloud(text(ALICE_PHONE, "hello", "c1"))

    async def main() -> list[Receipt]:
        receipts = await asyncio.gather(*(deliver(services.messaging, body) for _ in range(6)))
        await services.messaging.wait_idle()
        return receipts

    receipts = asyncio.run(main())
    assert sum(r.messages for r in receipts) == 1 and sum(r.duplicates for r in receipts) == 5
    assert len(model.calls) == 1 and len(graph_api.requests) == 1
    assert services.db.scalar("SELECT count(*) FROM webhook_messages") == 1


def test_a_bad_signature_processes_and_records_nothing(services: Services, model: ScriptedChatModel) -> None:
    body = cloud(text(ALICE_PHONE, "hi", "z1"))

    async def main() -> None:
        with pytest.raises(SignatureError):
            await services.messaging.receive("messenger", body, signature_of("wrong", body))
        assert services.messaging.pending == 0

    asyncio.run(main())
    assert services.messaging.log.get("z1") is None and model.calls == []


def test_a_chat_failure_is_recorded_and_nothing_is_sent(services: Services, model: ScriptedChatModel,
                                                       graph_api: GraphApi) -> None:  # noqa: F811
    model.enqueue(error=UpstreamError("the engine answered 500"))
    run(services.messaging, cloud(text(ALICE_PHONE, "hi", "f1"), text(ALICE_PHONE, "still there?", "f2")))
    failed, recovered = services.messaging.log.get("f1"), services.messaging.log.get("f2")
    assert (failed.status, failed.detail) == (Status.FAILED, "chat failed: UPSTREAM_ERROR: the engine answered 500")
    assert recovered.status is Status.REPLIED  # the next message is answered as usual
    assert [r["body"]["text"]["body"] for r in graph_api.requests] == ["You said: still there?"]


def test_a_refused_reply_is_recorded(services: Services, graph_api: GraphApi) -> None:  # noqa: F811
    graph_api.refuse_with = 400
    run(services.messaging, cloud(text(ALICE_PHONE, "hi", "p1")))
    record = services.messaging.log.get("p1")
    assert record.status is Status.FAILED
    assert record.detail == "reply not delivered: whatsapp API answered HTTP 400: (#100) No matching user found"
    assert record.conversation_id is not None  # the exchange itself was kept
    assert TOKEN not in record.detail


def test_without_an_access_token_nothing_is_generated(make: Callable[..., Services], model: ScriptedChatModel,
                                                     graph_api: GraphApi) -> None:  # noqa: F811
    services = make(access_token=None)
    run(services.messaging, cloud(text(ALICE_PHONE, "hi", "t1")))
    record = services.messaging.log.get("t1")
    assert (record.status, record.detail) == (Status.FAILED, "cannot reply: messenger.access_token is not set")
    assert model.calls == [] and graph_api.requests == []


class ExplodingChat:
    async def chat(self, user_id: str, request: ChatRequest) -> ChatReply:
        raise RuntimeError("a bug")


def test_an_unexpected_error_is_recorded_and_does_not_escape(services: Services, caplog: pytest.LogCaptureFixture) -> None:
    log = WebhookLog(services.db, "messenger")
    messaging = MessagingService(services.settings.messenger, log, ExplodingChat(), services.messaging.sender)
    run(messaging, cloud(text(ALICE_PHONE, "a private question", "e1")))
    record = log.get("e1")
    assert (record.status, record.detail) == (Status.FAILED, "internal error: RuntimeError: a bug")
    assert "a private question" not in caplog.text  # the message text is never logged


def test_shutdown_lets_a_reply_in_flight_finish(services: Services, model: ScriptedChatModel,
                                                graph_api: GraphApi) -> None:  # noqa: F811
    model.enqueue("done thinking", delay_secs=0.3)

    async def main() -> None:
        await deliver(services.messaging, cloud(text(ALICE_PHONE, "think", "d1")))
        assert services.messaging.pending == 1
        await services.messaging.shutdown(timeout_secs=120)
        assert services.messaging.pending == 0

    asyncio.run(main())
    assert services.messaging.log.get("d1").status is Status.REPLIED
    assert [r["body"]["text"]["body"] for r in graph_api.requests] == ["done thinking"]


def test_shutdown_cancels_what_does_not_finish_in_time(services: Services, model: ScriptedChatModel,
                                                       graph_api: GraphApi) -> None:  # noqa: F811
    model.enqueue("never sent", delay_secs=600)

    async def main() -> None:
        await deliver(services.messaging, cloud(text(ALICE_PHONE, "think hard", "d2"), text(ALICE_PHONE, "and", "d3")))
        await services.messaging.shutdown(timeout_secs=0)

    asyncio.run(main())
    for message_id in ("d2", "d3"):
        record = services.messaging.log.get(message_id)
        assert (record.status, record.detail) == (Status.FAILED, INTERRUPTED)
    assert graph_api.requests == []


def test_messages_left_unfinished_by_a_crash_are_marked_at_start(services: Services) -> None:
    log = services.messaging.log
    log.claim(InboundMessage("q1", ALICE_PHONE, "text", "hi"), ALICE)
    restarted = create_messaging(services.settings.messenger, services.db, services.chat)
    assert restarted.log.get("q1").status is Status.FAILED and restarted.log.get("q1").detail == INTERRUPTED
    restarted.close()


def test_disabled_messenger_builds_no_service(make_settings: Callable[..., Settings],
                                              make_services: Callable[..., Services]) -> None:
    assert make_services(make_settings()).messaging is None


def test_reminders_deliver_through_the_same_sender(make_settings: Callable[..., Settings],
                                                   make_services: Callable[..., Services],
                                                   graph_api: GraphApi) -> None:  # noqa: F811
    services = make_services(make_settings(messenger=messenger_settings(graph_api)))
    delivery = services.tools.backends["reminders"].delivery
    assert isinstance(delivery, MessengerDelivery)
    replies = services.messaging.sender.inner  # behind the messenger's circuit breaker (assistant/guarded.py)
    assert isinstance(delivery.sender, GraphMessageSender) and isinstance(replies, GraphMessageSender)
    assert delivery.sender.base_url == replies.base_url == graph_api.base_url
