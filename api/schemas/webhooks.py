from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class WebhookAccepted(BaseModel):
    status: Literal["accepted"] = Field(description="Always `accepted`: the delivery was authenticated and read.")
    messages: int = Field(description="Text messages of mapped senders taken for processing in the background.")
    duplicates: int = Field(description="Messages whose id was already received (redeliveries); not processed again.")
    ignored: int = Field(description="New messages recorded but not processed: unmapped sender, not text, empty "
                                     "or over 32,000 characters.")


_TEXT = {"type": "object", "properties": {"body": {"type": "string"}}}
_CLOUD_MESSAGE = {
    "type": "object",
    "required": ["from"],
    "properties": {
        "from": {"type": "string", "description": "The sender's id (looked up in messenger.allowed_senders)."},
        "id": {"type": "string", "description": "The platform's message id (duplicates are processed once)."},
        "timestamp": {"type": "string"},
        "type": {"type": "string", "description": "`text` is answered; other types are recorded and ignored."},
        "text": _TEXT,
    },
}
_MESSENGER_EVENT = {
    "type": "object",
    "properties": {
        "sender": {"type": "object", "properties": {"id": {"type": "string"}}},
        "recipient": {"type": "object", "properties": {"id": {"type": "string"}}},
        "message": {"type": "object", "properties": {"mid": {"type": "string"}, "text": {"type": "string"},
                                                     "is_echo": {"type": "boolean"}}},
    },
}
PAYLOAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["object", "entry"],
    "properties": {
        "object": {"type": "string", "description": "The kind of delivery (any value; entries are read by shape)."},
        "entry": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "changes": {"type": "array", "items": {"type": "object", "properties": {
                        "field": {"type": "string"},
                        "value": {"type": "object", "properties": {
                            "metadata": {"type": "object", "properties": {"phone_number_id": {"type": "string"}}},
                            "messages": {"type": "array", "items": _CLOUD_MESSAGE},
                        }},
                    }}},
                    "messaging": {"type": "array", "items": _MESSENGER_EVENT},
                },
            },
        },
    },
}
PAYLOAD_EXAMPLE = {
    "object": "whatsapp_business_account",
    "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
        "messages": [{"from": "16505551234", "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
                      "timestamp": "1749416383", "type": "text", "text": {"body": "What's on my calendar today?"}}],
    }}]}],
}


def webhook_errors(described: dict[int, str]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the webhook's error statuses, described for the webhook (not API keys).

    Errors are the JSON envelope even on the verification GET, whose success is ``text/plain``: the
    media type is stated here, since FastAPI would document a ``model`` under the route's own."""
    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorEnvelope"}}}
    return {status: {"description": described[status], "content": envelope} for status in sorted(described)}

