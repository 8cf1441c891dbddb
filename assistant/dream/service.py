"""DreamService: what the API, the scheduler, notebooks and dashboards use.

One active session per user (pending, running or paused). The cron ``schedule`` creates a Pending
session for each user with memories (:meth:`DreamService.schedule_tick`); :meth:`DreamService.watch`
(every ``WATCH_SECS``) starts it once the user has been idle for ``idle_threshold_secs`` (a session
still pending after ``max_duration_hours`` fails: the user was never idle long enough that night);
the schedule also does the housekeeping (journal retention, hypothesis expiry). ``trigger`` starts one now,
skipping the idle gate. Each running session has its own worker thread (:class:`DreamRun`).

After a restart, :meth:`DreamService.recover` finds sessions a previous process left active, applies
their pending journal entries again (idempotent appliers) and marks them Failed with the reason:
they are not resumed, because the idle gate and the time cap were measured by a process that is gone
and the user may be active now; the next night starts a new session, and the journal's keys make it
skip what was already done.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from assistant.clock import epoch_of
from assistant.dream.activity import ActivityTracker
from assistant.dream.counters import DreamCounters
from assistant.dream.deps import DreamDeps
from assistant.dream.insights import InsightService
from assistant.dream.journal import replay
from assistant.dream.session import POLL_SECS, DreamRun, Step
from assistant.dream.types import DreamEvent, DreamSession, EntryStatus, JournalEntry, Operation, Phase, SessionStatus
from assistant.errors import ConflictError

log = logging.getLogger("assistant.dream")
WATCH_SECS = 30  # how often pending sessions meet the idle gate (the scheduler's interval job)


def default_steps() -> tuple[list[Step], list[Step]]:
    from assistant.dream.nrem import NREM_STEPS
    from assistant.dream.rem import REM_STEPS

    return list(NREM_STEPS), list(REM_STEPS)


class DreamService:
    def __init__(self, deps: DreamDeps, activity: ActivityTracker, *, nrem_steps: Sequence[Step] | None = None,
                 rem_steps: Sequence[Step] | None = None, poll_secs: float = POLL_SECS):
        self.deps = deps
        self.store = deps.store
        self.settings = deps.settings
        self.activity = activity
        nrem, rem = default_steps()
        self.nrem_steps = list(nrem if nrem_steps is None else nrem_steps)
        self.rem_steps = list(rem if rem_steps is None else rem_steps)
        self.poll_secs = poll_secs
        self.counters = DreamCounters()
        self.insights = InsightService(deps)
        self._listeners: list[Callable[[DreamEvent], None]] = [self.counters]
        self._runs: dict[str, tuple[DreamRun, threading.Thread]] = {}
        self._lock = threading.Lock()

    def bind_loop(self, loop: Any) -> None:
        """Run REM's engine calls on the server's event loop (the one that owns the inference queue)."""
        if self.deps.queue is not None:
            from assistant.dream.engine import bind_loop

            bind_loop(self.deps.queue, loop)

    # --- listeners --------------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[DreamEvent], None]) -> Callable[[], None]:
        """Receive every event of every run (from worker threads); returns the unsubscribe call."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _emit(self, event: DreamEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("dream event listener failed")

    # --- starting ---------------------------------------------------------------------------------

    def _active(self, user_id: str) -> DreamSession | None:
        found = self.store.active(user_id)
        return found[0] if found else None

    def trigger(self, user_id: str, *, background: bool = True) -> DreamSession:
        """Start a session now (skipping the idle gate); 409 while one is pending, running or paused.
        Returns it running (``background``) or, with ``background=False``, once it has finished."""
        user = str(user_id)
        with self._lock:
            active = self._active(user)
            if active is not None:
                raise ConflictError(f"a dream session is already {active.status.value} for this user "
                                    f"(session {active.id}); pause, resume or wait for it",
                                    {"session_id": active.id, "status": active.status.value})
            session = self.store.create_session(user, self.settings.max_cycles, "manual")
            return self._start(session, background=background)

    def _start(self, session: DreamSession, *, background: bool) -> DreamSession:
        run = DreamRun(self.deps, session, self.activity, self.nrem_steps, self.rem_steps, [self._emit],
                       poll_secs=self.poll_secs)
        run.start()
        if not background:
            return run.run()
        started = run.session  # as started (running, cycle 1, nrem): the thread may finish it at once
        thread = threading.Thread(target=self._run, args=(run,), name=f"dream-{session.id[:8]}", daemon=True)
        self._runs[session.user_id] = (run, thread)
        thread.start()
        return started

    def _run(self, run: DreamRun) -> None:
        try:
            run.run()
        finally:
            with self._lock:
                if self._runs.get(run.session.user_id, (None,))[0] is run:
                    del self._runs[run.session.user_id]

    def schedule_tick(self) -> list[DreamSession]:
        """The cron ``schedule`` fired: a Pending session for each user with memories and none active;
        then the housekeeping (journal retention, hypothesis expiry: days, so once a night is enough)."""
        created = []
        with self._lock:
            users = self.store.users_with_memories()
            for user in users:
                if self._active(user) is None:
                    created.append(self.store.create_session(user, self.settings.max_cycles, "schedule"))
        self.housekeeping(users)
        return created

    def watch(self) -> list[DreamSession]:
        """Start pending sessions whose user is idle; fail those pending too long. Returns the
        sessions started."""
        started = []
        cap = self.settings.max_duration_hours * 3600.0
        with self._lock:
            for session in self.store.active():
                if session.status is not SessionStatus.PENDING:
                    continue
                if self.activity.idle_seconds(session.user_id) >= self.settings.idle_threshold_secs:
                    started.append(self._start(session, background=True))
                elif self.deps.clock() - epoch_of(session.created_at) >= cap:
                    self.store.update_session(
                        session, status=SessionStatus.FAILED, completed=True,
                        reason=f"the user was not idle for idle_threshold_secs ({self.settings.idle_threshold_secs}) "
                               f"within max_duration_hours ({self.settings.max_duration_hours:g})")
        return started

    def housekeeping(self, users: list[str] | None = None) -> None:
        self.store.purge_journal(self.settings.journal.retention_days)
        for user in self.store.users_with_memories() if users is None else users:
            self.insights.expire(user)

    def recover(self) -> list[DreamSession]:
        """At start: sessions a previous process left active are completed from the journal and failed;
        pending entries of other sessions (an insight confirmation cut short) are completed too."""
        failed = []
        with self._lock:
            for session in self.store.active():
                if session.user_id in self._runs:
                    continue
                if session.status is SessionStatus.PENDING:
                    reason = "the server restarted before the idle gate passed"
                else:
                    done = replay(self.deps, session.id)
                    reason = (f"interrupted by a server restart during cycle {session.current_cycle} "
                              f"({session.phase.value}); {done} pending operation(s) completed from the journal")
                failed.append(self.store.update_session(session, status=SessionStatus.FAILED, completed=True,
                                                        reason=reason, paused_reason=None))
                log.warning("dream session %s of user %s: %s", session.id, session.user_id, reason)
            for session_id in self.store.sessions_with_pending():  # a user's confirm cut short by the crash
                log.warning("dream session %s: %d pending operation(s) completed from the journal", session_id,
                            replay(self.deps, session_id))
        return failed

    # --- control ----------------------------------------------------------------------------------

    def _run_of(self, user_id: str, wanted: tuple[SessionStatus, ...], action: str) -> tuple[DreamRun, DreamSession]:
        session = self._active(str(user_id))
        if session is None or session.status not in wanted:
            latest = session or self.store.latest(str(user_id))
            state = latest.status.value if latest else "none"
            raise ConflictError(f"cannot {action}: the dream session is {state}"
                                + ("" if latest else " (no session yet)"),
                                {"status": state, "session_id": latest.id if latest else None})
        entry = self._runs.get(str(user_id))
        if entry is None:
            raise ConflictError(f"cannot {action}: session {session.id} has no run in this process",
                                {"status": session.status.value, "session_id": session.id})
        return entry[0], session

    def pause(self, user_id: str) -> DreamSession:
        """Running -> Paused now (the operation under way finishes first); resumes only on request."""
        with self._lock:
            run, session = self._run_of(user_id, (SessionStatus.RUNNING,), "pause")
            run.control.pause, run.control.resume = True, False
            session = self.store.update_session(session, status=SessionStatus.PAUSED, paused_reason="requested")
            run.control.wake.set()
            return session

    def resume(self, user_id: str) -> DreamSession:
        """Paused -> Running now (also a session paused because the user returned)."""
        with self._lock:
            run, session = self._run_of(user_id, (SessionStatus.PAUSED,), "resume")
            run.control.pause, run.control.resume = False, True
            session = self.store.update_session(session, status=SessionStatus.RUNNING, paused_reason=None)
            run.control.wake.set()
            return session

    def cancel(self, user_id: str) -> DreamSession:
        """Pending, Running or Paused -> Failed (reason "cancelled"); applied operations stay."""
        with self._lock:
            session = self._active(str(user_id))
            if session is None:
                latest = self.store.latest(str(user_id))
                raise ConflictError(f"cannot cancel: the dream session is {latest.status.value if latest else 'none'}",
                                    {"status": latest.status.value if latest else "none"})
            entry = self._runs.get(str(user_id))
            if entry is None:
                return self.store.update_session(session, status=SessionStatus.FAILED, completed=True,
                                                 reason="cancelled")
            entry[0].control.cancel = True
            entry[0].control.wake.set()
            thread = entry[1]
        thread.join(timeout=60)
        return self.store.session(str(user_id), session.id)

    def wait(self, user_id: str, timeout: float | None = None) -> DreamSession | None:
        """Block until the user's running session ends (tests, notebooks); its final state."""
        entry = self._runs.get(str(user_id))
        if entry is not None:
            entry[1].join(timeout)
        return self.store.latest(str(user_id))

    def close(self) -> None:
        """Stop every run (each fails with "cancelled": the server is going down) and join them."""
        with self._lock:
            runs = list(self._runs.values())
        for run, _ in runs:
            run.control.cancel = True
            run.control.wake.set()
        for _, thread in runs:
            thread.join(timeout=30)

    # --- reading ----------------------------------------------------------------------------------

    def status(self, user_id: str) -> dict[str, Any]:
        """The active session, else the latest (None before the first), and the idle gate."""
        session = self._active(str(user_id)) or self.store.latest(str(user_id))
        idle = self.activity.idle_seconds(str(user_id))
        return {
            "session": session.to_json() if session else None,
            "enabled": self.settings.enabled,
            "schedule": self.settings.schedule,
            "idle_seconds": None if idle == float("inf") else round(idle, 3),
            "idle_threshold_secs": self.settings.idle_threshold_secs,
        }

    def sessions(self, user_id: str, limit: int = 20, offset: int = 0) -> tuple[list[DreamSession], int]:
        return self.store.sessions(str(user_id), limit, offset)

    def session(self, user_id: str, session_id: str) -> DreamSession:
        return self.store.session(str(user_id), session_id)

    def journal(self, user_id: str, session_id: str, *, cycle: int | None = None, phase: Phase | None = None,
                operation: Operation | None = None, status: EntryStatus | None = None, limit: int = 100,
                offset: int = 0) -> tuple[list[JournalEntry], int]:
        return self.store.journal(str(user_id), session_id, cycle=cycle, phase=phase, operation=operation,
                                  status=status, limit=limit, offset=offset)

    def config(self) -> dict[str, Any]:
        return self.settings.model_dump(mode="json")

