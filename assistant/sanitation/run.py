"""One sanitation run for one user: plan (read only), then apply everything in ONE transaction.

**Plan** (no transaction, engine calls allowed): config drift (the run goes on with the clamped
values), expired quarantined memories, memory hygiene in batches of ``memory_batch_size`` with the
dream's ``checkpoint()`` between batches (it may block while the dream is paused, or raise to stop:
nothing has been written then, and the exception goes on to the dream), contradictions (graph, then
the engine judge), graph integrity, defence evolution (``plan_patterns``), the quality assessment,
anomalies.

**Apply** inside ``with db.transaction()``: purge (with tombstones), quarantine (without telling
listeners), graph fixes (the graph's own writes nest as a savepoint), new defence patterns, and the
result record. Only after the commit does anything outside SQLite change: purged rows leave the
vector index, the graph's views reload and its events are delivered, the other memory listeners
hear of the removals, the live settings are corrected, events are emitted and counters move.

**Why this is the snapshot.** SQLite's transaction is the snapshot the issue asks for: every write
of the run is between its BEGIN and COMMIT, on the one writer connection whose lock the run's thread
holds for the whole apply phase (no other writer interleaves), and nothing outside the database is
touched before COMMIT. A failure at any step raises out of the ``with``, SQLite rolls the journal
back, and every table is as it was before the run, byte for byte
(tests/assistant/sanitation/test_sanitation_rollback.py checks a checksum of every table after a
failure injected at each :class:`Step`). What does change after a failure: the caches that may
have read uncommitted rows are dropped (graph views, the pattern cache), ``rollbacks`` counts one,
and a record with ``status = "rolled_back"``, the failed step and the error is written in a
transaction of its own — ``sanitation_results`` is the one table a failed run appends to (the
audit trail of the failure). A run never raises, except the dream's stop from ``checkpoint``.

**The record** (:class:`SanitationResult`): ``counts`` — ``ok``, ``stale``, ``poisoned``,
``contradicted`` (verdicts of the memories judged), ``judged`` (memories looked at), ``quarantined``
(set aside: a memory changed or deleted since it was judged is left alone), ``purged``,
``judge_calls`` (pairs put to the engine); ``quarantined`` — each one's :class:`Judgement` (verdict,
the reason a user reads, what decided, the winner of a contradiction); ``purged`` — ids;
``graph`` — ``orphan_nodes``, ``dangling_edges`` (and links), ``unsourced_edges``, ``issues`` (found
before the fixes), ``edges_removed``, ``nodes_removed`` (by the fixes and the withdrawal of the
memories quarantined); ``patterns_added`` (ids) and ``patterns_rejected``; ``drift``; ``quality``;
``anomalies``; ``judge_failures``; ``rolled_back``, ``failed_step``, ``error``; ``duration_ms``.
A rolled-back record has only the last group (and the ids of the run): nothing else happened.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from assistant.clock import iso_at
from assistant.memory import quarantine as Q
from assistant.memory.types import Memory
from assistant.sanitation import contradictions, drift, evolution, hygiene, integrity, quality
from assistant.sanitation.store import new_result_id
from assistant.sanitation.types import (
    Anomaly,
    DriftCorrection,
    Judgement,
    MemoryVerdict,
    QualityAssessment,
    SanitationResult,
    Step,
)

if TYPE_CHECKING:
    from assistant.sanitation.service import SanitationService
    from assistant.storage.db import Database

log = logging.getLogger(__name__)


class DrillFailure(RuntimeError):
    """A failure asked for (``fail_at``): shows that a failed run leaves the database unchanged."""


def snapshot(db: Database) -> Any:
    """The run's snapshot: one transaction over everything it writes (see the module docstring)."""
    return db.transaction()


@dataclass
class Plan:
    drift: list[DriftCorrection] = field(default_factory=list)
    ttl_days: int = 7
    batch_size: int = 10
    expired: int = 0
    memories: dict[str, Memory] = field(default_factory=dict)
    rowids: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # id -> (rowid, type, updated_at seen)
    judgements: list[Judgement] = field(default_factory=list)  # every memory judged, in order
    winners: set[str] = field(default_factory=set)
    judged_pairs: int = 0
    judge_failures: int = 0
    graph: integrity.GraphPlan | None = None
    patterns: list[evolution.PlannedPattern] = field(default_factory=list)
    patterns_rejected: int = 0
    defence: dict = field(default_factory=dict)  # tested, blocked, score (evolution's attacks)
    quality: QualityAssessment | None = None
    anomalies: list[Anomaly] = field(default_factory=list)

    @property
    def bad(self) -> list[Judgement]:
        return [j for j in self.judgements if j.verdict is not MemoryVerdict.OK]


@dataclass
class Applied:
    purged_rowids: list[int] = field(default_factory=list)
    purged_ids: list[str] = field(default_factory=list)
    quarantined: list[Judgement] = field(default_factory=list)
    graph_events: list[Any] = field(default_factory=list)
    patterns: list[Any] = field(default_factory=list)


class SanitationRun:
    def __init__(self, service: SanitationService, user_id: str, *, session_id: str | None = None,
                 cycle: int | None = None, trigger: str = "manual", checkpoint: Callable[[], Any] | None = None,
                 fail_at: Step | None = None):
        self.service = service
        self.deps = service.deps
        self.user = str(user_id)
        self.session_id = session_id
        self.cycle = cycle
        self.trigger = trigger
        self.checkpoint = checkpoint
        self.step = Step.SNAPSHOT
        self.fail_at = fail_at  # a rollback drill: fail on purpose at this step (COMMIT: after every write)
        self._stop: BaseException | None = None

    # --- the run ------------------------------------------------------------------------------------

    def run(self) -> SanitationResult:
        started = time.perf_counter()
        now = float(self.deps.clock())
        result = self._result(now)
        try:
            with self.service.store.quiet_hits():  # the run's own inspections are not pattern hits
                plan = self._plan(now)
            applied = self._apply(plan, result, now, started)
        except BaseException as exc:
            if exc is self._stop:
                raise  # the dream stopped the run between batches: nothing was written
            if not isinstance(exc, Exception):
                raise
            return self._rolled_back(exc, now, started)
        try:
            self._after_commit(plan, applied, result)
        except Exception:  # committed: what failed here is a cache or a listener, not the run
            log.exception("sanitation of user %s: after-commit work failed", self.user)
        return result

    def _result(self, now: float) -> SanitationResult:
        return SanitationResult(id=new_result_id(), user_id=self.user, session_id=self.session_id, cycle=self.cycle,
                                trigger=self.trigger, status="completed", started_at=iso_at(now))

    def _at(self, step: Step) -> None:
        self.step = step
        if self.fail_at is step and step is not Step.COMMIT:
            raise DrillFailure(f"rollback drill: failed on purpose at {step.value}")

    def _checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        try:
            self.checkpoint()
        except BaseException as exc:
            self._stop = exc
            raise

    # --- plan: reads only -------------------------------------------------------------------------

    def _plan(self, now: float) -> Plan:
        deps, plan = self.deps, Plan()
        self._at(Step.DRIFT)
        plan.drift = drift.plan(deps.settings)
        values = drift.effective(deps.settings, plan.drift)
        plan.ttl_days, plan.batch_size = values["quarantine_ttl_days"], values["memory_batch_size"]

        self._at(Step.PURGE)
        plan.expired = len(Q.expired(deps.memory, self.user, now, plan.ttl_days))

        self._at(Step.HYGIENE)
        memories, judgements = hygiene.scan(deps.memory, deps.detector, self.user, plan.batch_size,
                                            datetime.fromtimestamp(now, UTC), self._checkpoint,
                                            self.service.verdicts, self.service.store.patterns_version(self.user))
        plan.memories = {m.id: m for _, m in memories}
        plan.rowids = {m.id: (rowid, m.memory_type.value, m.updated_at) for rowid, m in memories}
        ok = {j.memory_id: plan.memories[j.memory_id] for j in judgements if j.verdict is MemoryVerdict.OK}
        self._checkpoint()
        found = contradictions.find(deps.graph, deps.queue, self.user, ok)
        lost = {j.memory_id: j for j in found.judgements}
        plan.judgements = [lost.get(j.memory_id, j) for j in judgements]
        plan.winners = found.winners - set(lost)
        plan.judged_pairs, plan.judge_failures = found.judged, found.judge_failures

        self._at(Step.GRAPH)
        if deps.graph is not None:
            plan.graph = integrity.scan(deps.memory.db, self.user)

        self._at(Step.DEFENCE)
        plan.defence = {}
        plan.patterns, plan.patterns_rejected = evolution.plan_patterns(deps, self.user, self.session_id,
                                                                        score=plan.defence)

        self._at(Step.QUALITY)
        plan.quality = quality.assess(deps, self.user, history=self.service.store.history(self.user),
                                      since=self.service.store.last_run_ts(self.user), now=now)

        self._at(Step.ANOMALIES)
        plan.anomalies = list(deps.anomalies.check()) if deps.anomalies is not None else []
        return plan

    # --- apply: one transaction -----------------------------------------------------------------------

    def _apply(self, plan: Plan, result: SanitationResult, now: float, started: float) -> Applied:
        deps, store, out = self.deps, self.service.store, Applied()
        self._at(Step.SNAPSHOT)
        with snapshot(deps.memory.db) as db:
            self._at(Step.PURGE)
            rows = Q.expired(deps.memory, self.user, now, plan.ttl_days)  # again, inside: what is still there
            out.purged_rowids = Q.purge(db, rows)
            out.purged_ids = [r["id"] for r in rows]
            store.record_purges(db, self.user, rows)

            self._at(Step.HYGIENE)
            bad = [j for j in plan.bad if j.memory_id in plan.rowids]
            done = set(Q.set_aside(db, deps.memory, self.user,
                                   [(j.memory_id, *plan.rowids[j.memory_id], j.reason) for j in bad], now))
            out.quarantined = [j for j in bad if j.memory_id in done]
            for winner in sorted(plan.winners):
                Q.add_tag(db, deps.memory, self.user, winner, contradictions.WINNER_TAG)

            self._at(Step.GRAPH)
            if deps.graph is not None and plan.graph is not None:
                out.graph_events = integrity.apply(db, deps.graph, self.user, plan.graph,
                                                   [j.memory_id for j in out.quarantined])

            self._at(Step.DEFENCE)
            for p in plan.patterns:
                added = store.add_pattern(self.user, p.pattern, source=p.source, family=p.family,
                                          session_id=self.session_id, db=db)
                if added is not None:
                    out.patterns.append(added)

            self._at(Step.COMMIT)
            self._fill(result, plan, out, started)
            store.save_result(result, db=db)
            if self.fail_at is Step.COMMIT:
                raise DrillFailure("rollback drill: failed on purpose after every write of the run")
        return out

    def _fill(self, result: SanitationResult, plan: Plan, out: Applied, started: float) -> None:
        by = {v: 0 for v in MemoryVerdict}
        for j in plan.judgements:
            by[j.verdict] += 1
        result.counts = {**{v.value: n for v, n in by.items()}, "purged": len(out.purged_ids),
                         "judged": len(plan.judgements), "judge_calls": plan.judged_pairs,
                         "quarantined": len(out.quarantined)}
        result.quarantined = [j.as_dict() for j in out.quarantined]
        result.purged = out.purged_ids
        result.graph = {**(plan.graph.counts() if plan.graph else {}),
                        "edges_removed": sum(1 for e in out.graph_events if getattr(e.type, "value", "") == "EdgeRemoved"),
                        "nodes_removed": sum(1 for e in out.graph_events if getattr(e.type, "value", "") == "NodeRemoved")}
        result.patterns_added = [p.id for p in out.patterns]
        result.patterns_rejected = plan.patterns_rejected
        result.defence = dict(plan.defence)
        result.drift = [c.as_dict() for c in plan.drift]
        result.quality = plan.quality.as_dict() if plan.quality is not None else None
        result.anomalies = [a.as_dict() for a in plan.anomalies]
        result.judge_failures = plan.judge_failures
        result.completed_at = iso_at(float(self.deps.clock()))
        result.duration_ms = round((time.perf_counter() - started) * 1000.0, 3)

    # --- after commit ------------------------------------------------------------------------------

    def _after_commit(self, plan: Plan, out: Applied, result: SanitationResult) -> None:
        deps, service, counters = self.deps, self.service, self.service.counters
        if out.purged_rowids:
            deps.memory.indexes.remove(self.user, out.purged_rowids)
        if deps.graph is not None:
            integrity.deliver(deps.graph, self.user, out.graph_events)
        self.service.store.forget(self.user)
        gone = [j.memory_id for j in out.quarantined] + out.purged_ids
        if gone:  # the graph already withdrew them, in the transaction; the other listeners hear now
            for listener in list(deps.memory.listeners):
                if listener is not deps.graph and hasattr(listener, "memories_removed"):
                    try:
                        listener.memories_removed(self.user, gone)
                    except Exception:
                        log.exception("memory listener %s failed after sanitation", type(listener).__name__)
        drift.apply(deps.settings, plan.drift)
        counters.memories_quarantined += len(out.quarantined)
        counters.contradictions_resolved += sum(1 for j in out.quarantined if j.verdict is MemoryVerdict.CONTRADICTED)
        counters.graph_orphans += plan.graph.issues if plan.graph is not None else 0
        counters.defense_patterns_added += len(out.patterns)
        fresh = service.new_anomalies(plan.anomalies)
        counters.anomalies_detected += len(fresh)
        if plan.quality is not None:
            counters.quality_score_x100 = round(plan.quality.score * 100)
        if plan.defence.get("score") is not None:
            counters.defense_score_x100 = round(plan.defence["score"] * 100)
        counters.runs["completed"] = counters.runs.get("completed", 0) + 1
        for c in plan.drift:
            service.emit("config_corrected", self.user, **c.as_dict())
        for p in out.patterns:
            service.emit("pattern_added", self.user, id=p.id, family=p.family, source=p.source)
        for a in fresh:
            service.emit("anomaly", self.user, anomaly=a.as_dict())
        if plan.quality is not None and plan.quality.regression:
            from assistant.sanitation.service import QUALITY_REGRESSION

            service.emit(QUALITY_REGRESSION, self.user, quality=plan.quality.as_dict())
        service.emit("run_finished", self.user, id=result.id, session_id=self.session_id, cycle=self.cycle,
                     status=result.status, counts=dict(result.counts), duration_ms=result.duration_ms,
                     quality=plan.quality.as_dict() if plan.quality is not None else None)

    # --- rollback ------------------------------------------------------------------------------------

    def _rolled_back(self, exc: Exception, now: float, started: float) -> SanitationResult:
        """The transaction was rolled back (or never opened): drop what may have cached uncommitted
        rows, count it, and record it in a transaction of its own."""
        deps, service = self.deps, self.service
        log.warning("sanitation of user %s rolled back at %s: %s", self.user, self.step.value, exc,
                    exc_info=None if isinstance(exc, DrillFailure) else exc)
        if deps.graph is not None:
            try:
                deps.graph.views.changed(self.user, removed=True)
            except Exception:
                log.exception("graph views could not be dropped after a rollback")
        service.store.forget()
        service.counters.rollbacks += 1
        service.counters.runs["rolled_back"] = service.counters.runs.get("rolled_back", 0) + 1
        result = self._result(now)
        result.status, result.rolled_back = "rolled_back", True
        result.failed_step, result.error = self.step.value, f"{type(exc).__name__}: {exc}"[:500]
        result.completed_at = iso_at(float(deps.clock()))
        result.duration_ms = round((time.perf_counter() - started) * 1000.0, 3)
        try:
            with deps.memory.db.transaction() as db:
                service.store.save_result(result, db=db)
        except Exception:  # the record is the audit trail; a run still never raises
            log.exception("the rolled-back sanitation run could not be recorded")
        service.emit("rolled_back", self.user, id=result.id, step=result.failed_step, error=result.error)
        return result
