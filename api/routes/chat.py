"""Chat, whole or streamed as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import asdict

from fastapi import APIRouter, Request
from sse_starlette import EventSourceResponse, ServerSentEvent

from api.deps import CurrentPrincipal, ServicesDep
from api.errors import envelope
from api.schemas.chat import ChatRequestBody, ChatResponse, Tokens, UsedMemoryOut
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.tools import ToolRun
from assistant.chat.service import ChatEvent, ChatRequest, DoneEvent, MessageEvent
from assistant.errors import AssistantError

router = APIRouter(prefix="/v1/chat", tags=["chat"])
ERRORS = error_responses(400, *AUTH_ERRORS, 404, 413, 422, 502, 503)


def _request(body: ChatRequestBody) -> ChatRequest:
    return ChatRequest(
        message=body.message,
        conversation_id=str(body.conversation_id) if body.conversation_id else None,
        system_prompt=body.system_prompt,
        model=body.model,
        temperature=body.temperature,
        max_tokens=body.max_tokens,
        mentioned_profile_ids=tuple(body.mentioned_profile_ids or ()),
        enabled_tools=None if body.enabled_tools is None else tuple(body.enabled_tools),
    )


def _tokens(event: DoneEvent) -> dict[str, int]:
    u = event.usage
    return {"prompt": u.prompt, "completion": u.completion, "total": u.total}


@router.post("", response_model=ChatResponse, responses=ERRORS, summary="Chat")
async def chat(body: ChatRequestBody, user: CurrentPrincipal, services: ServicesDep) -> ChatResponse:
    """Send a message and get the whole answer. Without `conversation_id` a new conversation is
    started; its id is in the response. Requests queue for the engine one at a time."""
    reply = await services.chat.chat(user.user_id, _request(body))
    return ChatResponse(
        id=reply.id,
        conversation_id=reply.conversation_id,
        content=reply.content,
        model=reply.model,
        tokens=Tokens(prompt=reply.usage.prompt, completion=reply.usage.completion, total=reply.usage.total),
        created_at=reply.created_at,
        tool_runs=[ToolRun(**asdict(r)) for r in reply.tool_runs],
        memories=[UsedMemoryOut(**asdict(m)) for m in reply.memories],
    )


def _sse(event: ChatEvent) -> ServerSentEvent:
    if isinstance(event, MessageEvent):
        return ServerSentEvent(data=json.dumps({"delta": event.delta}), event="message")
    return ServerSentEvent(
        data=json.dumps({
            "tokens": _tokens(event),
            "conversation_id": event.conversation_id,
            "message_id": event.message_id,
            "model": event.model,
            "tool_runs": [ToolRun(**asdict(r)).model_dump(mode="json") for r in event.tool_runs],
            "memories": [asdict(m) for m in event.memories],
        }),
        event="done",
    )


@router.post(
    "/stream",
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"}, **ERRORS},
    summary="Chat, streamed",
)
async def chat_stream(
    body: ChatRequestBody, user: CurrentPrincipal, services: ServicesDep, request: Request
) -> EventSourceResponse:
    """Server-Sent Events: `message` with data `{"delta": "..."}` repeated, then `done` with data
    `{"tokens": {prompt, completion, total}, "conversation_id", "message_id", "model", "tool_runs", "memories"}`
    (the last five are additions: ids so a client can continue the conversation, the tool calls
    made for the answer and the memories that reached its prompt, as in the non-streamed response). With tools, only the final answer is streamed; tool calls happen before
    it and are reported in `done`. Errors found before the first
    token (unknown conversation, unknown model, engine unavailable) are ordinary error responses;
    a failure after streaming began is sent as an `error` event whose data is the error envelope.
    A stream the client abandons stops generation and is not stored."""
    events = services.chat.stream(user.user_id, _request(body))
    first = await anext(events)  # errors before the first token become normal error responses
    request_id = request.state.request_id

    async def produce() -> AsyncIterator[ServerSentEvent]:
        yield _sse(first)
        try:
            async for event in events:
                yield _sse(event)
        except AssistantError as exc:
            yield ServerSentEvent(data=json.dumps(envelope(exc.code, exc.message, request_id, exc.details)), event="error")
        finally:
            await events.aclose()

    return EventSourceResponse(produce(), ping=15)
