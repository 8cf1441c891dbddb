"""The graph's event log: stored per user (sealed) so a stream can resume, pushed live to subscribers.

Events are appended inside the transaction that makes the change (:meth:`GraphEvents.append`) and
delivered to subscribers once it has committed (:meth:`GraphEvents.deliver`), so a subscriber never
sees an event of a change that was rolled back. Each user's events are numbered 1, 2, ...: the SSE
``id``; ``Last-Event-ID`` resumes after one. The oldest are trimmed beyond
``[knowledge_graph] event_retention`` per user.

Changes happen on worker threads, subscribers wait on an event loop: delivery goes through
``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from assistant.graph.store import GraphStore
from assistant.graph.types import GraphEvent, GraphEventType
from assistant.storage.db import Database


class GraphEvents:
    def __init__(self, store: GraphStore, keep: int = 10_000, clock: Callable[[], float] = time.time):
        self.store = store
        self.keep = keep
        self.clock = clock
        self._lock = threading.Lock()
        self._subscribers: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Queue[GraphEvent]]]] = {}
        self.listeners: list[Callable[[GraphEvent], None]] = []  # called for each delivered event (any user)

    def append(self, db: Database, user_id: str, kind: GraphEventType, data: dict[str, Any]) -> GraphEvent:
        """Store an event inside the caller's transaction; deliver it after the commit."""
        now = self.clock()
        seq = self.store.append_event(db, str(user_id), kind.value, data, now, self.keep)
        return GraphEvent(seq, str(user_id), kind, data, now)

    def deliver(self, events: list[GraphEvent]) -> None:
        for event in events:
            with self._lock:
                targets = list(self._subscribers.get(event.user_id, ()))
            for loop, queue in targets:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, event)
                except RuntimeError:  # the subscriber's loop has closed
                    pass
            for listener in self.listeners:
                listener(event)

    def history(self, user_id: str, after: int = 0, limit: int = 1000) -> list[GraphEvent]:
        return [GraphEvent(seq, str(user_id), GraphEventType(kind), data, ts)
                for seq, kind, data, ts in self.store.events(user_id, after, limit)]

    def last(self, user_id: str) -> int:
        return self.store.last_event(user_id)

    async def follow(self, user_id: str, after: int = 0) -> AsyncIterator[GraphEvent]:
        """Stored events after ``after``, then live ones, without end (the caller stops iterating).
        ``after`` above the last stored event counts as "from now"."""
        user = str(user_id)
        queue: asyncio.Queue[GraphEvent] = asyncio.Queue()
        entry = (asyncio.get_running_loop(), queue)
        with self._lock:  # subscribe before reading history: nothing is missed
            self._subscribers.setdefault(user, set()).add(entry)
        try:
            last = min(after, self.last(user))
            while True:
                page = await asyncio.to_thread(self.history, user, last, 500)
                for event in page:
                    yield event
                    last = event.seq
                if len(page) < 500:
                    break
            while True:
                event = await queue.get()
                if event.seq > last:
                    last = event.seq
                    yield event
        finally:
            with self._lock:
                self._subscribers.get(user, set()).discard(entry)

    def subscribers(self, user_id: str) -> int:
        with self._lock:
            return len(self._subscribers.get(str(user_id), ()))
