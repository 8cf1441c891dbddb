"""What the Server-Sent Events routes of numbered events share: reading ``Last-Event-ID`` (its header
parameter) and sending the events.

A stream numbers its events 1, 2, ... (per task, per user's graph); a client that reconnects sends
the last id it received and gets what followed it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from enum import Enum
from typing import Annotated, Any, Protocol

from fastapi import Header
from sse_starlette import EventSourceResponse, ServerSentEvent

PING_SECS = 15  # a comment line this often keeps proxies from closing an idle stream

MAX_EVENT_ID = 2**53  # what a JavaScript client can hold exactly

LastEventId = Annotated[str | None, Header(description=(
    "Resume after this event id (an integer). Any other value (`null`, empty, not a number, above "
    "2^53) counts as absent: the stream starts from the first event."))]
"""``last_event_id: LastEventId = None`` on a streaming route."""


def event_id(header: str | None) -> int:
    """The event id a ``Last-Event-ID`` header names; 0 (from the start) for anything else."""
    value = (header or "").strip()
    if value.isascii() and value.isdigit() and len(value) <= 16 and int(value) <= MAX_EVENT_ID:
        return int(value)
    return 0


class NumberedEvent(Protocol):
    """An agentic task's event, a knowledge-graph event: a number, a type, a JSON-able payload."""

    @property
    def seq(self) -> int: ...

    @property
    def type(self) -> Enum: ...

    @property
    def data(self) -> dict[str, Any]: ...


def event_stream(events: AsyncIterator[NumberedEvent]) -> EventSourceResponse:
    """The events as SSE (name = the type's value, id = the number, data = JSON) with pings; the
    iterator (an async generator) is closed when the stream ends or the client goes, which ends its
    subscription."""

    async def produce() -> AsyncIterator[ServerSentEvent]:
        async with contextlib.aclosing(events):
            async for event in events:
                yield ServerSentEvent(data=json.dumps(event.data, ensure_ascii=False), event=event.type.value,
                                      id=str(event.seq))

    return EventSourceResponse(produce(), ping=PING_SECS)
