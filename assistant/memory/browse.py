"""The user's memories filtered by type, importance range and creation date (the filters of ``GET /v1/memories``
and ``GET /v1/memories/search``).

Newest first, like :meth:`MemoryStore.list` (which is this with no filter). ``types`` take the stored
or the request form (``Fact``, ``tool_result``); ``created_after`` is inclusive and ``created_before``
exclusive, both ISO 8601 (a date alone is its midnight UTC); importance bounds are inclusive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assistant.clock import epoch_of, iso_at
from assistant.errors import ValidationFailed
from assistant.memory.store import MemoryStore
from assistant.memory.types import Memory, MemoryType, ScoredMemory

SEARCH_POOL = 200  # hits searched before a filtered search keeps those that pass


@dataclass(frozen=True)
class MemoryFilter:
    types: tuple[MemoryType, ...] = ()
    min_importance: float | None = None
    max_importance: float | None = None
    created_after: str | None = None
    created_before: str | None = None

    @classmethod
    def of(cls, types: Sequence[str] = (), min_importance: float | None = None, max_importance: float | None = None,
           created_after: str | None = None, created_before: str | None = None) -> MemoryFilter:
        """Parsed and checked: unknown types, bad dates and an empty range are ValidationFailed (422)."""
        if min_importance is not None and max_importance is not None and min_importance > max_importance:
            raise ValidationFailed("min_importance is above max_importance",
                                   [{"field": "min_importance", "error": "must not exceed max_importance"}])
        return cls(tuple(MemoryType.parse(t) for t in types), min_importance, max_importance,
                   _moment("created_after", created_after), _moment("created_before", created_before))

    @property
    def empty(self) -> bool:
        return self == MemoryFilter()

    def admits(self, memory: Memory) -> bool:
        """Whether ``memory`` passes (the same rules as :func:`list_memories`' SQL)."""
        return ((not self.types or memory.memory_type in self.types)
                and (self.min_importance is None or memory.importance >= self.min_importance)
                and (self.max_importance is None or memory.importance <= self.max_importance)
                and (self.created_after is None or memory.created_at >= self.created_after)
                and (self.created_before is None or memory.created_at < self.created_before))


def _moment(name: str, text: str | None) -> str | None:
    if text is None or not text.strip():
        return None
    try:
        return iso_at(epoch_of(text.strip()))  # the stored form: milliseconds, Z: compares as text
    except (ValueError, OverflowError, OSError):  # not ISO 8601, or out of datetime's range once in UTC
        raise ValidationFailed(f"{name} is not an ISO 8601 date or time",
                               [{"field": name, "error": "an ISO 8601 date (2026-01-31) or time"}]) from None


def list_memories(store: MemoryStore, user_id: str, where: MemoryFilter, limit: int = 100,
                  offset: int = 0) -> list[Memory]:
    """The user's memories that pass ``where``, newest first (by created_at)."""
    clauses, args = ["user_id = ?"], [str(user_id)]
    if where.types:
        clauses.append(f"memory_type IN ({','.join('?' * len(where.types))})")
        args += [t.value for t in where.types]
    for clause, value in (("importance >= ?", where.min_importance), ("importance <= ?", where.max_importance),
                          ("created_at >= ?", where.created_after), ("created_at < ?", where.created_before)):
        if value is not None:
            clauses.append(clause)
            args.append(value)
    rows = store.db.query(f"SELECT * FROM memory_rows WHERE {' AND '.join(clauses)} "
                          "ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?", (*args, limit, offset))
    return [store._memory(r) for r in rows]


def search_memories(store: MemoryStore, user_id: str, query: str, where: MemoryFilter, limit: int = 10,
                    pool: int = SEARCH_POOL) -> list[ScoredMemory]:
    """:meth:`MemoryStore.search` (ranked by relevance) restricted to the memories ``where`` admits:
    the best ``pool`` hits are searched, those that pass are kept, the first ``limit`` returned."""
    if where.empty:
        return store.search(str(user_id), query, limit)
    found = store.search(str(user_id), query, max(limit, pool))
    return [s for s in found if where.admits(s.memory)][:limit]
