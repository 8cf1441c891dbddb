"""The sanitation service: runs (from the dream seam or on demand), the result records, the dynamic
defence patterns, the quality assessment, the quarantine list and restore; events and counters.

Events (:class:`SanitationEvent`, to ``subscribe``\\ d listeners: the metrics, the dream service's
event stream, notebooks): ``run_finished``, ``rolled_back``, ``config_corrected`` (one per drift
correction), ``quality_regression`` (the spec's ``QualityRegression``), ``anomaly``, ``pattern_added``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from assistant.config import SanitationSettings
from assistant.defence.types import DefencePattern, Detector, NoDefence
from assistant.defence.wrap import VerdictCache
from assistant.errors import NotFoundError
from assistant.memory import quarantine as Q
from assistant.memory.types import Memory
from assistant.sanitation.store import SanitationStore
from assistant.sanitation.types import Anomaly, QualityAssessment, SanitationResult, Step

if TYPE_CHECKING:
    from assistant.graph.service import KnowledgeGraph
    from assistant.llm.queue import InferenceQueue
    from assistant.memory.store import MemoryStore

log = logging.getLogger(__name__)

QUALITY_REGRESSION = "quality_regression"  # the spec's QualityRegression event
VERDICT_CACHE_SIZE = 200_000  # memories' verdicts kept (a few hundred bytes each)
VERDICT_CACHE_SECS = 12 * 3600.0  # a night; the next night inspects again (the model may have changed)


@dataclass(frozen=True)
class SanitationEvent:
    kind: str  # run_finished | rolled_back | config_corrected | quality_regression | anomaly | pattern_added
    user_id: str | None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class SanitationCounters:
    """The spec's sanitation metrics (counters since start; the two gauges are the latest values)."""

    memories_quarantined: int = 0
    contradictions_resolved: int = 0
    graph_orphans: int = 0
    defense_patterns_added: int = 0
    anomalies_detected: int = 0
    rollbacks: int = 0
    defense_score_x100: int = 0
    quality_score_x100: int = 0
    runs: dict[str, int] = field(default_factory=dict)  # by status

    def snapshot(self) -> dict[str, Any]:
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}


@dataclass
class SanitationDeps:
    """What a run works with (one value, passed to :mod:`assistant.sanitation.run`)."""

    store: SanitationStore
    memory: MemoryStore
    settings: SanitationSettings = field(default_factory=SanitationSettings)
    detector: Detector = field(default_factory=NoDefence)
    graph: KnowledgeGraph | None = None
    queue: InferenceQueue | None = None  # the engine judge for contradictions (None: graph evidence only)
    conversations: Any = None  # assistant.chat.conversations.ConversationStore: the quality window
    anomalies: Any = None  # assistant.sanitation.anomalies.AnomalyMonitor (None: no anomaly detection)
    bypasses: Any = None  # where defence evolution gets attack texts (red team; until then generated variants)
    clock: Callable[[], float] = time.time


class SanitationService:
    def __init__(self, deps: SanitationDeps):
        self.deps = deps
        self.store = deps.store
        self.counters = SanitationCounters()
        self.listeners: list[Callable[[SanitationEvent], None]] = []
        self._locks: dict[str, threading.Lock] = {}
        self._anomalies_seen: dict[tuple[str, str], float] = {}
        # verdicts on memories, by text and the user's patterns: a night's cycles inspect each once
        self.verdicts = VerdictCache(size=VERDICT_CACHE_SIZE, ttl_secs=VERDICT_CACHE_SECS)
        self._guard = threading.Lock()

    # --- events -----------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[SanitationEvent], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None

    def emit(self, kind: str, user_id: str | None, **data: Any) -> None:
        event = SanitationEvent(kind, user_id, data)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:  # a listener never breaks a run
                log.exception("sanitation listener failed on %s", kind)

    def new_anomalies(self, anomalies: list[Anomaly]) -> list[Anomaly]:
        """Those of ``anomalies`` not already reported within ``anomaly_window_secs``: the check is
        service-wide, so every user's run of one night sees the same spike; it counts once."""
        now, window = float(self.deps.clock()), float(self.deps.settings.anomaly_window_secs)
        with self._guard:
            fresh = [a for a in anomalies if now - self._anomalies_seen.get((a.kind, a.component), -1e18) > window]
            for a in anomalies:
                self._anomalies_seen[(a.kind, a.component)] = now
        return fresh

    # --- runs ---------------------------------------------------------------------------------------

    def user_lock(self, user_id: str) -> threading.Lock:
        """One run at a time per user (a dream cycle and an on-demand run never interleave)."""
        with self._guard:
            return self._locks.setdefault(str(user_id), threading.Lock())

    def run(self, user_id: str, *, session_id: str | None = None, cycle: int | None = None,
            trigger: str = "manual", checkpoint: Callable[[], Any] | None = None,
            fail_at: Step | None = None) -> SanitationResult:
        """One run for ``user_id`` (see :mod:`assistant.sanitation.run`): never raises for a failed
        step (the run is rolled back and its record says so); ``checkpoint`` (the dream's) is called
        between batches and may raise to stop the run (rolled back, then re-raised). ``fail_at`` is a
        rollback drill: the run fails on purpose at that step (``Step.COMMIT``: after all its writes)."""
        from assistant.sanitation.run import SanitationRun

        with self.user_lock(user_id):
            return SanitationRun(self, str(user_id), session_id=session_id, cycle=cycle, trigger=trigger,
                                 checkpoint=checkpoint, fail_at=fail_at).run()

    def bind_loop(self, loop: Any) -> None:
        """Run the contradiction judge's engine calls on ``loop`` (the server's: it owns the queue)."""
        from assistant.sanitation.contradictions import bind_loop

        bind_loop(loop)

    # --- reads ----------------------------------------------------------------------------------------

    def latest(self, user_id: str) -> SanitationResult:
        result = self.store.latest(user_id)
        if result is None:
            raise NotFoundError("no sanitation run yet for this user")
        return result

    def results(self, user_id: str, session_id: str) -> list[SanitationResult]:
        """All results of one of the user's dream sessions (404 when the session is not the user's)."""
        owner = self.deps.store.db.scalar("SELECT user_id FROM dream_sessions WHERE id = ?", (str(session_id),))
        if owner != str(user_id):
            raise NotFoundError(f"dream session {session_id} not found")
        return self.store.results(user_id, session_id)

    def patterns(self, user_id: str) -> list[DefencePattern]:
        return self.store.patterns(user_id)

    def deactivate_pattern(self, user_id: str, pattern_id: str) -> DefencePattern:
        return self.store.deactivate(user_id, pattern_id)

    def quality(self, user_id: str) -> QualityAssessment:
        """The composite score over the window since the last run, the trend and recommendations."""
        from assistant.sanitation.quality import assess

        return assess(self.deps, str(user_id), history=self.store.history(user_id))

    def quarantined(self, user_id: str, limit: int = 50, offset: int = 0) -> tuple[list[Memory], int]:
        return Q.quarantined(self.deps.memory, user_id, limit, offset)

    def restore(self, user_id: str, memory_id: str) -> Memory:
        """Restore a quarantined memory; a purged one answers 404 saying when and why it was purged."""
        gone = self.store.purged(user_id, memory_id)
        if gone is not None:
            raise NotFoundError(f"memory {memory_id} was purged at {gone['purged_at']}, "
                                f"{self.deps.settings.quarantine_ttl_days} days after its quarantine "
                                f"({gone['quarantine_reason'] or 'no reason recorded'}); it cannot be restored")
        return Q.restore(self.deps.memory, user_id, memory_id)


class DreamSanitation:
    """The dream seam (``DreamDeps.sanitation``): one run per cycle between NREM and REM. The run's
    events reach the dream's listeners too (``sanitation_<kind>``: the internal event bus on which
    config corrections and ``QualityRegression`` are published)."""

    def __init__(self, service: SanitationService):
        self.service = service

    def run(self, ctx: Any) -> None:
        session = ctx.run.session

        def forward(event: SanitationEvent) -> None:
            if event.user_id == session.user_id:
                ctx.emit(f"sanitation_{event.kind}", **event.data)

        unsubscribe = self.service.subscribe(forward)
        try:
            self.service.run(session.user_id, session_id=session.id, cycle=ctx.cycle, trigger="dream",
                             checkpoint=ctx.run.checkpoint)
        finally:
            unsubscribe()
