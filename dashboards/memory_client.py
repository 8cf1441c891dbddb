"""Where the memory explorer reads from: the package in this process, or the HTTP API.

:class:`MemoryClient` is what :mod:`dashboards.memory_explorer` needs; both implementations answer with
the JSON of the memory routes:

- ``search(q, limit, **filters)``: ``GET /v1/memories/search`` -> hits ranked by relevance, each with
  ``relevance``, ``similarity``, ``keyword_score``, ``freshness`` and ``relevance_parts``
  (``similarity``, ``importance``, ``freshness``: the weighted terms; ``factor``: 0.5 for an Archived
  memory; ``retrieval_similarity``), :func:`assistant.memory.scoring.relevance_parts`;
- ``memories(limit, offset, **filters)``: ``GET /v1/memories`` -> newest first;
- ``history(memory_id, days)``: ``GET /v1/memories/{id}/history`` -> ``{memory, events, decay}``
  (:mod:`assistant.memory.history`).

``filters`` are the list's and search's query parameters: ``memory_type`` (a list), ``min_importance``,
``max_importance``, ``created_after``, ``created_before`` (:class:`assistant.memory.browse.MemoryFilter`).
Failures raise :class:`~dashboards.client.ClientError` (:class:`~dashboards.client.ApiUnreachable`,
:class:`~dashboards.client.KeyRefused` over HTTP) with the message a user should read.

:class:`LocalMemoryClient` wraps a :class:`~assistant.memory.store.MemoryStore`, a user id and the dream
journal (or None); :class:`HttpMemoryClient` is :class:`~dashboards.client.HttpApi` with the key's user.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx

from assistant.errors import AssistantError
from assistant.memory.browse import MemoryFilter, list_memories, search_memories
from assistant.memory.history import memory_history
from assistant.memory.scoring import relevance_parts
from assistant.memory.store import MemoryStore
from assistant.memory.types import Memory, ScoredMemory
from dashboards.client import ClientError, HttpApi

PREFIX = "/v1/memories"
STATUS = {"NOT_FOUND": 404, "CONFLICT": 409, "VALIDATION_ERROR": 422, "BAD_REQUEST": 400,
          "SERVICE_UNAVAILABLE": 503}  # as the API maps them


class MemoryClient(Protocol):
    def search(self, q: str, limit: int = 20, **filters: Any) -> list[dict[str, Any]]: ...

    def memories(self, limit: int = 100, offset: int = 0, **filters: Any) -> list[dict[str, Any]]: ...

    def history(self, memory_id: str, days: int = 90) -> dict[str, Any]: ...

    def close(self) -> None: ...


# --- in process ---------------------------------------------------------------------------------------


def memory_json(m: Memory) -> dict[str, Any]:
    """A memory as the API answers it (``MemoryOut``)."""
    return {"id": m.id, "content": m.content, "summary": m.summary, "memory_type": m.memory_type.value,
            "importance": m.importance, "access_count": m.access_count, "tags": list(m.tags),
            "created_at": m.created_at, "updated_at": m.updated_at}


def scored_json(s: ScoredMemory, store: MemoryStore) -> dict[str, Any]:
    """A search hit as the API answers it (``ScoredMemoryOut``)."""
    return {**memory_json(s.memory), "relevance": round(s.relevance, 6), "similarity": round(s.similarity, 6),
            "keyword_score": round(s.keyword, 6), "freshness": round(s.freshness, 6),
            "relevance_parts": relevance_parts(s, store.weights).as_dict()}


def _where(filters: dict[str, Any]) -> MemoryFilter:
    types = filters.get("memory_type") or ()
    return MemoryFilter.of([types] if isinstance(types, str) else list(types), filters.get("min_importance"),
                           filters.get("max_importance"), filters.get("created_after"), filters.get("created_before"))


class LocalMemoryClient:
    """The memories of ``user_id`` in ``store`` (this process); ``journal(user, memory_id)`` gives the dream
    journal entries naming a memory (``DreamStore.memory_journal``), None when dream mode is off."""

    def __init__(self, store: MemoryStore, user_id: str,
                 journal: Callable[[str, str], Sequence[Any]] | None = None):
        self.store = store
        self.user = str(user_id)
        self.journal = journal

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AssistantError as exc:  # not found, bad filters: the message the API would answer
            raise ClientError(str(exc), STATUS.get(exc.code)) from exc

    def search(self, q: str, limit: int = 20, **filters: Any) -> list[dict[str, Any]]:
        where = self._call(_where, filters)
        found = self._call(search_memories, self.store, self.user, q, where, limit)
        return [scored_json(s, self.store) for s in found]

    def memories(self, limit: int = 100, offset: int = 0, **filters: Any) -> list[dict[str, Any]]:
        where = self._call(_where, filters)
        return [memory_json(m) for m in self._call(list_memories, self.store, self.user, where, limit, offset)]

    def history(self, memory_id: str, days: int = 90) -> dict[str, Any]:
        found = self._call(memory_history, self.store, self.user, memory_id, journal=self.journal, days=days)
        return {"memory": memory_json(found.memory), **found.as_dict()}

    def close(self) -> None:
        pass


# --- over HTTP ----------------------------------------------------------------------------------------


class HttpMemoryClient:
    """The memories of the API key's user on the server at ``base_url``."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 60.0,
                 transport: httpx.BaseTransport | None = None):
        self.api = HttpApi(base_url, api_key, timeout=timeout, transport=transport)

    def search(self, q: str, limit: int = 20, **filters: Any) -> list[dict[str, Any]]:
        return self.api.send("GET", f"{PREFIX}/search", params={"q": q, "limit": limit, **filters})

    def memories(self, limit: int = 100, offset: int = 0, **filters: Any) -> list[dict[str, Any]]:
        return self.api.send("GET", PREFIX, params={"limit": limit, "offset": offset, **filters})

    def history(self, memory_id: str, days: int = 90) -> dict[str, Any]:
        return self.api.send("GET", f"{PREFIX}/{memory_id}/history", params={"days": days})

    def close(self) -> None:
        self.api.close()
