"""Precache prediction: the queries a user is likely to ask soon are answered ahead of time.

Every ``precache_prediction.check_interval_minutes`` (15; an APScheduler job, :meth:`Precache.schedule`)
:meth:`Precache.refresh`:

1. reads the CPU temperature (:mod:`assistant.extended.thermal`) and publishes ``ThermalUpdate``; above
   ``thermal_pause_celsius`` (65.0; strictly above) the refresh is skipped and the status says paused;
   without a sensor nothing pauses (status ``no sensor``);
2. predicts, from every user's real history (:mod:`assistant.extended.precache_predict`), the queries
   with probability >= ``min_probability`` (0.7) in the hours up to the next check, and keeps at most
   ``max_precached_queries`` (20) across users, highest first;
3. for each, precomputes what the chat would: the memory retrieval (:meth:`MemoryStore.retrieve_for_prompt`
   for the user's latest wording, without counting it as a recall) and the read-only tool calls the
   answers to that query usually made (:mod:`assistant.extended.precache_tools`; the weather, a web
   search). Entries live in memory only (they hold decrypted memories) and are fresh for one check
   interval; a memory written, removed or recalled (touched by a retrieval or a hit: its recency, so its
   relevance, moved) for the user makes theirs stale, and they are recomputed at once in the background
   (:meth:`Precache.memories_written`): a hit is exactly what the retrieval would return at that moment.

The chat asks :meth:`Precache.lookup` before retrieving: a message with the same canonical form as a
fresh entry's query, or whose embedding has cosine >= :data:`HIT_COSINE` (0.95) with it and names the same
numbers and time words, is a hit, answered with the entry's retrieval (and its memories are touched, as a
retrieval touches them). Each lookup counts as a hit or a miss; a hit publishes ``PrecacheHit`` with the
time saved (the refresh's retrieval time minus the lookup's), misses are published aggregated at each
refresh. Counters and per-query statistics go to the m026 tables at each refresh (no plaintext).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np

from assistant.errors import AssistantError
from assistant.extended.precache_entries import (
    CacheEntry,
    RefreshReport,
    Tally,
    prediction_view,
    retrieve_untouched,
)
from assistant.extended.precache_history import QueryHistory
from assistant.extended.precache_predict import (
    LOOKBACK_DAYS,
    Prediction,
    canonical,
    guard_terms,
    predict,
    rank,
)
from assistant.extended.precache_stats import Counters, PrecacheStats
from assistant.extended.precache_tools import CachedResult, ToolResultCache
from assistant.extended.thermal import SysfsThermal, ThermalReading, ThermalSensor, thermal_status
from assistant.observability.signals import SignalBus, SignalKind

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from assistant.config import Settings
    from assistant.config.extended import PrecacheSettings
    from assistant.crypto import Sealer
    from assistant.memory.store import MemoryStore
    from assistant.storage.db import Database
    from assistant.tools.catalog import Toolbox

log = logging.getLogger("assistant.precache")

PRECACHE_JOB = "precache-refresh"
FIRST_REFRESH_SECS = 60.0  # the first scheduled refresh, after start (Precache.schedule)
HIT_COSINE = 0.95
MAX_VECTORS = 20_000  # wordings whose embeddings are kept between refreshes (in memory)


def _now() -> datetime:
    return datetime.now(UTC)


class Precache:
    def __init__(self, settings: PrecacheSettings, history: QueryHistory, stats: PrecacheStats, tools: ToolResultCache,
                 thermal: ThermalSensor, *, memory: MemoryStore | None = None, toolbox: Toolbox | None = None,
                 signals: SignalBus | None = None, clock: Callable[[], datetime] = _now):
        self.settings = settings
        self.history = history
        self.stats = stats
        self.tools = tools
        self.thermal = thermal
        self.memory = memory
        self.toolbox = toolbox
        self.signals = signals
        self.clock = clock
        self.scheduler: BackgroundScheduler | None = None
        self.last_refresh: RefreshReport | None = None  # the latest check, of every user or of one
        self._reports: dict[str | None, RefreshReport] = {}  # the latest scheduled (None) and per user on demand
        self._pending_predictions: list[Prediction] = []  # the predictions of the last check, not yet written
        self._entries: dict[tuple[str, str], CacheEntry] = {}
        self._predictions: dict[str, list[Prediction]] = {}
        self._counters: dict[str, Counters] = {}
        self._tally: dict[str, Tally] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._generation: dict[str, int] = {}
        self._refills: list[threading.Thread] = []
        self._lock = threading.RLock()
        self._refreshing = threading.Lock()
        self._embedding = threading.Lock()
        self._refilling = threading.Lock()
        self._publisher = ThreadPoolExecutor(1, thread_name_prefix="precache-signals")
        tools.on_hit = self._tool_hit
        if memory is not None:
            memory.listeners.append(self)

    @property
    def ttl_secs(self) -> float:
        return self.settings.check_interval_minutes * 60.0

    def _epoch(self) -> float:
        return self.clock().timestamp()

    def _publish(self, kind: SignalKind, data: dict, *, user_id: str | None = None, value: float | None = None) -> None:
        if self.signals is not None:
            self.signals.publish(kind, data, user_id=user_id, value=value)

    def _publish_later(self, kind: SignalKind, data: dict, *, user_id: str, value: float) -> None:
        """A hit's signal, published off the chat path (the bus writes to DuckDB: ~10 ms here)."""
        if self.signals is not None:
            try:
                self._publisher.submit(self._publish, kind, data, user_id=user_id, value=value)
            except RuntimeError:  # closed: publish here
                self._publish(kind, data, user_id=user_id, value=value)

    # --- prediction --------------------------------------------------------------------------------

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embeddings of wordings, kept in memory between refreshes (history texts do not change)."""
        assert self.memory is not None
        with self._embedding:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
            if missing:
                if len(self._vectors) + len(missing) > MAX_VECTORS:
                    self._vectors.clear()
                found = np.asarray(self.memory.embedder.embed(missing), dtype=np.float32)
                self._vectors.update(zip(missing, found, strict=True))
            return np.stack([self._vectors[t] for t in texts])

    def predict(self) -> list[Prediction]:
        """Every user's predicted queries now, at most ``max_precached_queries``, highest first."""
        s = self.settings
        now = self.clock()
        local = now.astimezone(self.history.zone)
        since = now - timedelta(days=LOOKBACK_DAYS + 1)
        horizon = timedelta(minutes=s.check_interval_minutes)
        found: list[Prediction] = []
        for user in self.history.users(since):
            asked = self.history.asked(user, since, self.tools.canonical_call)
            embed = self._embed if self.memory is not None else None
            try:
                found.extend(predict(user, asked, local, horizon, s.min_probability, embed))
            except AssistantError as exc:  # the embedder is down: canonical forms alone group the queries
                log.warning("precache: grouping by wording only (%s)", exc.message)
                found.extend(predict(user, asked, local, horizon, s.min_probability, None))
        return rank(found, s.max_precached_queries)

    # --- refresh -----------------------------------------------------------------------------------

    def read_thermal(self) -> tuple[ThermalReading, str]:
        reading = self.thermal.read()
        return reading, thermal_status(reading, self.settings.thermal_pause_celsius)

    def refresh(self, user_id: str | None = None) -> RefreshReport:
        """One check: every user's predicted queries (``user_id``: only that user's among them) precomputed,
        unless the CPU is above ``thermal_pause_celsius``."""
        with self._refreshing:
            start = time.perf_counter()
            reading, state = self.read_thermal()
            threshold = self.settings.thermal_pause_celsius
            self._publish(SignalKind.THERMAL_UPDATE, {"sensor": reading.sensor, "status": state,
                                                      "threshold_celsius": threshold, "paused": state == "paused"},
                          value=reading.celsius)
            base = dict(at=self.clock().isoformat(timespec="milliseconds"), thermal=state,
                        temperature_celsius=reading.celsius, sensor=reading.sensor, user_id=user_id)
            if state == "paused":
                log.info("precache: refresh paused, CPU at %.1f °C (above %.1f °C)", reading.celsius, threshold)
                report = RefreshReport(status="paused", **base)
            else:
                report = self._refresh(user_id, base, start)
            self.last_refresh = self._reports[user_id] = report
            self._signal_misses()
            self.flush()
            return report

    def _refresh(self, user_id: str | None, base: dict, start: float) -> RefreshReport:
        predictions = self.predict()
        targets = [p for p in predictions if user_id is None or p.user_id == user_id]
        with self._lock:
            generations = dict(self._generation)  # a memory written while computing makes the entry stale
        built, failures = {}, 0
        for p in targets:
            try:
                built[(p.user_id, p.key)] = self._compute(p)
            except Exception as exc:  # one query failing leaves the others precached
                failures += 1
                log.warning("precache: a predicted query of user %s was not precomputed: %s", p.user_id, exc)
        wanted = {(p.user_id, p.key) for p in predictions}
        with self._lock:
            for key in list(self._entries):
                if key not in wanted or user_id is None or key[0] == user_id:
                    del self._entries[key]
            self._entries.update(built)
            if user_id is None:
                self._predictions = {}
            for user in {p.user_id for p in targets} | ({user_id} if user_id else set()):
                self._predictions[user] = [p for p in targets if p.user_id == user]
            tool_keys = {(u, t, k) for (u, _), e in self._entries.items() for t, k in e.tools}
            changed = {u for u, _ in built if self._generation.get(u) != generations.get(u)}
        for user in changed:
            self._invalidate(user)
        self.tools.keep(tool_keys, None if user_id is None else {user_id})
        failures += sum(len(p.tools) - len(built[(p.user_id, p.key)].tools) for p in targets
                        if (p.user_id, p.key) in built)
        self._pending_predictions = predictions if user_id is None else targets
        return RefreshReport(status="ran", predicted=len(targets), cached=len(built),
                             tool_results=sum(len(e.tools) for e in built.values()), failures=failures,
                             duration_ms=round((time.perf_counter() - start) * 1000, 3), **base)

    def _compute(self, p: Prediction) -> CacheEntry:
        """The retrieval and the tool results of one predicted query."""
        vector = p.vector
        context, used, took = "", [], 0.0
        if self.memory is not None:
            if vector is None:
                vector = self._embed([p.text])[0]
            began = time.perf_counter()
            context, used = retrieve_untouched(self.memory, p.user_id, p.text, vector)
            took = (time.perf_counter() - began) * 1000
        done = []
        if self.toolbox is not None:
            for plan in p.tools:
                try:
                    self.tools.fill(self.toolbox.context(p.user_id), plan.tool, plan.key, json.loads(plan.arguments))
                    done.append((plan.tool, plan.key))
                except Exception as exc:
                    log.warning("precache: %s was not precomputed: %s", plan.tool, exc)
        now = self._epoch()
        return CacheEntry(p, self.stats.query_hash(p.user_id, p.key), context, used, vector, now, now + self.ttl_secs,
                          round(took, 3), tuple(done))

    # --- memory changes and recalls: the user's entries are recomputed ------------------------------------------

    def memories_written(self, user_id: str, memory_ids: Any) -> None:
        self._invalidate(str(user_id))

    def memories_removed(self, user_id: str, memory_ids: Any) -> None:
        self._invalidate(str(user_id))

    def memories_recalled(self, user_id: str, memory_ids: Any) -> None:
        # A recall (a retrieval's touch, or a hit's) makes those memories more recent, which moves their
        # relevance: another retrieval may now rank differently (measured: 5% of hits differed in a burst
        # of overlapping queries when recalls were ignored). Recomputed in the background like a write.
        self._invalidate(str(user_id))

    def _invalidate(self, user_id: str) -> None:
        with self._lock:
            stale = [e for (u, _), e in self._entries.items() if u == user_id]
            if not stale:
                return
            for e in stale:
                e.stale = True
            self._generation[user_id] = generation = self._generation.get(user_id, 0) + 1
            worker = threading.Thread(target=self._refill, args=(user_id, generation), name="precache-refill",
                                      daemon=True)
            self._refills = [t for t in self._refills if t.is_alive()] + [worker]
        worker.start()

    def _refill(self, user_id: str, generation: int) -> None:
        """Recompute the user's stale retrievals (not after a paused check), one refill at a time; a refill
        overtaken by a newer change stops (the newer one does the work) and installs nothing outdated."""
        if self.last_refresh is not None and self.last_refresh.status == "paused":
            return
        with self._refilling:
            with self._lock:
                stale = [(k, e) for k, e in self._entries.items() if k[0] == user_id and e.stale]
            for key, entry in stale:
                if self._generation.get(user_id) != generation:
                    return
                try:
                    fresh = self._compute(replace(entry.prediction, tools=()))
                except Exception as exc:
                    log.warning("precache: a stale entry of user %s was not recomputed: %s", user_id, exc)
                    continue
                with self._lock:
                    if self._generation.get(user_id) == generation and self._entries.get(key) is entry:
                        self._entries[key] = replace(entry, context=fresh.context, used=fresh.used, stale=False,
                                                     retrieval_ms=fresh.retrieval_ms, computed_at=fresh.computed_at)

    def settle(self, timeout: float = 30.0) -> None:
        """Wait for the background recomputations and the hits' signals (tests and notebooks)."""
        for worker in list(self._refills):
            worker.join(timeout)
        self._publisher.submit(lambda: None).result(timeout)

    # --- lookups -----------------------------------------------------------------------------------

    def _counter(self, user_id: str) -> Counters:
        if user_id not in self._counters:
            self._counters[user_id] = self.stats.counters(user_id)
        return self._counters[user_id]

    def lookup(self, user_id: str, message: str, query_vector: Any = None) -> tuple[str, list] | None:
        """``retrieve_for_prompt(user_id, message, query_vector)`` from the precache when ``message`` is a
        fresh predicted query of the user's (module docstring); None otherwise (the caller retrieves)."""
        start = time.perf_counter()
        user, form, now = str(user_id), canonical(message), self._epoch()
        with self._lock:
            candidates = [e for (u, _), e in self._entries.items() if u == user and e.fresh(now)]
        hit = next((e for e in candidates if e.prediction.key == form), None)
        if hit is None and query_vector is not None:
            terms = guard_terms(form)
            q = np.asarray(query_vector, dtype=np.float32)
            q = q / max(float(np.linalg.norm(q)), 1e-12)
            scored = [(float(e.vector @ q) / max(float(np.linalg.norm(e.vector)), 1e-12), e) for e in candidates
                      if e.vector is not None and guard_terms(e.prediction.key) == terms]
            best = max(scored, key=lambda s: s[0], default=None)
            hit = best[1] if best is not None and best[0] >= HIT_COSINE else None
        if hit is None:
            with self._lock:
                self._counter(user).misses += 1
                self._tally.setdefault(user, Tally()).misses += 1
            return None
        if self.memory is not None and hit.used:
            self.memory.touch([m.memory.id for m in hit.used], user)  # as the retrieval would have
        took = (time.perf_counter() - start) * 1000
        saved = hit.retrieval_ms - took
        with self._lock:
            c = self._counter(user)
            c.hits, c.retrieval_ms, c.lookup_ms = c.hits + 1, c.retrieval_ms + hit.retrieval_ms, c.lookup_ms + took
            hit.hits += 1
            tally = self._tally.setdefault(user, Tally())
            tally.hits += 1
            count, total = tally.pending.get(hit.prediction.key, (0, 0.0))
            tally.pending[hit.prediction.key] = (count + 1, total + saved)
        self._publish_later(SignalKind.PRECACHE_HIT, {
            "kind": "retrieval", "hit": True, "query_hash": hit.query_hash, "probability": hit.prediction.probability,
            "slot": hit.prediction.slot.label, "retrieval_ms": hit.retrieval_ms, "lookup_ms": round(took, 3),
            "memories": len(hit.used)}, user_id=user, value=round(saved, 3))
        return hit.context, list(hit.used)

    def _tool_hit(self, user_id: str, tool: str, entry: CachedResult, took_ms: float) -> None:
        saved = entry.duration_ms - took_ms
        with self._lock:
            c = self._counter(user_id)
            c.tool_hits, c.tool_saved_ms = c.tool_hits + 1, c.tool_saved_ms + saved
        self._publish_later(SignalKind.PRECACHE_HIT, {"kind": "tool", "hit": True, "tool": tool,
                                                "tool_ms": round(entry.duration_ms, 3), "lookup_ms": round(took_ms, 3)},
                      user_id=user_id, value=round(saved, 3))

    def _signal_misses(self) -> None:
        """One aggregated ``PrecacheHit`` per user who had lookups since the last check (value: the hit rate)."""
        with self._lock:
            tallies = {u: (t.hits, t.misses) for u, t in self._tally.items() if t.hits or t.misses}
            for t in self._tally.values():
                t.hits = t.misses = 0
        for user, (hits, misses) in tallies.items():
            self._publish(SignalKind.PRECACHE_HIT, {"kind": "aggregate", "hits": hits, "misses": misses,
                                                    "lookups": hits + misses}, user_id=user,
                          value=round(hits / (hits + misses), 4))

    # --- persistence, status, schedule ---------------------------------------------------------------

    def flush(self) -> None:
        """Write the counters and the per-query statistics (m026)."""
        with self._lock:
            counters = {u: replace(c) for u, c in self._counters.items()}
            hits = {(u, k): v for u, t in self._tally.items() for k, v in t.pending.items()}
            for t in self._tally.values():
                t.pending = {}
            predictions, self._pending_predictions = self._pending_predictions, []
            took = {k: e.retrieval_ms for k, e in self._entries.items()}
        self.stats.record_predictions(predictions, took, hits)
        self.stats.save_counters(counters)

    def status(self, user_id: str) -> dict[str, Any]:
        """The caller's view: predictions and entries, counters, the last check and the temperature now."""
        user, now = str(user_id), self._epoch()
        reading, state = self.read_thermal()
        with self._lock:
            predictions = list(self._predictions.get(user, []))
            entries = {k: e for (u, k), e in self._entries.items() if u == user}
            c = replace(self._counter(user))
        listed = [prediction_view(p, entries.get(p.key), self.tools, self.stats.query_hash(user, p.key), now)
                  for p in predictions]
        job = self.scheduler.get_job(PRECACHE_JOB) if self.scheduler is not None else None
        own = [r for r in (self._reports.get(None), self._reports.get(user)) if r is not None]
        last = max(own, key=lambda r: r.at, default=None)
        return {
            "enabled": True, "paused": state == "paused", "thermal": {
                "status": state, "temperature_celsius": reading.celsius, "sensor": reading.sensor,
                "threshold_celsius": self.settings.thermal_pause_celsius},
            "settings": {"min_probability": self.settings.min_probability,
                         "check_interval_minutes": self.settings.check_interval_minutes,
                         "max_precached_queries": self.settings.max_precached_queries,
                         "thermal_pause_celsius": self.settings.thermal_pause_celsius},
            "last_refresh": last.as_dict() if last is not None else None,
            "next_refresh_at": job.next_run_time.isoformat() if job is not None and job.next_run_time else None,
            "predictions": listed, "cached": sum(1 for e in entries.values() if e.fresh(now)),
            "hits": c.hits, "misses": c.misses, "lookups": c.lookups, "hit_rate": round(c.hit_rate, 4),
            "time_saved_ms": round(c.time_saved_ms, 3), "retrieval_ms_saved": round(c.retrieval_ms, 3),
            "lookup_ms": round(c.lookup_ms, 3), "tool_hits": c.tool_hits, "tool_time_saved_ms": round(c.tool_saved_ms, 3),
            "history": [r.as_dict() for r in self.stats.history(user)],
        }

    def _scheduled(self) -> None:
        try:
            self.refresh()
        except Exception:  # the next check tries again
            log.exception("precache: the scheduled refresh failed")

    def schedule(self, scheduler: BackgroundScheduler) -> None:
        """Refresh every ``check_interval_minutes`` on ``scheduler``, the first one :data:`FIRST_REFRESH_SECS`
        after start: a starting server's CPU goes to loading the model and answering its first requests
        (a refresh at start, loading MiniLM beside them, delayed answers on a busy 2-core machine by seconds)."""
        from apscheduler.triggers.interval import IntervalTrigger

        self.scheduler = scheduler
        scheduler.add_job(self._scheduled, IntervalTrigger(minutes=self.settings.check_interval_minutes),
                          id=PRECACHE_JOB, next_run_time=datetime.now(UTC) + timedelta(seconds=FIRST_REFRESH_SECS),
                          coalesce=True, max_instances=1,
                          misfire_grace_time=int(self.ttl_secs))

    def close(self) -> None:
        """Wait for the background work and write the statistics; a second call does nothing (Services.close
        may run twice: a test's and its fixture's)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.settle(5.0)
        self._publisher.shutdown(wait=True)
        try:
            self.flush()
        except Exception:
            log.exception("precache: the statistics were not written at close")


def build_precache(settings: Settings, db: Database, sealer: Sealer, memory: MemoryStore | None,
                   toolbox: Toolbox | None, signals: SignalBus | None, *, thermal: ThermalSensor | None = None,
                   clock: Callable[[], datetime] = _now) -> Precache | None:
    """The precache of ``settings.precache_prediction`` (None while disabled). Its tool cache is installed on
    ``toolbox.registry`` (the cacheable tools answer from it while fresh). Slots are in
    ``tool_calling.timezone``, the zone of "now" in the prompt."""
    section = settings.precache_prediction
    if not section.enabled:
        return None
    tools = ToolResultCache(section.check_interval_minutes * 60.0, clock=lambda: clock().timestamp())
    if toolbox is not None:
        toolbox.registry = tools.wrap(toolbox.registry)
    history = QueryHistory(db, sealer, ZoneInfo(settings.tool_calling.timezone), tools.tools)
    return Precache(section, history, PrecacheStats(db, sealer), tools, thermal or SysfsThermal(), memory=memory,
                    toolbox=toolbox, signals=signals, clock=clock)
