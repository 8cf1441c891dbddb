"""The precache's in-memory entries and reports (:mod:`assistant.extended.precache`), and the retrieval a
refresh makes without counting it as a recall (:func:`retrieve_untouched`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from assistant.extended.precache_predict import Prediction
from assistant.extended.precache_tools import ToolResultCache

if TYPE_CHECKING:
    from assistant.memory.store import MemoryStore


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


class _Untouched:
    """The memory store as ``retrieve_for_prompt`` sees it, with ``touch`` doing nothing: a refresh reads
    what a prompt would get without counting it as a recall (a hit touches, when memories reach a prompt)."""

    def __init__(self, store: MemoryStore):
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def touch(self, memory_ids: Any, user_id: str | None = None) -> None:
        return None


def retrieve_untouched(memory: MemoryStore, user_id: str, message: str, vector: Any) -> tuple[str, list]:
    """Exactly ``memory.retrieve_for_prompt(user_id, message, vector)``, without touching the memories."""
    return type(memory).retrieve_for_prompt(_Untouched(memory), user_id, message, vector)  # type: ignore[arg-type]


@dataclass
class CacheEntry:
    prediction: Prediction
    query_hash: str
    context: str
    used: list
    vector: np.ndarray | None
    computed_at: float
    expires_at: float
    retrieval_ms: float
    tools: tuple[tuple[str, str], ...] = ()  # (tool, canonical arguments) precached with it
    hits: int = 0
    stale: bool = False  # a memory of the user changed: recomputing (memories_written)

    def fresh(self, now: float) -> bool:
        return not self.stale and self.expires_at > now


@dataclass(frozen=True)
class RefreshReport:
    at: str
    status: str  # "ran" or "paused"
    thermal: str  # "ok", "paused" or "no sensor"
    temperature_celsius: float | None
    sensor: str | None
    predicted: int = 0
    cached: int = 0
    tool_results: int = 0
    failures: int = 0
    duration_ms: float = 0.0
    user_id: str | None = None  # None: every user (the scheduled check)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "user_id"}


@dataclass
class Tally:
    hits: int = 0
    misses: int = 0
    pending: dict[str, tuple[int, float]] = field(default_factory=dict)  # key -> (hits, saved ms) not yet written



def prediction_view(p: Prediction, entry: CacheEntry | None, tools: ToolResultCache, query_hash: str,
                    now: float) -> dict[str, Any]:
    """One predicted query of the status: the prediction, and its entry (fresh or not) and tool results."""
    calls = []
    for tool, key in (entry.tools if entry else ()):
        found = tools.entry(p.user_id, tool, key)
        calls.append({"tool": tool, "fresh_until": _iso(found.expires_at if found else None),
                      "fresh": bool(found and found.expires_at > now), "hits": found.hits if found else 0})
    return {
        "id": query_hash, "query": p.text, "probability": p.probability, "slot": p.slot.label,
        "slot_kind": p.slot.kind, "days_asked": p.days_asked, "active_days": p.active_days,
        "last_asked_at": p.last_asked.isoformat(timespec="seconds"), "cached": entry is not None,
        "fresh": bool(entry and entry.fresh(now)), "stale": bool(entry and entry.stale),
        "computed_at": _iso(entry.computed_at if entry else None),
        "fresh_until": _iso(entry.expires_at if entry else None),
        "retrieval_ms": entry.retrieval_ms if entry else None, "memories": len(entry.used) if entry else 0,
        "hits": entry.hits if entry else 0, "tools": calls}
