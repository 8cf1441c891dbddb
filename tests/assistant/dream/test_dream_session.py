"""The dream orchestrator with fake steps: states, journal before commit, pause/resume, cap, recovery."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

import assistant.dream.nrem  # noqa: F401 - the real appliers registered before a test replaces one
from assistant.dream import budget
from assistant.dream.journal import APPLIERS, Applied
from assistant.dream.session import PhaseContext
from assistant.dream.types import EntryStatus, Operation, Phase, SessionStatus
from assistant.errors import ConflictError
from assistant.services import Services


class Recording:
    """A step that journals one DecayApplied operation per run (key per cycle and phase)."""

    def __init__(self, name: str, gate: threading.Event | None = None, times: int = 1):
        self.name = name
        self.gate = gate
        self.times = times
        self.runs: list[tuple[int, Phase]] = []

    def run(self, ctx: PhaseContext) -> None:
        self.runs.append((ctx.cycle, ctx.phase))
        for n in range(self.times):
            if self.gate is not None:
                self.gate.wait(10)
            ctx.record(Operation.DECAY_APPLIED, f"{self.name}:{ctx.session.id}:{ctx.cycle}:{ctx.phase}:{n}",
                       {"step": self.name}, before={"n": n})


@pytest.fixture
def applied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def apply(deps, entry) -> Applied:
        seen.append(entry.id)
        return Applied(after={"done": True})

    monkeypatch.setitem(APPLIERS, Operation.DECAY_APPLIED, apply)
    return seen


@pytest.fixture
def dreaming(make_settings, make_services) -> Callable[..., Services]:
    def make(**dream) -> Services:
        services = make_services(make_settings(dream={"max_cycles": 2, **dream}))
        services.memory.add("u1", "I live in Lisbon.")
        return services

    return make


def test_budget_split_sums_to_one_and_moves_from_nrem_to_rem() -> None:
    shares = [budget.nrem_share(c, 5) for c in range(1, 6)]
    assert shares == pytest.approx([0.8, 0.65, 0.5, 0.35, 0.2])
    assert budget.nrem_share(1, 1) == 0.5
    for b in budget.plan(5, 6):
        assert b.nrem_share + b.rem_share == pytest.approx(1.0)
        assert b.nrem_seconds + b.rem_seconds == pytest.approx(6 * 3600 / 5)
    with pytest.raises(ValueError):
        budget.nrem_share(0, 5)


def test_a_session_runs_every_cycle_and_journals_each_operation(dreaming, applied) -> None:
    services = dreaming()
    dream = services.dream
    nrem, rem = Recording("n"), Recording("r")
    dream.nrem_steps, dream.rem_steps = [nrem], [rem]
    session = dream.trigger("u1", background=False)
    assert session.status is SessionStatus.COMPLETED
    assert nrem.runs == [(1, Phase.NREM), (2, Phase.NREM)] and rem.runs == [(1, Phase.REM), (2, Phase.REM)]
    entries, total = dream.journal("u1", session.id)
    assert total == 4 and len(applied) == 4
    assert [(e.cycle_number, e.phase) for e in entries] == [(1, Phase.NREM), (1, Phase.REM), (2, Phase.NREM),
                                                            (2, Phase.REM)]
    assert all(e.status is EntryStatus.APPLIED and e.before_snapshot and e.after_snapshot == {"done": True}
               for e in entries)
    assert session.counts == {"DecayApplied": 4}
    assert dream.counters.snapshot()["cycles"] == {"nrem": 2, "rem": 2}
    assert dream.counters.snapshot()["sessions"] == {"running": 1, "completed": 1}


def test_an_applied_key_is_not_applied_again(dreaming, applied) -> None:
    services = dreaming(max_cycles=1)
    dream = services.dream

    class Same:
        name = "same"

        def run(self, ctx: PhaseContext) -> None:
            ctx.record(Operation.DECAY_APPLIED, "one-key", {})

    dream.nrem_steps, dream.rem_steps = [Same()], [Same()]
    first = dream.trigger("u1", background=False)
    second = dream.trigger("u1", background=False)
    assert first.counts == {"DecayApplied": 1} and second.counts == {}
    assert len(applied) == 1


def test_one_active_session_per_user_and_pause_resume_from_the_right_state(dreaming, applied) -> None:
    services = dreaming(max_cycles=1)
    dream = services.dream
    gate = threading.Event()
    dream.nrem_steps, dream.rem_steps = [Recording("n", gate)], []
    dream.poll_secs = 0.02
    running = dream.trigger("u1")
    assert running.status is SessionStatus.RUNNING and running.phase is Phase.NREM
    with pytest.raises(ConflictError, match="already running"):
        dream.trigger("u1")
    with pytest.raises(ConflictError, match="cannot resume: the dream session is running"):
        dream.resume("u1")
    paused = dream.pause("u1")
    assert paused.status is SessionStatus.PAUSED and paused.paused_reason == "requested"
    gate.set()  # the operation under way finishes; then the run waits
    time.sleep(0.2)
    assert dream.status("u1")["session"]["status"] == "paused"
    assert dream.resume("u1").status is SessionStatus.RUNNING
    final = dream.wait("u1", 10)
    assert final.status is SessionStatus.COMPLETED
    with pytest.raises(ConflictError, match="cannot pause: the dream session is completed"):
        dream.pause("u1")


def test_the_user_returning_pauses_and_new_idleness_resumes(dreaming, applied) -> None:
    services = dreaming(max_cycles=1, re_idle_secs=0)
    dream = services.dream
    dream.poll_secs = 0.02
    events: list[str] = []
    dream.subscribe(lambda e: events.append(e.kind))
    gate = threading.Event()
    dream.nrem_steps, dream.rem_steps = [Recording("n", gate, times=2)], []
    dream.trigger("u1")
    time.sleep(0.05)
    dream.activity.touch("u1")  # the user is back
    gate.set()
    final = dream.wait("u1", 10)
    assert final.status is SessionStatus.COMPLETED
    assert "session_paused" in events and "session_resumed" in events


def test_cancel_fails_the_session_and_keeps_what_was_applied(dreaming, applied) -> None:
    services = dreaming(max_cycles=1)
    dream = services.dream
    dream.poll_secs = 0.02
    gate = threading.Event()
    dream.nrem_steps, dream.rem_steps = [Recording("n", gate, times=3)], []
    dream.trigger("u1")
    dream.pause("u1")
    gate.set()
    final = dream.cancel("u1")
    assert final.status is SessionStatus.FAILED and "cancelled" in final.reason
    entries, _ = dream.journal("u1", final.id)
    assert entries == []  # paused before its first operation: nothing half-done


def test_a_failing_step_is_counted_and_the_session_goes_on(dreaming, applied) -> None:
    services = dreaming(max_cycles=1)
    dream = services.dream

    class Broken:
        name = "broken"

        def run(self, ctx: PhaseContext) -> None:
            raise RuntimeError("engine down")

    after = Recording("after")
    dream.nrem_steps, dream.rem_steps = [Broken(), after], []
    session = dream.trigger("u1", background=False)
    assert session.status is SessionStatus.COMPLETED and session.counts["failed"] == 1
    assert after.runs == [(1, Phase.NREM)]


def test_a_restart_completes_pending_entries_and_fails_the_interrupted_session(dreaming, applied) -> None:
    services = dreaming()
    dream = services.dream
    store = dream.store
    session = store.create_session("u1", 2, "manual")
    session = store.update_session(session, status=SessionStatus.RUNNING, started=True, current_cycle=1)
    pending = store.begin_entry(session, 1, Phase.NREM, Operation.DECAY_APPLIED, "crash-key", {"x": 1})
    [failed] = dream.recover()
    assert failed.status is SessionStatus.FAILED
    assert "interrupted by a server restart during cycle 1 (nrem); 1 pending operation(s)" in failed.reason
    assert store.entry("u1", pending.id).status is EntryStatus.APPLIED and applied == [pending.id]


def test_the_schedule_creates_pending_sessions_that_start_when_the_user_is_idle(dreaming, applied) -> None:
    services = dreaming(max_cycles=1, idle_threshold_secs=3600)
    dream = services.dream
    dream.nrem_steps, dream.rem_steps = [Recording("n")], []
    dream.activity.touch("u1")
    [pending] = dream.schedule_tick()
    assert pending.status is SessionStatus.PENDING and dream.schedule_tick() == []
    assert dream.watch() == []  # active a moment ago
    dream.activity.touch("u1", at=time.time() - 7200)
    [started] = dream.watch()
    assert started.status is SessionStatus.RUNNING
    assert dream.wait("u1", 10).status is SessionStatus.COMPLETED


def test_a_cron_that_is_not_six_fields_is_a_config_error_naming_the_key(make_settings) -> None:
    from assistant.errors import ConfigError

    with pytest.raises((ConfigError, ValueError), match="schedule"):
        make_settings(dream={"schedule": "0 0 * * *"})


def test_sanitation_runs_between_nrem_and_rem_of_each_cycle(dreaming, applied) -> None:
    services = dreaming(max_cycles=2)
    dream = services.dream
    order: list[str] = []

    class Step:
        def __init__(self, name: str):
            self.name = name

        def run(self, ctx: PhaseContext) -> None:
            order.append(f"{ctx.phase.value}{ctx.cycle}")

    class Sanitation:
        def run(self, ctx: PhaseContext) -> None:
            order.append(f"sanitation{ctx.cycle}")

    dream.deps.sanitation = Sanitation()
    dream.nrem_steps, dream.rem_steps = [Step("n")], [Step("r")]
    dream.trigger("u1", background=False)
    assert order == ["nrem1", "sanitation1", "rem1", "nrem2", "sanitation2", "rem2"]


def test_max_duration_hours_caps_a_session(dreaming, applied) -> None:
    services = dreaming(max_cycles=1, max_duration_hours=0.0001)  # 0.36 s

    class Slow:
        name = "slow"

        def run(self, ctx: PhaseContext) -> None:
            for n in range(100):
                time.sleep(0.05)
                ctx.record(Operation.DECAY_APPLIED, f"slow:{ctx.session.id}:{n}", {})

    dream = services.dream
    dream.nrem_steps, dream.rem_steps = [Slow()], []
    session = dream.trigger("u1", background=False)
    assert session.status is SessionStatus.FAILED and "max_duration_hours (0.0001) reached" in session.reason
    entries, total = dream.journal("u1", session.id)
    assert 0 < total < 100 and all(e.status is EntryStatus.APPLIED for e in entries)


def test_a_phase_that_used_its_budget_stops_between_operations(dreaming, applied) -> None:
    services = dreaming(max_cycles=1)
    dream = services.dream
    seen: list[bool] = []

    class Greedy:
        name = "greedy"

        def run(self, ctx: PhaseContext) -> None:
            ctx.phase_deadline = 0.0  # as if the phase had used its share
            seen.append(ctx.record(Operation.DECAY_APPLIED, "greedy", {}) is None)
            seen.append(ctx.exhausted)

    dream.nrem_steps, dream.rem_steps = [Greedy()], []
    session = dream.trigger("u1", background=False)
    assert seen == [True, True] and session.status is SessionStatus.COMPLETED and session.counts == {}


def test_a_restart_completes_pending_entries_of_finished_sessions_too(dreaming, applied) -> None:
    services = dreaming()
    store = services.dream.store
    session = store.create_session("u1", 1, "manual")
    session = store.update_session(session, status=SessionStatus.COMPLETED, completed=True)
    pending = store.begin_entry(session, 1, Phase.REM, Operation.DECAY_APPLIED, "late-key", {})  # a confirm, cut
    assert services.dream.recover() == []
    assert store.entry("u1", pending.id).status is EntryStatus.APPLIED and applied == [pending.id]
