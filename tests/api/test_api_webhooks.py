"""The messaging webhook over HTTP: verification (GET), signed deliveries (POST), the error envelopes
of every refusal, dedupe of replays, background replies to the loopback Graph API stand-in, the
rate limit, shutdown, and the OpenAPI description."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from assistant.config import Settings
from assistant.llm.base import ChatMessage, GenerationOptions, StreamEvent
from assistant.llm.scripted import ScriptedChatModel
from assistant.messaging.webhook import Status, signature_of
from assistant.services import Services
from tests.integration.tools.graph_api_server import GraphApi, graph_api  # noqa: F401

SECRET = "app-secret-1"
TOKEN = "page-token-xyz"
NUMBER = "106540352242922"
ALICE = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01"
ALICE_PHONE, STRANGER = "16505551234", "15550000000"
URL = "/v1/webhooks/messenger"
VERIFY = {"hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "1158201444"}


@pytest.fixture
def make(make_settings: Callable[..., Settings], make_services: Callable[..., Services],
         make_client: Callable[[Services], TestClient], model: ScriptedChatModel,
         graph_api: GraphApi) -> Callable[..., tuple[TestClient, Services]]:  # noqa: F811
    def build(security: dict | None = None, **values: Any) -> tuple[TestClient, Services]:
        messenger = {"enabled": True, "verify_token": "verify-me", "app_secret": SECRET, "access_token": TOKEN,
                     "api_base_url": graph_api.base_url, "allowed_senders": {ALICE_PHONE: ALICE}, **values}
        services = make_services(make_settings(messenger=messenger, security=security or {}), model)
        return make_client(services), services

    return build


@pytest.fixture
def webhook(make: Callable[..., tuple[TestClient, Services]]) -> tuple[TestClient, Services]:
    return make()


def cloud(*messages: dict, obj: str = "whatsapp_business_account") -> bytes:
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": NUMBER}, "messages": list(messages)}
    return json.dumps({"object": obj, "entry": [{"id": "1", "changes": [{"field": "messages", "value": value}]}]}).encode()


def text(sender: str, body: str, message_id: str) -> dict:
    return {"from": sender, "id": message_id, "type": "text", "text": {"body": body}}


def post(client: TestClient, body: bytes, signature: str | None = "sign", path: str = URL) -> Any:
    headers = {"Content-Type": "application/json"}
    if signature == "sign":
        signature = signature_of(SECRET, body)
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return client.post(path, content=body, headers=headers)


def settled(services: Services, message_id: str) -> Any:
    """Poll the log until the message is answered or failed (a guard deadline, not a timing assertion)."""
    deadline = time.monotonic() + 120
    while True:
        record = services.messaging.log.get(message_id)
        if record is not None and record.status in (Status.REPLIED, Status.FAILED, Status.IGNORED):
            return record
        assert time.monotonic() < deadline, f"message {message_id} was not processed"
        time.sleep(0.02)


def assert_envelope(response: Any, status: int, code: str, message: str | None = None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["request_id"] == response.headers["x-request-id"]
    if message is not None:
        assert message in error["message"], error["message"]
    return error


# --- verification --------------------------------------------------------------------------------


def test_verification_echoes_the_challenge_as_plain_text(webhook: tuple[TestClient, Services]) -> None:
    client, _ = webhook
    response = client.get(URL, params=VERIFY)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "1158201444"


@pytest.mark.parametrize(("params", "message"), [
    ({**VERIFY, "hub.verify_token": "guess"}, "hub.verify_token does not match messenger.verify_token"),
    ({**VERIFY, "hub.mode": "unsubscribe"}, "hub.mode must be 'subscribe'"),
    ({"hub.challenge": "1"}, "hub.mode must be 'subscribe' (missing)"),
    ({"hub.mode": "subscribe", "hub.challenge": "1"}, "hub.verify_token does not match"),
])
def test_a_wrong_mode_or_token_is_403(webhook: tuple[TestClient, Services], params: dict, message: str) -> None:
    client, _ = webhook
    assert_envelope(client.get(URL, params=params), 403, "FORBIDDEN", message)


def test_a_missing_challenge_is_422(webhook: tuple[TestClient, Services]) -> None:
    client, _ = webhook
    error = assert_envelope(client.get(URL, params={**VERIFY, "hub.challenge": ""}), 422, "VALIDATION_ERROR")
    assert error["details"]["fields"] == [{"field": "hub.challenge", "error": "required"}]


def test_no_verify_token_configured_is_503(make: Callable[..., tuple[TestClient, Services]]) -> None:
    client, _ = make(verify_token=None)
    assert_envelope(client.get(URL, params=VERIFY), 503, "SERVICE_UNAVAILABLE", "messenger.verify_token is not configured")


# --- disabled and platforms ----------------------------------------------------------------------


def test_a_disabled_webhook_is_503(make: Callable[..., tuple[TestClient, Services]]) -> None:
    client, services = make(enabled=False)
    assert services.messaging is None
    message = "the messaging webhook is disabled (messenger.enabled = false)"
    assert_envelope(client.get(URL, params=VERIFY), 503, "SERVICE_UNAVAILABLE", message)
    assert_envelope(post(client, cloud(text(ALICE_PHONE, "hi", "m1"))), 503, "SERVICE_UNAVAILABLE", message)


def test_another_platform_is_404(make: Callable[..., tuple[TestClient, Services]]) -> None:
    for enabled in (True, False):
        client, _ = make(enabled=enabled)
        body = cloud(text(ALICE_PHONE, "hi", "m1"))
        assert_envelope(client.get("/v1/webhooks/telegram", params=VERIFY), 404, "NOT_FOUND", "'telegram'")
        assert_envelope(post(client, body, path="/v1/webhooks/telegram"), 404, "NOT_FOUND", "messenger.platform")


def test_the_platform_segment_follows_the_setting(make: Callable[..., tuple[TestClient, Services]]) -> None:
    client, _ = make(platform="whatsapp")
    assert client.get("/v1/webhooks/whatsapp", params=VERIFY).text == "1158201444"
    assert_envelope(client.get(URL, params=VERIFY), 404, "NOT_FOUND")
    assert post(client, cloud(text(ALICE_PHONE, "hi", "m1")), path="/v1/webhooks/whatsapp").status_code == 200


# --- signatures ----------------------------------------------------------------------------------


def test_a_signed_delivery_is_accepted_without_an_api_key(webhook: tuple[TestClient, Services],
                                                          graph_api: GraphApi) -> None:  # noqa: F811
    client, services = webhook
    response = post(client, cloud(text(ALICE_PHONE, "Capital of France?", "wamid.A1")))
    assert response.status_code == 200
    assert response.json() == {"status": "accepted", "messages": 1, "duplicates": 0, "ignored": 0}
    record = settled(services, "wamid.A1")
    assert record.status is Status.REPLIED, record.detail
    (request,) = graph_api.requests
    assert request["path"] == f"/{NUMBER}/messages"
    assert request["body"]["to"] == ALICE_PHONE and request["body"]["text"] == {"body": "You said: Capital of France?"}


@pytest.mark.parametrize(("signature", "message"), [
    (None, "missing X-Hub-Signature-256 header"),
    ("sha256=" + "ab" * 32, "does not match the body"),
    ("sha256=nothex", "must be 'sha256=' followed by 64 hexadecimal digits"),
    (signature_of("another-secret", b"x"), "does not match the body"),
])
def test_a_missing_or_bad_signature_is_401_and_nothing_is_processed(
    webhook: tuple[TestClient, Services], model: ScriptedChatModel, graph_api: GraphApi,  # noqa: F811
    signature: str | None, message: str,
) -> None:
    client, services = webhook
    response = post(client, cloud(text(ALICE_PHONE, "hi", "m1")), signature)
    assert_envelope(response, 401, "UNAUTHORIZED", message)
    assert "www-authenticate" not in response.headers  # not an API-key challenge
    assert services.db.scalar("SELECT count(*) FROM webhook_messages") == 0
    assert model.calls == [] and graph_api.requests == []


def test_an_api_key_is_no_substitute_for_a_signature(webhook: tuple[TestClient, Services]) -> None:
    client, services = webhook
    key, _ = services.keys.create("k")
    response = client.post(URL, content=cloud(text(ALICE_PHONE, "hi", "m1")),
                           headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    assert_envelope(response, 401, "UNAUTHORIZED", "missing X-Hub-Signature-256")


def test_the_signature_is_checked_before_the_body_is_read(webhook: tuple[TestClient, Services]) -> None:
    client, _ = webhook
    assert_envelope(post(client, b"{not json", None), 401, "UNAUTHORIZED")
    assert_envelope(post(client, b"{not json"), 400, "BAD_REQUEST", "malformed JSON body")


def test_no_app_secret_while_signatures_are_required_is_503(make: Callable[..., tuple[TestClient, Services]]) -> None:
    client, _ = make(app_secret=None)
    body = cloud(text(ALICE_PHONE, "hi", "m1"))
    assert_envelope(post(client, body, signature_of(SECRET, body)), 503, "SERVICE_UNAVAILABLE",
                    "messenger.app_secret is not set")


def test_without_required_signatures_an_unsigned_delivery_is_accepted(
    make: Callable[..., tuple[TestClient, Services]]
) -> None:
    client, services = make(signature_required=False, app_secret=None)
    assert post(client, cloud(text(ALICE_PHONE, "hi", "u1")), None).json()["messages"] == 1
    assert settled(services, "u1").status is Status.REPLIED


# --- payloads ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "message"), [
    (b"{not json", "malformed JSON body"),
    (b"[1, 2]", "the request body must be a JSON object"),
    (b"", "malformed JSON body"),
])
def test_a_body_that_is_not_a_json_object_is_400(webhook: tuple[TestClient, Services], body: bytes,
                                                 message: str) -> None:
    client, _ = webhook
    assert_envelope(post(client, body), 400, "BAD_REQUEST", message)


def test_a_payload_of_the_wrong_shape_is_422_naming_the_fields(webhook: tuple[TestClient, Services]) -> None:
    client, services = webhook
    body = json.dumps({"object": "whatsapp_business_account", "entry": [{"changes": [{"value": {"messages": [
        {"id": "m1", "type": "text", "text": {"body": "hi"}}, {"from": "1", "id": "m2", "text": "hi"}]}}]}]}).encode()
    error = assert_envelope(post(client, body), 422, "VALIDATION_ERROR", "the webhook payload has the wrong shape")
    assert error["details"]["fields"] == [
        {"field": "entry[0].changes[0].value.messages[0].from", "error": "required (the sender's id)"},
        {"field": "entry[0].changes[0].value.messages[1].text", "error": "must be an object"},
    ]
    assert services.db.scalar("SELECT count(*) FROM webhook_messages") == 0  # nothing of it was taken


def test_a_delivery_of_another_kind_is_200_with_no_messages(webhook: tuple[TestClient, Services]) -> None:
    client, _ = webhook
    statuses = json.dumps({"object": "whatsapp_business_account", "entry": [{"changes": [
        {"field": "messages", "value": {"statuses": [{"id": "wamid.1", "status": "delivered"}]}}]}]}).encode()
    other = json.dumps({"object": "instagram", "entry": [{"id": "1", "time": 1}]}).encode()
    for body in (statuses, other):
        response = post(client, body)
        assert response.status_code == 200
        assert response.json() == {"status": "accepted", "messages": 0, "duplicates": 0, "ignored": 0}


def test_the_spec_example_shape_is_accepted(webhook: tuple[TestClient, Services], graph_api: GraphApi) -> None:  # noqa: F811
    client, services = webhook
    body = json.dumps({"object": "page", "entry": [{"changes": [{"value": {"messages": [
        {"from": ALICE_PHONE, "type": "text", "text": {"body": "hello"}}]}}]}]}).encode()
    assert post(client, body).json()["messages"] == 1
    deadline = time.monotonic() + 120
    while not graph_api.requests or services.messaging.pending:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    (request,) = graph_api.requests  # no phone_number_id: answered Messenger style
    assert request["path"] == "/me/messages" and request["body"]["recipient"] == {"id": ALICE_PHONE}


# --- dedupe, ignoring, background ----------------------------------------------------------------


def test_a_replayed_delivery_is_processed_once(webhook: tuple[TestClient, Services], model: ScriptedChatModel,
                                               graph_api: GraphApi) -> None:  # noqa: F811
    client, services = webhook
    body = cloud(text(ALICE_PHONE, "once", "wamid.R"))
    assert post(client, body).json() == {"status": "accepted", "messages": 1, "duplicates": 0, "ignored": 0}
    assert post(client, body).json() == {"status": "accepted", "messages": 0, "duplicates": 1, "ignored": 0}
    assert settled(services, "wamid.R").status is Status.REPLIED
    assert post(client, body).json()["duplicates"] == 1  # also after it was answered
    assert len(model.calls) == 1 and len(graph_api.requests) == 1


def test_unmapped_senders_and_non_text_messages_are_ignored(webhook: tuple[TestClient, Services],
                                                            model: ScriptedChatModel,
                                                            graph_api: GraphApi) -> None:  # noqa: F811
    client, services = webhook
    body = cloud(text(STRANGER, "hi", "s1"), {"from": ALICE_PHONE, "id": "s2", "type": "sticker", "sticker": {}})
    assert post(client, body).json() == {"status": "accepted", "messages": 0, "duplicates": 0, "ignored": 2}
    log = services.messaging.log
    assert log.get("s1").status is Status.IGNORED and "not mapped to a user" in log.get("s1").detail
    assert log.get("s2").status is Status.IGNORED and "'sticker'" in log.get("s2").detail
    assert model.calls == [] and graph_api.requests == []


class GatedModel(ScriptedChatModel):
    """Answers only once ``gate`` is set: the test decides when generation may finish."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        assert self.gate.wait(timeout=120), "the test never opened the gate"
        yield from super().stream(messages, options)


def test_the_answer_comes_before_the_reply(make_settings: Callable[..., Settings],
                                           make_services: Callable[..., Services],
                                           make_client: Callable[[Services], TestClient],
                                           graph_api: GraphApi) -> None:  # noqa: F811
    messenger = {"enabled": True, "app_secret": SECRET, "access_token": TOKEN, "api_base_url": graph_api.base_url,
                 "allowed_senders": {ALICE_PHONE: ALICE}}
    model = GatedModel()
    services = make_services(make_settings(messenger=messenger), model)
    client = make_client(services)
    response = post(client, cloud(text(ALICE_PHONE, "think", "slow")))
    assert response.status_code == 200 and response.json()["messages"] == 1
    assert services.messaging.log.get("slow").status in (Status.QUEUED, Status.PROCESSING)
    assert graph_api.requests == []  # the reply is still being generated
    model.gate.set()
    assert settled(services, "slow").status is Status.REPLIED
    assert graph_api.requests[0]["body"]["text"]["body"] == "You said: think"


def test_stopping_the_app_finishes_the_replies_in_flight(make_settings: Callable[..., Settings],
                                                         make_services: Callable[..., Services],
                                                         model: ScriptedChatModel,
                                                         graph_api: GraphApi) -> None:  # noqa: F811
    messenger = {"enabled": True, "app_secret": SECRET, "access_token": TOKEN, "api_base_url": graph_api.base_url,
                 "allowed_senders": {ALICE_PHONE: ALICE}}
    services = make_services(make_settings(messenger=messenger), model)
    model.enqueue("finished before shutdown", delay_secs=0.5)
    with TestClient(create_app(services)) as client:
        assert post(client, cloud(text(ALICE_PHONE, "hi", "late"))).status_code == 200
    # The app's shutdown waited for the background reply.
    assert services.messaging.pending == 0
    assert services.messaging.log.get("late").status is Status.REPLIED
    assert [r["body"]["text"]["body"] for r in graph_api.requests] == ["finished before shutdown"]


def test_the_rate_limit_applies(make: Callable[..., tuple[TestClient, Services]]) -> None:
    client, _ = make(security={"rate_limit_rpm": 2})
    assert client.get(URL, params=VERIFY).headers["x-ratelimit-limit"] == "2"
    assert post(client, cloud()).status_code == 200
    response = post(client, cloud())
    assert_envelope(response, 429, "RATE_LIMITED")
    assert int(response.headers["retry-after"]) >= 1


# --- documentation -------------------------------------------------------------------------------


def test_openapi_documents_the_webhook(webhook: tuple[TestClient, Services]) -> None:
    client, _ = webhook
    path = client.get("/api-docs/openapi.json").json()["paths"]["/v1/webhooks/{platform}"]
    get, post_ = path["get"], path["post"]
    assert "text/plain" in get["responses"]["200"]["content"]
    assert {p["name"] for p in get["parameters"]} == {"platform", "hub.mode", "hub.verify_token", "hub.challenge"}
    assert set(get["responses"]) == {"200", "403", "404", "422", "429", "503"}
    assert set(post_["responses"]) == {"200", "400", "401", "404", "413", "422", "429", "503"}
    assert "X-Hub-Signature-256" in post_["responses"]["401"]["description"]
    schema = post_["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["object", "entry"]
    assert "security" not in get and "security" not in post_  # no API key
