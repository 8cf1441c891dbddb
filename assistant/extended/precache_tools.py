"""Precached results of read-only tools, answered in place of the call while fresh.

Only tools that read public information and change nothing are cached (:data:`CACHEABLE_TOOLS`):
``get_weather`` and ``search_web``. ``search_transit`` is not: its departure defaults to now, so its
answer changes by the minute. Nothing of a user's own data (mail, calendar, contacts, memories) is
cached here.

A result is keyed by (user, tool, canonical arguments): the arguments validated by the tool's own
schema (defaults filled in), strings with runs of spaces made one and case-folded, as sorted JSON;
``"Berlin"`` and ``" berlin "`` are one key. The refresh (:class:`~assistant.extended.precache.Precache`)
puts results in; :meth:`ToolResultCache.wrap` gives a registry whose cacheable tools answer from a
fresh entry (age < the TTL, ``precache_prediction.check_interval_minutes``) and otherwise call the tool
as before. Calls the chat makes are not cached by the wrapper: only predicted ones are. Entries live in
memory only.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from assistant.tools.base import Tool, ToolContext, ToolError, ToolRegistry

CACHEABLE_TOOLS = frozenset({"get_weather", "search_web"})


def _fold(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    if isinstance(value, list | tuple):
        return [_fold(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _fold(v) for k, v in value.items()}
    return value


def canonical_arguments(values: Mapping[str, Any]) -> str:
    return json.dumps(_fold(dict(values)), sort_keys=True, default=str, ensure_ascii=False)


@dataclass
class CachedResult:
    value: Any
    stored_at: float
    expires_at: float
    duration_ms: float  # how long the real call took (what a hit saves)
    hits: int = 0


# Told of each hit: (user id, tool name, entry, lookup milliseconds).
HitListener = Callable[[str, str, CachedResult, float], None]


class ToolResultCache:
    def __init__(self, ttl_secs: float, clock: Callable[[], float] = time.time,
                 tools: frozenset[str] = CACHEABLE_TOOLS):
        self.ttl_secs = ttl_secs
        self.clock = clock
        self.tools = tools
        self.on_hit: HitListener | None = None
        self._inner: dict[str, Tool] = {}
        self._entries: dict[tuple[str, str, str], CachedResult] = {}
        self._lock = threading.Lock()

    # --- keys ------------------------------------------------------------------------------------

    def canonical_call(self, tool_name: str, arguments: dict) -> str | None:
        """The cache key of a call, or None when the tool is not cacheable here or the arguments are invalid."""
        tool = self._inner.get(tool_name)
        if tool is None:
            return None
        try:
            parsed = tool.validate(arguments)
        except ToolError:
            return None
        return canonical_arguments({name: getattr(parsed, name) for name in type(parsed).model_fields})

    # --- the registry ----------------------------------------------------------------------------

    def wrap(self, registry: ToolRegistry) -> ToolRegistry:
        """The same tools; the cacheable ones answer from a fresh entry."""
        tools = []
        for t in registry.tools():
            if t.name in self.tools:
                self._inner[t.name] = t
                t = replace(t, func=self._cached(t))
            tools.append(t)
        return ToolRegistry(tools)

    def _cached(self, tool: Tool) -> Callable[..., Any]:
        func = tool.func

        def cached(ctx: ToolContext, **arguments: Any) -> Any:
            start = time.perf_counter()
            user = str(ctx.user_id)
            found = self.fresh(user, tool.name, canonical_arguments(arguments))
            if found is None:
                return func(ctx, **arguments)
            value = copy.deepcopy(found.value)
            if self.on_hit is not None:
                self.on_hit(user, tool.name, found, (time.perf_counter() - start) * 1000)
            return value

        cached.__wrapped__ = func  # type: ignore[attr-defined]
        cached.__doc__ = func.__doc__
        return cached

    # --- entries ---------------------------------------------------------------------------------

    def fresh(self, user_id: str, tool_name: str, key: str) -> CachedResult | None:
        with self._lock:
            found = self._entries.get((user_id, tool_name, key))
            if found is None or found.expires_at <= self.clock():
                return None
            found.hits += 1
            return found

    def fill(self, ctx: ToolContext, tool_name: str, key: str, arguments: dict) -> CachedResult:
        """Run the real tool (``arguments`` as a call sent them) and keep its result under ``key``;
        a tool error propagates and nothing is kept."""
        tool = self._inner[tool_name]
        start = time.perf_counter()
        value = tool(ctx, arguments)
        took = (time.perf_counter() - start) * 1000
        now = self.clock()
        entry = CachedResult(value, now, now + self.ttl_secs, took)
        with self._lock:
            self._entries[(str(ctx.user_id), tool_name, key)] = entry
        return entry

    def entry(self, user_id: str, tool_name: str, key: str) -> CachedResult | None:
        with self._lock:
            return self._entries.get((user_id, tool_name, key))

    def keep(self, wanted: set[tuple[str, str, str]], users: set[str] | None = None) -> None:
        """Drop every entry not in ``wanted`` (only of ``users``, when given) and every expired one."""
        now = self.clock()
        with self._lock:
            for key in list(self._entries):
                stale = self._entries[key].expires_at <= now
                if stale or (key not in wanted and (users is None or key[0] in users)):
                    del self._entries[key]

    def __len__(self) -> int:
        return len(self._entries)
