"""The circuit breaker's state machine, driven by a fake clock."""

from __future__ import annotations

import pytest

from assistant.breaker import Breakers, CircuitBreaker, CircuitOpenError, CircuitState
from assistant.errors import ServiceUnavailableError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def fail() -> None:
    raise OSError("connection refused")


def test_opens_after_the_threshold_of_consecutive_failures() -> None:
    breaker = CircuitBreaker("engine", failure_threshold=3, reset_timeout_secs=10, clock=Clock())
    for _ in range(2):
        with pytest.raises(OSError):
            breaker.call(fail)
    assert breaker.state is CircuitState.CLOSED
    assert breaker.consecutive_failures == 2
    with pytest.raises(OSError):
        breaker.call(fail)
    assert breaker.state is CircuitState.OPEN
    assert breaker.opened_total == 1


def test_a_success_resets_the_count() -> None:
    breaker = CircuitBreaker("engine", failure_threshold=2, clock=Clock())
    with pytest.raises(OSError):
        breaker.call(fail)
    assert breaker.call(lambda: 42) == 42
    with pytest.raises(OSError):
        breaker.call(fail)
    assert breaker.state is CircuitState.CLOSED


def test_open_refuses_at_once_without_calling() -> None:
    clock = Clock()
    breaker = CircuitBreaker("weather", failure_threshold=1, reset_timeout_secs=30, clock=clock)
    with pytest.raises(OSError):
        breaker.call(fail)
    calls = []
    clock.now += 10
    with pytest.raises(CircuitOpenError) as caught:
        breaker.call(calls.append, 1)
    assert calls == []
    assert isinstance(caught.value, ServiceUnavailableError)  # 503 SERVICE_UNAVAILABLE in the API
    assert caught.value.retry_after == 20
    assert caught.value.details == {"backend": "weather", "retry_after": 20}
    assert "connection refused" not in caught.value.message  # a crash's text stays in the log
    assert "unexpected error" in caught.value.message


def test_an_assistant_errors_message_is_kept_for_the_refusal() -> None:
    from assistant.errors import UpstreamError

    breaker = CircuitBreaker("engine", failure_threshold=1, clock=Clock())
    breaker.record_failure(UpstreamError("ollama: model not found"))
    with pytest.raises(CircuitOpenError, match="last error: ollama: model not found"):
        breaker.before_call()


def test_half_open_after_the_cool_down_then_closed_on_success() -> None:
    clock = Clock()
    breaker = CircuitBreaker("engine", failure_threshold=1, reset_timeout_secs=30, clock=clock)
    with pytest.raises(OSError):
        breaker.call(fail)
    clock.now += 30
    assert breaker.state is CircuitState.HALF_OPEN
    assert breaker.call(lambda: "ok") == "ok"
    assert breaker.state is CircuitState.CLOSED
    assert breaker.consecutive_failures == 0


def test_half_open_trial_failure_opens_again_for_a_full_cool_down() -> None:
    clock = Clock()
    breaker = CircuitBreaker("engine", failure_threshold=3, reset_timeout_secs=30, clock=clock)
    for _ in range(3):
        with pytest.raises(OSError):
            breaker.call(fail)
    clock.now += 31
    with pytest.raises(OSError):
        breaker.call(fail)  # one failure is enough in half-open
    assert breaker.state is CircuitState.OPEN
    assert breaker.retry_after() == 30
    assert breaker.opened_total == 2


def test_half_open_lets_one_trial_through_at_a_time() -> None:
    clock = Clock()
    breaker = CircuitBreaker("engine", failure_threshold=1, reset_timeout_secs=5, clock=clock)
    breaker.record_failure("down")
    clock.now += 5
    breaker.before_call()  # the trial
    with pytest.raises(CircuitOpenError):
        breaker.before_call()  # a second caller while the trial runs
    breaker.release_trial()  # the trial ended with neither verdict (cancelled)
    breaker.before_call()
    breaker.record_success()
    assert breaker.state is CircuitState.CLOSED


def test_the_callers_own_errors_do_not_count() -> None:
    breaker = CircuitBreaker("tool", failure_threshold=1, clock=Clock())

    def bad_input() -> None:
        raise ValueError("no place called Xyz")

    with pytest.raises(ValueError):
        breaker.call(bad_input, is_failure=lambda exc: not isinstance(exc, ValueError))
    assert breaker.state is CircuitState.CLOSED


def test_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker("x", failure_threshold=0)


def test_breakers_share_settings_and_list_states() -> None:
    breakers = Breakers(failure_threshold=1, reset_timeout_secs=60, clock=Clock())
    assert breakers.get("inference") is breakers.get("inference")
    breakers.get("embedder").record_failure("x")
    assert breakers.states() == {"embedder": CircuitState.OPEN, "inference": CircuitState.CLOSED}
    assert "embedder" in breakers and "tool:weather" not in breakers
