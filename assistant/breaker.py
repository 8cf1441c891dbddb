"""Circuit breakers: a backend that keeps failing is not called again until it had time to recover.

One :class:`CircuitBreaker` per backend (the LLM engine, the embedder, each tool capability, the
messenger), all kept in one :class:`Breakers` built by ``build_services``. The state machine::

    closed --(failure_threshold consecutive failures)--> open
    open --(reset_timeout_secs passed)--> half_open          (read lazily, no timer thread)
    half_open --(the one trial call succeeds)--> closed
    half_open --(the trial call fails)--> open                (for another reset_timeout_secs)

While open, :meth:`CircuitBreaker.before_call` raises :class:`CircuitOpenError` at once (a 503
``SERVICE_UNAVAILABLE`` with ``retry_after``), so callers answer fast instead of waiting for a
timeout. In half-open one trial call is let through at a time; the others are refused as if open.

Callers decide what a failure is (an engine that raised or hung, a tool backend that could not be
reached): they call :meth:`record_success` / :meth:`record_failure`, or use :meth:`call` for a
plain synchronous function. A caller's own mistakes (bad arguments, a place that does not exist)
are neither: they say nothing about the backend's health.

Written here rather than taken from ``pybreaker`` (1.4.1): pybreaker wraps synchronous calls
only (its async support needs Tornado), while the LLM call is an async generator whose outcome is
known at its end, and these tests need an injectable clock.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any, TypeVar

from assistant.errors import AssistantError, ServiceUnavailableError

T = TypeVar("T")
UNEXPECTED = "an unexpected error (details in the server log)"


def public_description(error: BaseException) -> str:
    """What a client may read about a failure: an AssistantError's message (written for clients);
    for anything else (a crash, whose text may carry internals) only that it happened."""
    if isinstance(error, AssistantError):
        return error.message
    return UNEXPECTED


class CircuitState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitOpenError(ServiceUnavailableError):
    """The backend's breaker is open: refused without calling it."""

    def __init__(self, name: str, retry_after: int, last_error: str | None = None):
        cause = f" (last error: {last_error})" if last_error else ""
        super().__init__(
            f"{name} is unavailable: it failed repeatedly and is not called again for {retry_after} s{cause}",
            {"backend": name, "retry_after": retry_after},
        )
        self.backend = name
        self.retry_after = retry_after


class CircuitBreaker:
    def __init__(self, name: str, failure_threshold: int = 5, reset_timeout_secs: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        self.name = name
        self.failure_threshold = failure_threshold
        self.reset_timeout_secs = reset_timeout_secs
        self._clock = clock
        self._lock = threading.Lock()
        self._state = CircuitState.CLOSED
        self._failures = 0  # consecutive, while closed
        self._opened_at = 0.0
        self._trial_running = False
        self.last_error: str | None = None
        self.opened_total = 0  # how often it opened (for the notebook and the logs)

    # --- state -------------------------------------------------------------------------------------

    def _current(self) -> CircuitState:  # with the lock held
        if self._state is CircuitState.OPEN and self._clock() - self._opened_at >= self.reset_timeout_secs:
            self._state = CircuitState.HALF_OPEN
            self._trial_running = False
        return self._state

    @property
    def state(self) -> CircuitState:
        with self._lock:
            return self._current()

    @property
    def consecutive_failures(self) -> int:
        with self._lock:
            return self._failures

    def retry_after(self) -> int:
        """Seconds until an open breaker lets a trial call through (at least 1)."""
        with self._lock:
            return self._retry_after_locked()

    def _retry_after_locked(self) -> int:
        return max(math.ceil(self.reset_timeout_secs - (self._clock() - self._opened_at)), 1)

    # --- protocol ------------------------------------------------------------------------------------

    def before_call(self) -> None:
        """Let a call through or raise :class:`CircuitOpenError`. In half-open only one trial runs."""
        with self._lock:
            state = self._current()
            if state is CircuitState.CLOSED:
                return
            if state is CircuitState.HALF_OPEN and not self._trial_running:
                self._trial_running = True
                return
            retry = self._retry_after_locked() if state is CircuitState.OPEN else 1
            raise CircuitOpenError(self.name, retry, self.last_error)

    def record_success(self) -> None:
        with self._lock:
            self._state = CircuitState.CLOSED
            self._failures = 0
            self._trial_running = False

    def record_failure(self, error: BaseException | str | None = None,
                       describe: Callable[[BaseException], str] = public_description) -> None:
        """Count a failure; ``error`` is kept for the refusal's message as ``describe`` puts it
        (by default never the text of an unexpected exception: it goes to clients)."""
        with self._lock:
            if error is not None:
                self.last_error = (error if isinstance(error, str) else describe(error))[:300]
            state = self._current()
            self._failures += 1
            if state is CircuitState.HALF_OPEN or self._failures >= self.failure_threshold:
                if state is not CircuitState.OPEN:
                    self.opened_total += 1
                self._state = CircuitState.OPEN
                self._opened_at = self._clock()
                self._trial_running = False

    def release_trial(self) -> None:
        """A trial call ended with neither success nor failure (cancelled, the caller's mistake):
        the next call may try again."""
        with self._lock:
            self._trial_running = False

    def call(self, func: Callable[..., T], *args: Any,
             is_failure: Callable[[BaseException], bool] = lambda exc: True,
             describe: Callable[[BaseException], str] = public_description, **kwargs: Any) -> T:
        """``func(*args, **kwargs)`` through the breaker; an exception for which ``is_failure`` is
        true counts against the backend, any other is the caller's and re-raised as is."""
        self.before_call()
        try:
            value = func(*args, **kwargs)
        except BaseException as exc:
            if isinstance(exc, Exception) and is_failure(exc):
                self.record_failure(exc, describe)
            else:
                self.release_trial()
            raise
        self.record_success()
        return value

    def reset(self) -> None:
        self.record_success()


class Breakers:
    """Every backend's breaker by name, created on first use with the same settings."""

    def __init__(self, failure_threshold: int = 5, reset_timeout_secs: float = 30.0,
                 clock: Callable[[], float] = time.monotonic):
        self.failure_threshold = failure_threshold
        self.reset_timeout_secs = reset_timeout_secs
        self._clock = clock
        self._breakers: dict[str, CircuitBreaker] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> CircuitBreaker:
        with self._lock:
            breaker = self._breakers.get(name)
            if breaker is None:
                breaker = CircuitBreaker(name, self.failure_threshold, self.reset_timeout_secs, self._clock)
                self._breakers[name] = breaker
            return breaker

    def __contains__(self, name: object) -> bool:
        return name in self._breakers

    def __iter__(self) -> Iterator[CircuitBreaker]:
        with self._lock:
            return iter(sorted(self._breakers.values(), key=lambda b: b.name))

    def states(self) -> dict[str, CircuitState]:
        return {b.name: b.state for b in self}
