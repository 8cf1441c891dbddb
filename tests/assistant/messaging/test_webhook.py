"""The webhook's checks (platform, verification token, signature), payload parsing, and the log of
message ids (insert-or-ignore dedupe, also under concurrent claims), on a real SQLite file."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from assistant.clock import utcnow
from assistant.config import MessengerSettings
from assistant.errors import (
    BadRequestError,
    ForbiddenError,
    NotFoundError,
    ServiceUnavailableError,
    ValidationFailed,
)
from assistant.messaging.sender import Recipient
from assistant.messaging.webhook import (
    InboundMessage,
    SignatureError,
    Status,
    WebhookLog,
    check_platform,
    check_signature,
    parse_delivery,
    signature_of,
    verify_subscription,
)
from assistant.storage.db import Database

SECRET = "app-secret-1"


def settings(**values: object) -> MessengerSettings:
    base: dict[str, object] = {"enabled": True, "verify_token": "verify-me", "app_secret": SECRET}
    return MessengerSettings(**{**base, **values})


def cloud(*messages: dict, phone_number_id: str | None = "106540352242922", obj: str = "whatsapp_business_account") -> bytes:
    value: dict = {"messaging_product": "whatsapp", "messages": list(messages)}
    if phone_number_id is not None:
        value["metadata"] = {"display_phone_number": "15550783881", "phone_number_id": phone_number_id}
    return json.dumps({"object": obj, "entry": [{"id": "1", "changes": [{"field": "messages", "value": value}]}]}).encode()


def text(sender: str, body: str, message_id: str | None = "wamid.1") -> dict:
    found = {"from": sender, "type": "text", "text": {"body": body}, "timestamp": "1749416383"}
    if message_id is not None:
        found["id"] = message_id
    return found


# --- platform and verification -------------------------------------------------------------------


def test_the_platform_is_the_configured_one() -> None:
    check_platform(settings(), "messenger")
    check_platform(settings(platform="whatsapp"), "whatsapp")
    with pytest.raises(NotFoundError, match="'telegram'"):
        check_platform(settings(), "telegram")
    with pytest.raises(NotFoundError):
        check_platform(settings(platform="whatsapp"), "messenger")


def test_verification_echoes_the_challenge() -> None:
    assert verify_subscription(settings(), "subscribe", "verify-me", "1158201444") == "1158201444"


@pytest.mark.parametrize(("mode", "token", "message"), [
    ("subscribe", "wrong", "hub.verify_token does not match"),
    ("subscribe", None, "hub.verify_token does not match"),
    ("subscribe", "", "hub.verify_token does not match"),
    ("unsubscribe", "verify-me", "hub.mode must be 'subscribe' ('unsubscribe')"),
    (None, "verify-me", "hub.mode must be 'subscribe' (missing)"),
])
def test_a_wrong_mode_or_token_is_forbidden(mode: str | None, token: str | None, message: str) -> None:
    with pytest.raises(ForbiddenError, match=message.replace("(", r"\(").replace(")", r"\)")):
        verify_subscription(settings(), mode, token, "42")


def test_verification_needs_a_challenge_and_a_configured_token() -> None:
    with pytest.raises(ValidationFailed) as missing:
        verify_subscription(settings(), "subscribe", "verify-me", None)
    assert missing.value.details["fields"] == [{"field": "hub.challenge", "error": "required"}]
    with pytest.raises(ServiceUnavailableError, match="messenger.verify_token is not configured"):
        verify_subscription(settings(verify_token=None), "subscribe", "anything", "42")


# --- signatures ----------------------------------------------------------------------------------


def test_a_valid_signature_passes() -> None:
    body = cloud(text("16505551234", "hi"))
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert signature_of(SECRET, body) == expected
    check_signature(settings(), body, expected)
    check_signature(settings(), body, expected.upper().replace("SHA256=", "sha256="))  # hex case is free


@pytest.mark.parametrize(("header", "message"), [
    (None, "missing X-Hub-Signature-256"),
    ("  ", "missing X-Hub-Signature-256"),
    ("sha1=" + "0" * 40, "must be 'sha256=' followed by 64 hexadecimal digits"),
    ("sha256=abc", "must be 'sha256=' followed by 64 hexadecimal digits"),
    ("sha256=" + "0" * 64, "does not match the body"),
])
def test_a_missing_malformed_or_wrong_signature_is_refused(header: str | None, message: str) -> None:
    with pytest.raises(SignatureError, match=message) as refused:
        check_signature(settings(), cloud(text("1", "hi")), header)
    assert refused.value.code == "UNAUTHORIZED"


def test_a_signature_of_another_body_or_secret_is_refused() -> None:
    body = cloud(text("1", "hi"))
    with pytest.raises(SignatureError):
        check_signature(settings(), body, signature_of(SECRET, body + b" "))
    with pytest.raises(SignatureError):
        check_signature(settings(), body, signature_of("other-secret", body))


def test_no_app_secret_while_required_refuses_everything() -> None:
    body = cloud(text("1", "hi"))
    with pytest.raises(ServiceUnavailableError, match="messenger.app_secret is not set"):
        check_signature(settings(app_secret=None), body, signature_of(SECRET, body))


def test_signatures_are_not_checked_when_not_required() -> None:
    check_signature(settings(signature_required=False, app_secret=None), b"{}", None)
    check_signature(settings(signature_required=False), b"{}", "sha256=" + "0" * 64)


# --- parsing -------------------------------------------------------------------------------------


def test_cloud_messages_are_read_with_their_receiving_number() -> None:
    delivery = parse_delivery(cloud(text("16505551234", "What's up?"), {"from": "16505551234", "id": "wamid.2",
                                                                          "type": "image", "image": {"id": "9"}}))
    assert delivery.object == "whatsapp_business_account"
    first, second = delivery.messages
    assert first == InboundMessage("wamid.1", "16505551234", "text", "What's up?", "106540352242922")
    assert first.recipient == Recipient("16505551234", "106540352242922")
    assert (second.message_id, second.type, second.text) == ("wamid.2", "image", None)


def test_the_spec_shape_without_metadata_or_ids_is_read() -> None:
    body = json.dumps({"object": "page", "entry": [{"changes": [{"value": {"messages": [
        {"from": 4567, "type": "text", "text": {"body": "hello"}}]}}]}]}).encode()
    (message,) = parse_delivery(body).messages
    assert message.sender_id == "4567" and message.text == "hello" and message.phone_number_id is None
    assert message.recipient == Recipient("4567")
    assert message.message_id.startswith("sha256:")
    assert parse_delivery(body).messages[0].message_id == message.message_id  # the same content, the same id


def test_messenger_events_are_read_and_receipts_and_echoes_skipped() -> None:
    body = json.dumps({"object": "page", "entry": [{"id": "p1", "time": 1, "messaging": [
        {"sender": {"id": "psid-1"}, "recipient": {"id": "p1"}, "message": {"mid": "m.1", "text": "hi"}},
        {"sender": {"id": "psid-1"}, "recipient": {"id": "p1"}, "delivery": {"mids": ["m.0"]}},
        {"sender": {"id": "p1"}, "recipient": {"id": "psid-1"}, "message": {"mid": "m.2", "text": "x", "is_echo": True}},
        {"sender": {"id": "psid-2"}, "message": {"mid": "m.3", "attachments": [{"type": "audio"}]}},
    ]}]}).encode()
    first, second = parse_delivery(body).messages
    assert first == InboundMessage("m.1", "psid-1", "text", "hi", None)
    assert (second.message_id, second.sender_id, second.type) == ("m.3", "psid-2", "audio")


def test_a_delivery_without_messages_is_empty() -> None:
    statuses = json.dumps({"object": "whatsapp_business_account", "entry": [{"changes": [{"field": "messages",
                          "value": {"statuses": [{"id": "wamid.1", "status": "read"}]}}]}]}).encode()
    assert parse_delivery(statuses).messages == ()
    assert parse_delivery(b'{"object": "user", "entry": [{"id": "1", "time": 2, "changed_fields": ["email"]}]}').messages == ()
    assert parse_delivery(b'{"object": "anything", "entry": []}').messages == ()


@pytest.mark.parametrize("body", [b"", b"{not json", b"\xff\xfe", b"[1, 2]", b'"text"', b"null"])
def test_a_body_that_is_not_a_json_object_is_a_bad_request(body: bytes) -> None:
    with pytest.raises(BadRequestError):
        parse_delivery(body)


@pytest.mark.parametrize(("payload", "fields"), [
    ({}, [("object", "required"), ("entry", "required")]),
    ({"object": 5, "entry": {}}, [("object", "must be a string"), ("entry", "must be an array")]),
    ({"object": "x", "entry": [3]}, [("entry[0]", "must be an object")]),
    ({"object": "x", "entry": [{"changes": {}}]}, [("entry[0].changes", "must be an array")]),
    ({"object": "x", "entry": [{"changes": [{"value": []}]}]}, [("entry[0].changes[0].value", "must be an object")]),
    ({"object": "x", "entry": [{"changes": [{"value": {"messages": [{"type": "text", "text": {"body": "hi"}}]}}]}]},
     [("entry[0].changes[0].value.messages[0].from", "required (the sender's id)")]),
    ({"object": "x", "entry": [{"changes": [{"value": {"messages": [{"from": "1", "type": "text"}]}}]}]},
     [("entry[0].changes[0].value.messages[0].text.body", "required for a text message")]),
    ({"object": "x", "entry": [{"changes": [{"value": {"messages": [{"from": "1", "text": {"body": 7}}]}}]}]},
     [("entry[0].changes[0].value.messages[0].text.body", "must be a string")]),
    ({"object": "x", "entry": [{"changes": [{"value": {"messages": [{"from": True, "id": 5, "type": "text",
                                                                    "text": {"body": "x"}}]}}]}]},
     [("entry[0].changes[0].value.messages[0].from", "must be a string or a number"),
      ("entry[0].changes[0].value.messages[0].id", "must be a string")]),
    ({"object": "page", "entry": [{"messaging": [{"message": {"text": "hi"}}]}]},
     [("entry[0].messaging[0].sender", "required")]),
])
def test_a_payload_of_the_wrong_shape_names_each_field(payload: dict, fields: list[tuple[str, str]]) -> None:
    with pytest.raises(ValidationFailed) as invalid:
        parse_delivery(json.dumps(payload).encode())
    assert [(f["field"], f["error"]) for f in invalid.value.details["fields"]] == fields
    assert invalid.value.message.startswith("the webhook payload has the wrong shape: ")


# --- the log -------------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "assistant.db")
    yield database
    database.close()


ALICE = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01"


def test_a_message_id_is_claimed_once(db: Database) -> None:
    log = WebhookLog(db, "messenger")
    message = InboundMessage("wamid.1", "1650", "text", "hi", "1065")
    assert log.claim(message, ALICE) is True
    assert log.claim(message, ALICE) is False
    assert WebhookLog(db, "other").claim(message, ALICE) is True  # ids are per platform
    record = log.get("wamid.1")
    assert (record.status, record.sender_id, record.user_id, record.message_type) == (Status.QUEUED, "1650", ALICE, "text")
    assert db.scalar("SELECT count(*) FROM webhook_messages") == 2


def test_concurrent_claims_of_one_id_let_exactly_one_through(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Database(path).close()
    connections = [Database(path) for _ in range(4)]  # separate connections, as separate processes would have
    message = InboundMessage("wamid.race", "1650", "text", "hi")
    barrier = threading.Barrier(len(connections) * 2)
    results: list[bool] = []

    def claim(db: Database) -> None:
        barrier.wait()
        results.append(WebhookLog(db, "messenger").claim(message, ALICE))

    threads = [threading.Thread(target=claim, args=(db,)) for db in connections for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(results) == [False] * 7 + [True]
    finally:
        for db in connections:
            db.close()


def test_outcomes_conversations_interruptions_and_pruning(db: Database) -> None:
    log = WebhookLog(db, "messenger")
    for i in range(3):
        log.claim(InboundMessage(f"m{i}", "1650", "text", "hi"), ALICE)
    log.update("m0", Status.REPLIED, conversation_id="c1", reply_ids=("wamid.9", "wamid.10"))
    log.update("m1", Status.PROCESSING)
    done = log.get("m0")
    assert (done.status, done.conversation_id, done.reply_ids, done.detail) == (Status.REPLIED, "c1", ("wamid.9", "wamid.10"), None)
    assert log.interrupt_unfinished("the server stopped") == 2
    assert [(r.message_id, r.status) for r in log.list()] == [("m2", Status.FAILED), ("m1", Status.FAILED),
                                                               ("m0", Status.REPLIED)]
    assert log.get("m1").detail == "the server stopped"
    assert [r.message_id for r in log.list(status=Status.REPLIED)] == ["m0"]

    assert log.conversation_for("1650", ALICE) is None
    log.remember_conversation("1650", ALICE, "c1")
    log.remember_conversation("1650", ALICE, "c2")
    assert log.conversation_for("1650", ALICE) == "c2"
    assert log.conversation_for("1650", "another-user") is None

    assert log.prune(utcnow() - timedelta(days=1)) == 0
    assert log.prune(utcnow() + timedelta(seconds=1)) == 3
    assert log.get("m0") is None
