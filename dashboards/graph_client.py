"""Where the knowledge-graph dashboard reads from: the package in this process, or the HTTP API.

:class:`GraphClient` is what :mod:`dashboards.knowledge_graph` needs; both implementations answer
with the JSON shapes of the HTTP routes:

- ``graph(...)``: ``GET /api/v1/knowledge/graph`` (``Snapshot.render``: nodes, edges, totals, ``truncated``, ``as_of``);
- ``search(text, limit)``: ``GET /api/v1/knowledge/search`` (node fields and ``score``);
- ``node(id)``: ``GET /api/v1/knowledge/nodes/{id}`` (node fields, ``facts``, ``sources``);
- ``subscribe(callback)``: each graph event of the user as a :class:`LiveEvent`, called from a
  background thread (``GET /api/v1/knowledge/graph/stream`` over HTTP, the service's listeners in
  process). ``close()`` stops it.

:class:`LocalGraphClient` wraps a :class:`~assistant.graph.service.KnowledgeGraph` and a user id.
With ``poll_secs`` it also reads the stored event log now and then, for a dashboard served apart from
the API server on the same data directory: the server's changes reach it through SQLite, and its
cached view is marked changed when they do. :class:`HttpGraphClient` is a
:class:`~dashboards.client.HttpApi` (httpx; failures as :class:`~dashboards.client.ClientError`) and reads
the SSE stream in a thread with httpx-sse (the event-stream parser by httpx's authors, rather than one
written here), resuming with ``Last-Event-ID``.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from httpx_sse import connect_sse

from assistant.clock import iso_at
from assistant.graph import retention as R
from assistant.graph.service import KnowledgeGraph
from assistant.graph.types import Edge, GraphEvent, Node
from assistant.graph.view import GraphQuery
from dashboards.client import HttpApi

log = logging.getLogger(__name__)
PREFIX = "/api/v1/knowledge"


@dataclass(frozen=True)
class LiveEvent:
    type: str  # NodeCreated, EdgeCreated, NodeDecayed, ...
    seq: int  # the SSE id
    data: dict[str, Any]


Listener = Callable[[LiveEvent], None]


class GraphClient(Protocol):
    def graph(self, *, min_retention: float | None = None, limit: int | None = None, center: str | None = None,
              depth: int = 1, as_of: float | None = None, kind: str | None = None,
              include_invalid: bool = False) -> dict[str, Any]: ...

    def search(self, text: str, limit: int = 10) -> list[dict[str, Any]]: ...

    def node(self, node_id: str) -> dict[str, Any]: ...

    def subscribe(self, callback: Listener) -> None: ...

    def close(self) -> None: ...


# --- in process ---------------------------------------------------------------------------------------


def _retention(last_seen: float, stability: float, now: float) -> float:
    return round(float(R.retention_at(now, min(last_seen, now), stability)), 4)


def node_dict(node: Node, now: float) -> dict[str, Any]:
    """A node as the routes answer it (retention now)."""
    return {"id": node.id, "name": node.name, "kind": node.kind.value, "aliases": list(node.aliases),
            "mention_count": node.mention_count, "recalls": node.recalls, "stability": round(node.stability, 4),
            "created_at": iso_at(node.created_at), "last_seen": iso_at(node.last_seen),
            "retention": _retention(node.last_seen, node.stability, now)}


def fact_dict(edge: Edge, node_id: str, names: dict[str, str], now: float) -> dict[str, Any]:
    outgoing = edge.subject_id == node_id
    other = edge.object_id if outgoing else edge.subject_id
    return {"id": edge.id, "relation": edge.relation, "direction": "out" if outgoing else "in", "other_id": other,
            "other_name": names.get(other, ""), "weight": round(edge.weight, 4),
            "retention": _retention(edge.last_seen, edge.stability, now), "valid_at": iso_at(edge.valid_at),
            "invalid_at": None if edge.invalid_at is None else iso_at(edge.invalid_at),
            "invalidated_by": edge.invalidated_by, "source_memory_ids": list(edge.source_memory_ids)}


class LocalGraphClient:
    """The graph of ``user_id`` in ``graph`` (this process)."""

    def __init__(self, graph: KnowledgeGraph, user_id: str, *, poll_secs: float | None = None,
                 sources_limit: int = 20):
        self.kg = graph
        self.user = str(user_id)
        self.poll_secs = poll_secs
        self.sources_limit = sources_limit
        self._callbacks: list[Listener] = []
        self._lock = threading.Lock()
        self._last = graph.events.last(self.user)
        self._stop = threading.Event()
        self._poller: threading.Thread | None = None
        self._hooked = False

    def graph(self, *, min_retention: float | None = None, limit: int | None = None, center: str | None = None,
              depth: int = 1, as_of: float | None = None, kind: str | None = None,
              include_invalid: bool = False) -> dict[str, Any]:
        vis = self.kg.visualization
        query = GraphQuery(vis.min_retention_threshold if min_retention is None else min_retention,
                           vis.max_nodes if limit is None else limit, center, depth, as_of, kind, include_invalid)
        return self.kg.graph(self.user, query)

    def search(self, text: str, limit: int = 10) -> list[dict[str, Any]]:
        now = self.kg.clock()
        return [node_dict(node, now) | {"score": min(1.0, round(score, 4))}
                for node, score in self.kg.search(self.user, text, limit)]

    def node(self, node_id: str) -> dict[str, Any]:
        now = self.kg.clock()
        node = self.kg.node(self.user, node_id)
        facts = self.kg.facts(self.user, node_id)
        ids = sorted({e.subject_id for e in facts} | {e.object_id for e in facts})
        names = self.kg.views.names(self.user, ids)
        missing = [i for i in ids if i not in names]
        if missing:
            names.update((r["id"], self.kg.store.node_from_row(r).name)
                         for r in self.kg.store.node_rows(self.user, missing))
        sources = self.kg.sources(self.user, node_id, self.sources_limit)
        return node_dict(node, now) | {
            "facts": [fact_dict(e, node_id, names, now) for e in facts],
            "sources": [{"id": m.id, "summary": m.summary, "created_at": m.created_at} for m in sources],
            "sources_total": max(node.mention_count, len(sources)),
            "sources_truncated": node.mention_count > len(sources),
        }

    def subscribe(self, callback: Listener) -> None:
        with self._lock:
            self._callbacks.append(callback)
            if not self._hooked:
                self.kg.events.listeners.append(self._on_event)
                self._hooked = True
            if self.poll_secs and self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="graph-dashboard-poll", daemon=True)
                self._poller.start()

    def _on_event(self, event: GraphEvent) -> None:
        if event.user_id == self.user:
            self._emit([event])

    def _emit(self, events: list[GraphEvent]) -> None:
        with self._lock:
            fresh = [e for e in events if e.seq > self._last]
            if fresh:
                self._last = max(e.seq for e in fresh)
            callbacks = list(self._callbacks)
        for event in fresh:
            for callback in callbacks:
                try:
                    callback(LiveEvent(event.type.value, event.seq, dict(event.data)))
                except Exception:
                    log.exception("graph dashboard: an event callback failed")

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_secs):
            try:
                if self.kg.events.last(self.user) > self._last:  # written by another process
                    events = self.kg.events.history(self.user, self._last)
                    self.kg.views.changed(self.user)
                    self._emit(events)
            except Exception:
                log.exception("graph dashboard: reading the event log failed")

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self._hooked:
                self.kg.events.listeners.remove(self._on_event)
                self._hooked = False
            poller, self._poller = self._poller, None
        if poller is not None:
            poller.join(timeout=5)


# --- over HTTP ----------------------------------------------------------------------------------------


class HttpGraphClient(HttpApi):
    """The graph of the API key's user on the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0, retry_secs: float = 2.0,
                 transport: httpx.BaseTransport | None = None):
        super().__init__(base_url, api_key, timeout=timeout, transport=transport)
        self.retry_secs = retry_secs
        self._transport = transport
        self._callbacks: list[Listener] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._stream: httpx.Client | None = None
        self.last_event_id = 0

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.send("GET", PREFIX + path, params=params)

    def graph(self, *, min_retention: float | None = None, limit: int | None = None, center: str | None = None,
              depth: int = 1, as_of: float | None = None, kind: str | None = None,
              include_invalid: bool = False) -> dict[str, Any]:
        params: dict[str, Any] = {"min_retention": min_retention, "limit": limit, "center": center,
                                  "depth": depth if center else None, "kind": kind,
                                  "as_of": None if as_of is None else iso_at(as_of),
                                  "include_invalid": "true" if include_invalid else None}
        return self._get("/graph", params)

    def search(self, text: str, limit: int = 10) -> list[dict[str, Any]]:
        return self._get("/search", {"q": text, "limit": limit})

    def node(self, node_id: str) -> dict[str, Any]:
        return self._get(f"/nodes/{node_id}")

    def subscribe(self, callback: Listener) -> None:
        with self._lock:
            self._callbacks.append(callback)
            if self._reader is None:
                self._reader = threading.Thread(target=self._read, name="graph-dashboard-sse", daemon=True)
                self._reader.start()

    def _read(self) -> None:
        """Follow the stream until closed; reconnect after ``retry_secs`` with ``Last-Event-ID``."""
        self._stream = httpx.Client(base_url=self.base_url, headers=self.headers, transport=self._transport,
                                    timeout=httpx.Timeout(10.0, read=60.0))  # pings every 15 s
        try:
            while not self._stop.is_set():
                try:
                    self._follow(self._stream)
                except Exception as exc:  # the server restarted, the network dropped, the client closed
                    if self._stop.is_set():
                        return
                    log.info("graph dashboard: event stream interrupted (%s); reconnecting", exc)
                self._stop.wait(self.retry_secs)
        finally:
            self._stream.close()

    def _follow(self, client: httpx.Client) -> None:
        headers = {"Last-Event-ID": str(self.last_event_id)} if self.last_event_id else {}
        with connect_sse(client, "GET", PREFIX + "/graph/stream", headers=headers) as source:
            source.response.raise_for_status()
            for sse in source.iter_sse():  # heartbeats (comments) are skipped by httpx-sse
                if self._stop.is_set():
                    return
                self._dispatch(sse.event, sse.id, sse.data)

    def _dispatch(self, kind: str, seq: str | None, data: str) -> None:
        try:
            event = LiveEvent(kind, int(seq or 0), json.loads(data))
        except ValueError:
            log.warning("graph dashboard: unreadable event %s %r", kind, data[:200])
            return
        self.last_event_id = max(self.last_event_id, event.seq)
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("graph dashboard: an event callback failed")

    def close(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None:
            stream.close()  # ends a read blocked on the stream
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.join(timeout=5)
        super().close()
