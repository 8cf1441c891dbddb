"""The messaging webhook end to end: a live uvicorn server with real services, signed deliveries over
HTTP, and the reply arriving at the loopback stand-in of the Graph Send API; once with the scripted
model and once with the embedded model (Qwen2.5-Coder-0.5B via llama.cpp)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from assistant.messaging.webhook import Status, signature_of
from tests.integration.support import LiveServer, serve
from tests.integration.tools.graph_api_server import GraphApi, graph_api  # noqa: F401

pytestmark = pytest.mark.integration

SECRET = "integration-app-secret"
TOKEN = "integration-page-token"
NUMBER = "106540352242922"
ALICE = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01"
ALICE_PHONE = "16505551234"


def messenger(graph_api: GraphApi) -> dict[str, Any]:  # noqa: F811
    return {"enabled": True, "verify_token": "verify-me", "app_secret": SECRET, "access_token": TOKEN,
            "api_base_url": graph_api.base_url, "allowed_senders": {ALICE_PHONE: ALICE}}


def delivery(body: str, message_id: str) -> bytes:
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": NUMBER},
             "messages": [{"from": ALICE_PHONE, "id": message_id, "timestamp": "1749416383", "type": "text",
                           "text": {"body": body}}]}
    return json.dumps({"object": "whatsapp_business_account",
                       "entry": [{"id": "1", "changes": [{"field": "messages", "value": value}]}]}).encode()


def send(client: httpx.Client, base: str, body: bytes, signature: str | None = None) -> httpx.Response:
    return client.post(f"{base}/v1/webhooks/messenger", content=body, headers={
        "Content-Type": "application/json", "X-Hub-Signature-256": signature or signature_of(SECRET, body)})


def wait_for_replies(graph_api: GraphApi, count: int, deadline_secs: float = 600) -> None:  # noqa: F811
    """Poll the stand-in until ``count`` requests arrived (a guard deadline, not a timing assertion)."""
    deadline = time.monotonic() + deadline_secs
    while len(graph_api.requests) < count:
        assert time.monotonic() < deadline, "no reply reached the Graph API stand-in"
        time.sleep(0.05)


def test_a_signed_delivery_is_answered_at_the_graph_api(tmp_path: Path, graph_api: GraphApi) -> None:  # noqa: F811
    live, _ = serve(tmp_path, inference={"backend": "scripted"}, memory={"embedding_backend": "hashing"},
                    messenger=messenger(graph_api), security={"rate_limit_enabled": False})
    with live, httpx.Client(timeout=60) as client:
        base = live.base_url
        verified = client.get(f"{base}/v1/webhooks/messenger", params={
            "hub.mode": "subscribe", "hub.verify_token": "verify-me", "hub.challenge": "987654"})
        assert verified.status_code == 200 and verified.text == "987654"

        body = delivery("Remind me what we said", "wamid.LIVE1")
        refused = send(client, base, body, signature_of("not-the-secret", body))
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "UNAUTHORIZED"

        accepted = send(client, base, body)
        assert accepted.status_code == 200, accepted.text
        assert accepted.json() == {"status": "accepted", "messages": 1, "duplicates": 0, "ignored": 0}
        assert send(client, base, body).json()["duplicates"] == 1  # the platform's retry
        wait_for_replies(graph_api, 1)

        (request,) = graph_api.requests
        assert request["path"] == f"/{NUMBER}/messages"
        assert request["authorization"] == f"Bearer {TOKEN}"
        assert request["body"] == {"messaging_product": "whatsapp", "to": ALICE_PHONE, "type": "text",
                                   "text": {"body": "You said: Remind me what we said"}}
        services = live.services
        deadline = time.monotonic() + 60
        while services.messaging.log.get("wamid.LIVE1").status is not Status.REPLIED:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        record = services.messaging.log.get("wamid.LIVE1")
        assert record.reply_ids == ("wamid.1",)
        assert [m.role for m in services.conversations.messages(record.conversation_id)] == ["user", "assistant"]


def test_the_embedded_model_answers_through_the_webhook(tmp_path: Path, graph_api: GraphApi,  # noqa: F811
                                                         default_model_path: Path) -> None:
    live: LiveServer
    live, _ = serve(tmp_path, inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0,
                                         "max_tokens": 48},
                    messenger=messenger(graph_api), security={"rate_limit_enabled": False},
                    tool_calling={"enabled": False})  # a plain question: no tool schemas in the prompt
    with live, httpx.Client(timeout=60) as client:
        body = delivery("What is the capital of France? Answer in one sentence.", "wamid.REAL1")
        assert send(client, live.base_url, body).json()["messages"] == 1
        wait_for_replies(graph_api, 1)
        (request,) = graph_api.requests
        assert request["body"]["to"] == ALICE_PHONE
        answer = request["body"]["text"]["body"]
        assert "paris" in answer.lower(), answer
