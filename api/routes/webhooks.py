"""The messaging webhook: the platform's subscription check (GET) and its deliveries (POST).

No API key: the GET is authenticated by the verify token, the POST by its ``X-Hub-Signature-256``
signature (the ``Authenticate`` middleware skips ``/v1/webhooks/``). The per-IP rate limit applies as
to other routes. The work is in :mod:`assistant.messaging`; background replies still running when the
app stops are given time to finish (this router's lifespan calls ``MessagingService.shutdown``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse

from api.deps import ServicesDep
from api.schemas.webhooks import PAYLOAD_EXAMPLE, PAYLOAD_SCHEMA, WebhookAccepted, webhook_errors
from assistant.errors import ServiceUnavailableError
from assistant.messaging.service import MessagingService
from assistant.messaging.webhook import SIGNATURE_HEADER, check_platform
from assistant.services import Services


@asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    yield
    messaging = getattr(app.state.services, "messaging", None)
    if messaging is not None:
        await messaging.shutdown()


router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"], lifespan=_lifespan)

COMMON = {
    404: "The path's platform is not `messenger.platform` (NOT_FOUND)",
    429: "Rate limited like every other route (per client IP); Retry-After header (RATE_LIMITED)",
    503: "The webhook is disabled (`messenger.enabled = false`), or the secret it needs is not configured "
         "(SERVICE_UNAVAILABLE)",
}


def messaging_for(services: Services, platform: str) -> MessagingService:
    """The webhook's service: 404 for another platform's path, 503 while disabled."""
    check_platform(services.settings.messenger, platform)
    messaging = getattr(services, "messaging", None)
    if messaging is None:
        raise ServiceUnavailableError("the messaging webhook is disabled (messenger.enabled = false)")
    return messaging


@router.get(
    "/{platform}",
    response_class=PlainTextResponse,
    summary="Verify the webhook subscription",
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}, "example": "1158201444"}},
              "description": "The `hub.challenge` value, as plain text"},
        **webhook_errors({
            403: "`hub.mode` is not `subscribe`, or `hub.verify_token` is not `messenger.verify_token` (FORBIDDEN)",
            **COMMON,
            422: "`hub.challenge` is missing (VALIDATION_ERROR)",
        }),
    },
)
def verify(
    platform: str,
    services: ServicesDep,
    mode: Annotated[str | None, Query(alias="hub.mode", description="Must be `subscribe`.")] = None,
    token: Annotated[str | None, Query(alias="hub.verify_token", description="Must equal `messenger.verify_token`.")] = None,
    challenge: Annotated[str | None, Query(alias="hub.challenge", description="Echoed back on success.")] = None,
) -> PlainTextResponse:
    """The platform's subscription check. `platform` must be the configured `messenger.platform`
    (default `messenger`). With `hub.mode=subscribe` and `hub.verify_token` equal to
    `messenger.verify_token` (compared in constant time) the answer is 200 `text/plain` whose body is
    exactly `hub.challenge`. Otherwise 403 `FORBIDDEN`. Checked in this order: platform (404), enabled
    (503), a verify token configured (503), mode and token (403), challenge present (422)."""
    text = messaging_for(services, platform).verify(platform, mode, token, challenge)
    return PlainTextResponse(text, headers={"X-Content-Type-Options": "nosniff"})


@router.post(
    "/{platform}",
    response_model=WebhookAccepted,
    summary="Receive messages",
    responses=webhook_errors({
        400: "The body is not JSON, or not a JSON object (BAD_REQUEST)",
        401: f"`{SIGNATURE_HEADER}` is missing, malformed or does not match the body while "
             "`messenger.signature_required` (UNAUTHORIZED); nothing is processed",
        **COMMON,
        413: "Body larger than server.max_body_bytes (PAYLOAD_TOO_LARGE)",
        422: "A known part of the payload has the wrong type, or a message lacks its sender; "
             "details.fields names each (VALIDATION_ERROR)",
    }),
    openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
        "schema": PAYLOAD_SCHEMA, "example": PAYLOAD_EXAMPLE}}}},
)
async def receive(platform: str, request: Request, services: ServicesDep) -> WebhookAccepted:
    """A delivery of inbound messages. Answered at once; replies are produced in the background.

    **Authentication**: when `messenger.signature_required` (the default), the
    `X-Hub-Signature-256: sha256=<hex>` header must be the HMAC-SHA256 of the raw body keyed with
    `messenger.app_secret` (compared in constant time); otherwise 401 and nothing is processed. If no
    app secret is configured while signatures are required, every delivery is refused with 503. With
    `signature_required = false` the header is not checked.

    **Payload**: JSON (read as such whatever the Content-Type header says), read by shape whatever
    `object` says. WhatsApp Cloud style (as in the example):
    `entry[].changes[].value.messages[]` with `from`, `id`, `type`, `text.body`, and the receiving
    business number in `value.metadata.phone_number_id`. Messenger style: `entry[].messaging[]` with
    `sender.id` and `message.{mid, text}`. Entries without messages (status updates, read receipts,
    echoes of our own messages) are skipped, so a delivery of another kind is 200 with `messages: 0`;
    only a body that is not a JSON object (400) or a known part of the wrong type (422) is refused.

    **Processing** (each message id once: a redelivery, even a concurrent one, counts as a duplicate
    and is not processed again; a message without an id is identified by a digest of its content):
    a text message from a sender that `messenger.allowed_senders` maps to a user goes through chat as
    that user, in one conversation kept per sender, and the reply is sent back to the sender, through
    `POST {api_base_url}/{phone_number_id}/messages` (WhatsApp style, `Authorization: Bearer
    <access_token>`) when the payload named a `phone_number_id`, else `POST
    {api_base_url}/me/messages?access_token=...` (Messenger style). Long replies are sent in parts
    (4,096 / 2,000 characters). Unmapped senders and non-text, empty or over-long messages are
    recorded as ignored, with no reply. Failures (model unavailable, the platform refusing) are
    recorded and logged, not retried; the platform has had its 200."""
    messaging = messaging_for(services, platform)
    body = await request.body()
    receipt = await messaging.receive(platform, body, request.headers.get(SIGNATURE_HEADER))
    return WebhookAccepted(status="accepted", messages=receipt.messages, duplicates=receipt.duplicates,
                           ignored=receipt.ignored)
