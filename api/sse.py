"""What every Server-Sent Events route shares: reading ``Last-Event-ID`` and its header parameter.

A stream numbers its events 1, 2, ... (per task, per user's graph); a client that reconnects sends
the last id it received and gets what followed it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Header

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
