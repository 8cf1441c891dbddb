"""Component restarts: exponential backoff without blocking, then degraded (fixed clock)."""

from __future__ import annotations

import pytest

from assistant.sanitation.supervisor import ComponentSupervisor


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, secs: float) -> None:
        self.slept.append(secs)
        self.now += secs


@pytest.fixture
def clock() -> Clock:
    return Clock()


def supervisor(clock: Clock, restarts: list[str], **kwargs) -> ComponentSupervisor:  # noqa: ANN003
    sup = ComponentSupervisor(kwargs.pop("max_restart_count", 4), kwargs.pop("backoff_base_secs", 30), clock,
                              clock.sleep)
    sup.register("engine", lambda: restarts.append("engine"))
    return sup


def test_backoff_30_60_120_240_then_degraded_after_four(clock: Clock) -> None:
    restarts: list[str] = []
    sup = supervisor(clock, restarts)
    actions = []
    for wait in (30, 60, 120, 240):
        actions.append(sup.restart("engine"))
        assert sup.restart("engine").startswith("restart deferred: backoff")  # inside the backoff: no attempt
        clock.now += wait - 1
        assert "deferred" in sup.restart("engine")  # one second short
        clock.now += 1
    assert actions == [f"restarted (attempt {n}/4, backoff {s} s)" for n, s in
                       ((1, 30), (2, 60), (3, 120), (4, 240))]
    assert restarts == ["engine"] * 4
    assert sup.degraded() == {}
    assert sup.restart("engine") == "marked degraded"
    assert sup.degraded() == {"engine": "still failing after 4 restarts"}
    clock.now += 10_000
    assert sup.restart("engine").startswith("degraded (")
    assert restarts == ["engine"] * 4  # never more than max_restart_count
    assert clock.slept == []  # nothing slept in the caller's thread


def test_waiting_sleeps_out_the_backoff(clock: Clock) -> None:
    restarts: list[str] = []
    sup = supervisor(clock, restarts)
    for _ in range(5):
        sup.restart("engine", wait=True)
    assert clock.slept == [30, 60, 120, 240]  # the fifth request waits out the fourth's backoff, then degrades
    assert restarts == ["engine"] * 4 and "engine" in sup.degraded()


def test_a_failing_restart_is_an_attempt_with_its_error(clock: Clock) -> None:
    sup = ComponentSupervisor(2, 10, clock, clock.sleep)

    def broken() -> None:
        raise RuntimeError("model file missing")

    sup.register("embedder", broken)
    assert sup.restart("embedder") == "restart failed (RuntimeError: model file missing) (attempt 1/2, backoff 10 s)"
    clock.now += 10
    assert sup.restart("embedder").startswith("restart failed")
    assert sup.restart("embedder").startswith("restart deferred")
    clock.now += 20
    assert sup.restart("embedder") == "marked degraded"
    assert sup.degraded() == {"embedder": "still failing after 2 restarts; last error: RuntimeError: model file "
                                          "missing"}


def test_reset_lifts_degraded_and_starts_a_fresh_backoff(clock: Clock) -> None:
    restarts: list[str] = []
    sup = supervisor(clock, restarts, max_restart_count=1)
    sup.restart("engine")
    clock.now += 30
    assert sup.restart("engine") == "marked degraded"
    assert sup.reset("engine") is True
    assert sup.degraded() == {} and sup.attempts("engine") == 0
    assert sup.restart("engine") == "restarted (attempt 1/1, backoff 30 s)"
    assert sup.reset("bus") is False


def test_unregistered_and_zero_restarts(clock: Clock) -> None:
    restarts: list[str] = []
    sup = supervisor(clock, restarts, max_restart_count=0)
    assert sup.restart("http") == "no restart registered for http"
    assert sup.restart("engine") == "marked degraded"
    assert sup.degraded() == {"engine": "still failing after 0 restarts"}
    assert restarts == []
