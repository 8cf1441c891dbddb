"""One run of a dream session: cycles of NREM, the sanitation seam, REM; pauses, budgets, the cap.

:class:`DreamRun` runs in a worker thread of :class:`~assistant.dream.service.DreamService`. Steps
(:data:`~assistant.dream.nrem.NREM_STEPS`, :data:`~assistant.dream.rem.REM_STEPS`) plan operations
and hand each to :meth:`PhaseContext.record`, which first calls :meth:`PhaseContext.checkpoint`:

- the user came back (activity after the run started or resumed), or a pause was requested: the
  session becomes Paused *between two operations* (the one under way finishes) and the thread waits;
  it resumes when the user has been idle again for ``re_idle_secs`` (a pause because the user
  returned) or on request (``resume``; a requested pause only resumes on request);
- cancelled, or ``max_duration_hours`` since the start passed (paused time counts): the run stops
  (:class:`Stopped`) and the session fails with the reason; what was applied stays, journaled;
- the phase used its share of the cycle (:mod:`assistant.dream.budget`): ``record`` returns None and
  the step should stop (``ctx.exhausted``); the rest of its plan waits for the next cycle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from assistant.dream import budget
from assistant.dream.activity import ActivityTracker
from assistant.dream.deps import DreamDeps
from assistant.dream.journal import Applied, apply_entry
from assistant.dream.types import (
    DreamEvent,
    DreamSession,
    EntryStatus,
    JournalEntry,
    Operation,
    Phase,
    SessionStatus,
)

log = logging.getLogger("assistant.dream")
POLL_SECS = 1.0  # how often a paused run looks at the user's idleness


class Stopped(Exception):  # noqa: N818 - a signal, not an error
    """The run must stop: cancelled, or the session's time cap passed."""


class Step(Protocol):
    """One step of a phase (consolidate, archive, review edges, detect patterns...)."""

    name: str

    def run(self, ctx: PhaseContext) -> None: ...


@dataclass
class Control:
    """What the service asks of a running session (thread-safe through ``wake``)."""

    pause: bool = False
    resume: bool = False
    cancel: bool = False
    wake: threading.Event = field(default_factory=threading.Event)


class PhaseContext:
    """What a step sees: the session, cycle and phase, the deps, and the journal."""

    def __init__(self, run: DreamRun, cycle: int, phase: Phase, phase_deadline: float):
        self.run = run
        self.deps = run.deps
        self.cycle = cycle
        self.phase = phase
        self.phase_deadline = phase_deadline
        self.exhausted = False

    @property
    def session(self) -> DreamSession:
        return self.run.session

    @property
    def user_id(self) -> str:
        return self.run.session.user_id

    def checkpoint(self) -> bool:
        """Pause here if needed (blocks); raise :class:`Stopped` if cancelled or capped; False once
        the phase's budget is used (``exhausted``)."""
        self.run.checkpoint()
        if self.deps.clock() >= self.phase_deadline:
            self.exhausted = True
        return not self.exhausted

    def record(self, operation: Operation, key: str, details: dict[str, Any], *, memories: Sequence[str] = (),
               nodes: Sequence[str] = (), edges: Sequence[str] = (),
               before: dict[str, Any] | None = None) -> tuple[JournalEntry, Applied | None] | None:
        """Journal ``operation`` (pending, committed), apply it, mark it. None when the budget is used
        or ``key`` was already applied for this user (nothing written); otherwise the entry (applied
        or failed) and what the applier returned (None if it failed)."""
        if not self.checkpoint():
            return None
        store, session = self.deps.store, self.run.session
        if store.applied(session.user_id, key):
            return None
        snapshots = self.deps.settings.journal.store_before_after_snapshots
        entry = store.begin_entry(session, self.cycle, self.phase, operation, key, details, memories=memories,
                                  nodes=nodes, edges=edges, before=before if snapshots else None)
        entry, result = apply_entry(self.deps, entry, snapshots=snapshots)
        self.run.counted(operation, entry.status, result.count if result is not None else 0)
        self.run.emit("operation", cycle=self.cycle, phase=self.phase, operation=operation,
                      data={"status": entry.status.value, "count": result.count if result else 0,
                            **(result.extra if result else {})})
        return entry, result

    def fail(self, operation: Operation, key: str, details: dict[str, Any], error: str) -> JournalEntry:
        """Journal a step that failed before it could change anything (an engine that did not answer)."""
        store = self.deps.store
        entry = store.begin_entry(self.run.session, self.cycle, self.phase, operation, key, details)
        entry = store.finish_entry(entry, EntryStatus.FAILED, error=error[:500])
        self.run.counted(operation, EntryStatus.FAILED, 0)
        self.run.emit("step_failed", cycle=self.cycle, phase=self.phase, operation=operation, data={"error": error})
        return entry

    def emit(self, kind: str, **data: Any) -> None:
        """A step's own event (``llm_call``, progress) for the listeners (metrics, notebooks)."""
        self.run.emit(kind, cycle=self.cycle, phase=self.phase, data=data)


class DreamRun:
    def __init__(self, deps: DreamDeps, session: DreamSession, activity: ActivityTracker,
                 nrem_steps: Sequence[Step], rem_steps: Sequence[Step],
                 listeners: Sequence[Callable[[DreamEvent], None]] = (), *, poll_secs: float = POLL_SECS):
        self.deps = deps
        self.session = session
        self.activity = activity
        self.nrem_steps = list(nrem_steps)
        self.rem_steps = list(rem_steps)
        self.listeners = list(listeners)
        self.control = Control()
        self.poll_secs = poll_secs
        s = deps.settings
        self.deadline = deps.clock() + s.max_duration_hours * 3600.0
        self.watch_from = deps.clock()  # activity after this means the user returned
        self.started_at = deps.clock()

    # --- events and counts ------------------------------------------------------------------------

    def emit(self, kind: str, *, cycle: int = 0, phase: Phase | None = None, operation: Operation | None = None,
             data: dict[str, Any] | None = None) -> None:
        event = DreamEvent(kind, self.session.id, self.session.user_id, cycle, phase, operation, data or {})
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # a listener never stops a dream
                log.exception("dream event listener failed")

    def counted(self, operation: Operation, status: EntryStatus, count: int) -> None:
        counts = dict(self.session.counts)
        if status is EntryStatus.APPLIED:
            counts[operation.value] = counts.get(operation.value, 0) + count
        elif status is EntryStatus.FAILED:
            counts["failed"] = counts.get("failed", 0) + 1
        self.session = self.deps.store.update_session(self.session, counts=counts)

    # --- pause, resume, stop ----------------------------------------------------------------------

    def _set(self, **changes: Any) -> None:
        self.session = self.deps.store.update_session(self.session, **changes)

    def checkpoint(self) -> None:
        c, clock = self.control, self.deps.clock
        if c.cancel:
            raise Stopped("cancelled")
        if clock() >= self.deadline:
            raise Stopped(f"max_duration_hours ({self.deps.settings.max_duration_hours:g}) reached")
        last = self.activity.last_active(self.session.user_id)
        returned = last is not None and last > self.watch_from
        if not (c.pause or returned):
            return
        reason = "requested" if c.pause else "user_returned"
        self._set(status=SessionStatus.PAUSED, paused_reason=reason)
        self.emit("session_paused", cycle=self.session.current_cycle, phase=self.session.phase,
                  data={"reason": reason})
        while True:
            c.wake.wait(self.poll_secs)
            c.wake.clear()
            if c.cancel:
                raise Stopped("cancelled while paused")
            if clock() >= self.deadline:
                raise Stopped(f"max_duration_hours ({self.deps.settings.max_duration_hours:g}) reached while paused")
            if c.resume:
                break
            if not c.pause and self.activity.idle_seconds(self.session.user_id) >= self.deps.settings.re_idle_secs:
                break
        c.pause = c.resume = False
        self.watch_from = clock()
        self._set(status=SessionStatus.RUNNING, paused_reason=None)
        self.emit("session_resumed", cycle=self.session.current_cycle, phase=self.session.phase)

    # --- the run ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Pending -> Running (the caller's thread: the trigger answers with a running session)."""
        self._set(status=SessionStatus.RUNNING, started=True, current_cycle=1, phase=Phase.NREM)
        self.deadline = self.deps.clock() + self.deps.settings.max_duration_hours * 3600.0
        self.watch_from = self.started_at = self.deps.clock()
        self.emit("session_started", data={"total_cycles": self.session.total_cycles})

    def run(self) -> DreamSession:
        """All cycles (the worker thread). Ends Completed, or Failed with the reason."""
        s = self.deps.settings
        try:
            total = self.session.total_cycles
            cycle_seconds = s.max_duration_hours * 3600.0 / total
            for cycle in range(max(1, self.session.current_cycle), total + 1):
                split = budget.split(cycle, total, cycle_seconds)
                self._phase(cycle, Phase.NREM, self.nrem_steps if s.nrem.enabled else [], split.nrem_seconds,
                            split.nrem_share)
                self._phase(cycle, Phase.REM, self.rem_steps if s.rem.enabled else [], split.rem_seconds,
                            split.rem_share)
            self._set(status=SessionStatus.COMPLETED, completed=True)
        except Stopped as stop:
            self._set(status=SessionStatus.FAILED, completed=True, reason=str(stop), paused_reason=None)
        except Exception as exc:  # a bug or a lost database: the session fails, the journal says how far
            log.exception("dream session %s failed", self.session.id)
            self._set(status=SessionStatus.FAILED, completed=True, reason=f"{type(exc).__name__}: {exc}"[:500])
        self.emit("session_finished", cycle=self.session.current_cycle, phase=self.session.phase,
                  data={"status": self.session.status.value, "reason": self.session.reason,
                        "seconds": self.deps.clock() - self.started_at})
        return self.session

    def _phase(self, cycle: int, phase: Phase, steps: Sequence[Step], seconds: float, share: float) -> None:
        self.checkpoint()
        self._set(current_cycle=cycle, phase=phase)
        ctx = PhaseContext(self, cycle, phase, self.deps.clock() + seconds)
        self.emit("phase_started", cycle=cycle, phase=phase, data={"share": share, "seconds": seconds,
                                                                    "steps": [st.name for st in steps]})
        for step in steps:
            if not ctx.checkpoint():
                break
            self.emit("step_started", cycle=cycle, phase=phase, data={"step": step.name})
            try:
                step.run(ctx)
            except Stopped:
                raise
            except Exception as exc:  # the step is over; the session goes on with the next one
                log.exception("dream step %s failed", step.name)
                self.session = self.deps.store.update_session(
                    self.session, counts={**self.session.counts, "failed": self.session.counts.get("failed", 0) + 1})
                self.emit("step_failed", cycle=cycle, phase=phase, data={"step": step.name,
                                                                         "error": f"{type(exc).__name__}: {exc}"})
        if phase is Phase.NREM and self.deps.sanitation is not None:
            self.deps.sanitation.run(ctx)  # the seam: sanitation between NREM and REM (issue 15)
        self.emit("phase_finished", cycle=cycle, phase=phase, data={"exhausted": ctx.exhausted})
