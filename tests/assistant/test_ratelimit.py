"""Fixed-window rate limiting with a fake clock."""

from __future__ import annotations

import pytest

from assistant.ratelimit import RateLimiter


class Clock:
    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_120_allowed_then_refused(clock: Clock) -> None:
    limiter = RateLimiter(120, clock=clock)
    decisions = [limiter.hit("1.2.3.4") for _ in range(120)]
    assert all(d.allowed for d in decisions)
    refused = limiter.hit("1.2.3.4")
    assert not refused.allowed
    assert refused.remaining == 0
    assert refused.limit == 120
    assert refused.retry_after >= 1


def test_remaining_counts_down(clock: Clock) -> None:
    limiter = RateLimiter(5, clock=clock)
    assert [limiter.hit("c").remaining for _ in range(7)] == [4, 3, 2, 1, 0, 0, 0]


def test_window_resets_after_60_seconds(clock: Clock) -> None:
    limiter = RateLimiter(120, clock=clock)
    for _ in range(120):
        limiter.hit("c")
    clock.now += 59.5
    late = limiter.hit("c")
    assert not late.allowed
    assert late.reset_secs == 1
    assert late.retry_after == 1
    clock.now += 0.5  # 60 s after the window opened
    fresh = limiter.hit("c")
    assert fresh.allowed
    assert fresh.remaining == 119
    assert fresh.reset_secs == 60


def test_reset_counts_down_with_time(clock: Clock) -> None:
    limiter = RateLimiter(10, clock=clock)
    assert limiter.hit("c").reset_secs == 60
    clock.now += 20.2
    assert limiter.hit("c").reset_secs == 40
    clock.now += 39.7
    assert limiter.hit("c").reset_secs == 1


def test_retry_after_matches_the_window(clock: Clock) -> None:
    limiter = RateLimiter(1, clock=clock)
    limiter.hit("c")
    clock.now += 15
    refused = limiter.hit("c")
    assert not refused.allowed
    assert refused.retry_after == 45


def test_clients_are_counted_separately(clock: Clock) -> None:
    limiter = RateLimiter(2, clock=clock)
    assert limiter.hit("a").allowed and limiter.hit("a").allowed
    assert not limiter.hit("a").allowed
    assert limiter.hit("b").allowed


def test_refused_hits_do_not_extend_the_window(clock: Clock) -> None:
    limiter = RateLimiter(1, clock=clock)
    limiter.hit("c")
    for _ in range(10):
        clock.now += 5
        limiter.hit("c")
    clock.now += 10  # 60 s after the first hit
    assert limiter.hit("c").allowed


def test_old_windows_are_pruned(clock: Clock, monkeypatch: pytest.MonkeyPatch) -> None:
    from assistant import ratelimit

    monkeypatch.setattr(ratelimit, "MAX_CLIENTS", 3)
    limiter = RateLimiter(5, clock=clock)
    for client in ("a", "b", "c"):
        limiter.hit(client)
    clock.now += 61
    limiter.hit("d")
    assert set(limiter._windows) == {"d"}
