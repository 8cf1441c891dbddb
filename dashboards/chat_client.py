"""Where the chat page talks through: the package in this process, or the HTTP API.

:class:`ChatClient` is what :mod:`dashboards.chat` needs; both implementations give the events of
``POST /v1/chat/stream``:

- ``stream(message, conversation_id, max_tokens=)``: an async iterator of ``(event, data)``:
  ``("message", {"delta": "..."})`` repeated, then ``("done", {"tokens", "conversation_id",
  "message_id", "model", "tool_runs", "memories"})`` (``memories``: id, memory_type, content,
  relevance, similarity of each memory that reached the prompt, :class:`assistant.chat.service.UsedMemory`;
  ``tool_runs``: tool, status, arguments, result... of each tool call made for the answer). A failure
  before or during the stream (the stream's ``error`` event) raises :class:`~dashboards.client.ClientError`;
- ``explain_url(done)``: a link to the answer's explanation, ``/api/chat/{id}/explain``, when the API
  serves such a route (its OpenAPI document has a ``.../chat/{...}/explain`` path: read once per client,
  i.e. once per page session); None otherwise, and always in process (no HTTP route to link to).
  The id is the conversation's when the path parameter is named for a conversation, else the message's.

:class:`LocalChatClient` wraps a :class:`~assistant.chat.service.ChatService` and a user id (the stream
runs on the page's event loop; generation itself runs on the inference queue's worker thread).
:class:`HttpChatClient` reads the SSE stream with :meth:`dashboards.client.HttpApi.events` on a worker
thread, one event at a time, so the page's event loop keeps serving while tokens arrive.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any, Protocol

import httpx

from assistant.chat.service import ChatRequest, ChatService, DoneEvent, MessageEvent
from assistant.errors import AssistantError
from dashboards.client import ClientError, HttpApi

STREAM_PATH = "/v1/chat/stream"
OPENAPI_PATH = "/api-docs/openapi.json"
EXPLAIN = re.compile(r"/chat/\{(?P<param>[^}]+)\}/explain$")
STREAM_TIMEOUT = 600.0  # seconds: a long answer on a busy CPU
STATUS = {"NOT_FOUND": 404, "CONFLICT": 409, "VALIDATION_ERROR": 422, "BAD_REQUEST": 400,
          "SERVICE_UNAVAILABLE": 503, "UPSTREAM_ERROR": 502}  # as the API maps them
_END = object()


class ChatClient(Protocol):
    def stream(self, message: str, conversation_id: str | None = None, *,
               max_tokens: int | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]: ...

    def explain_url(self, done: dict[str, Any]) -> str | None: ...

    def close(self) -> None: ...


def done_json(event: DoneEvent) -> dict[str, Any]:
    """The ``done`` event's data as the API sends it."""
    u = event.usage
    return {"tokens": {"prompt": u.prompt, "completion": u.completion, "total": u.total},
            "conversation_id": event.conversation_id, "message_id": event.message_id, "model": event.model,
            "tool_runs": [json.loads(json.dumps(asdict(r), default=str)) for r in event.tool_runs],
            "memories": [asdict(m) for m in event.memories]}


def explain_template(paths: dict[str, Any]) -> tuple[str, str] | None:
    """(path, parameter) of the first ``.../chat/{id}/explain`` GET route of an OpenAPI ``paths``."""
    for path, operations in sorted(paths.items()):
        match = EXPLAIN.search(path)
        if match and "get" in (operations or {}):
            return path, match["param"]
    return None


# --- in process ---------------------------------------------------------------------------------------


class LocalChatClient:
    """Chat as ``user_id`` with ``chat`` (this process)."""

    def __init__(self, chat: ChatService, user_id: str):
        self.chat = chat
        self.user = str(user_id)

    async def stream(self, message: str, conversation_id: str | None = None, *,
                     max_tokens: int | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        request = ChatRequest(message=message, conversation_id=conversation_id, max_tokens=max_tokens)
        try:
            async for event in self.chat.stream(self.user, request):
                if isinstance(event, MessageEvent):
                    yield "message", {"delta": event.delta}
                else:
                    yield "done", done_json(event)
        except AssistantError as exc:  # an unknown conversation, the engine unavailable: as the API says it
            raise ClientError(str(exc), STATUS.get(exc.code)) from exc

    def explain_url(self, done: dict[str, Any]) -> str | None:
        return None  # no HTTP route in process

    def close(self) -> None:
        pass


# --- over HTTP ----------------------------------------------------------------------------------------


class HttpChatClient:
    """Chat as the API key's user on the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        self.api = HttpApi(base_url, api_key, timeout=timeout, transport=transport)
        self._explain: tuple[str, str] | None | bool = False  # False: not looked up yet

    async def stream(self, message: str, conversation_id: str | None = None, *,
                     max_tokens: int | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        body = {k: v for k, v in {"message": message, "conversation_id": conversation_id,
                                  "max_tokens": max_tokens}.items() if v is not None}
        events = self.api.events(STREAM_PATH, body, timeout=STREAM_TIMEOUT)
        try:
            while True:
                item = await asyncio.to_thread(next, events, _END)
                if item is _END:
                    return
                event, data = item
                if event == "error":
                    error = data.get("error", {}) if isinstance(data, dict) else {}
                    raise ClientError(str(error.get("message") or data), STATUS.get(error.get("code")))
                yield event, data if isinstance(data, dict) else {"data": data}
        finally:
            await asyncio.to_thread(events.close)

    def explain_url(self, done: dict[str, Any]) -> str | None:
        if self._explain is False:
            try:
                paths = self.api.send("GET", OPENAPI_PATH).get("paths", {})
                self._explain = explain_template(paths)
            except (ClientError, AttributeError):
                self._explain = None
        if not self._explain:
            return None
        path, param = self._explain
        ident = done.get("conversation_id") if "conversation" in param else done.get("message_id")
        return f"{self.api.base_url}{path.replace('{' + param + '}', str(ident))}" if ident else None

    def close(self) -> None:
        self.api.close()
