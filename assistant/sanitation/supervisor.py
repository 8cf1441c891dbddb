"""Component restarts with exponential backoff, then ``degraded`` (reported by ``/ready``).

A severe anomaly asks :meth:`ComponentSupervisor.restart` for the component it is attributed to
(``engine``, ``embedder``, ``bus``; ``http`` has no restart). Attempt ``k`` (1-based) runs the
registered callable and opens a backoff of ``backoff_base_secs x 2^(k-1)`` (30, 60, 120, 240 s
with the defaults): a request inside the backoff is deferred, not slept on, so a request or dream
thread never blocks (``wait=True`` sleeps out the backoff with the injected ``sleep`` instead, for a
caller that owns its thread). Once ``max_restart_count`` attempts are spent and the last one's
backoff has passed, the next request marks the component degraded: no more restarts until
:meth:`reset` (the anomaly monitor resets a component whose window is clean again). A callable that raises counts as an attempt; its error is the reason.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class RestartState:
    attempts: int = 0
    next_allowed: float = 0.0  # clock time before which a new attempt is deferred
    degraded: str | None = None  # the reason, once degraded
    last_error: str | None = None


class ComponentSupervisor:
    def __init__(self, max_restart_count: int = 4, backoff_base_secs: float = 30.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.max_restart_count = max(0, int(max_restart_count))
        self.backoff_base_secs = max(0.0, float(backoff_base_secs))
        self._clock = clock
        self._sleep = sleep
        self._restarts: dict[str, Callable[[], object]] = {}
        self._state: dict[str, RestartState] = {}
        self._lock = threading.Lock()

    def register(self, component: str, restart: Callable[[], object]) -> None:
        """``restart`` reloads ``component`` (e.g. the engine's model, the embedder, the bus client)."""
        self._restarts[component] = restart

    def backoff(self, attempt: int) -> float:
        """The wait opened by attempt ``attempt`` (1-based): base x 2^(attempt - 1)."""
        return self.backoff_base_secs * 2 ** max(0, attempt - 1)

    def restart(self, component: str, *, wait: bool = False) -> str:
        """Restart ``component`` if its backoff allows; what was done, as a sentence for the record."""
        restart = self._restarts.get(component)
        if restart is None:
            return f"no restart registered for {component}"
        with self._lock:
            state = self._state.setdefault(component, RestartState())
            if state.degraded is not None:
                return f"degraded ({state.degraded})"
            remaining = state.next_allowed - self._clock()
            if remaining > 0 and not wait:  # the last attempt still has its backoff to prove itself
                return f"restart deferred: backoff, {remaining:.0f} s left"
        if remaining > 0:
            self._sleep(remaining)
        with self._lock:
            if state.attempts >= self.max_restart_count:
                state.degraded = (f"still failing after {state.attempts} restart"
                                  f"{'' if state.attempts == 1 else 's'}"
                                  + (f"; last error: {state.last_error}" if state.last_error else ""))
                log.warning("component %s marked degraded: %s", component, state.degraded)
                return "marked degraded"
            state.attempts += 1
            attempt = state.attempts
            state.next_allowed = self._clock() + self.backoff(attempt)
        try:
            restart()
            state.last_error = None
            outcome = "restarted"
        except Exception as exc:  # a failed restart is an attempt; the component is not healthier
            log.exception("restart of %s failed", component)
            state.last_error = f"{type(exc).__name__}: {exc}"[:200]
            outcome = f"restart failed ({state.last_error})"
        return f"{outcome} (attempt {attempt}/{self.max_restart_count}, backoff {self.backoff(attempt):.0f} s)"

    def attempts(self, component: str) -> int:
        state = self._state.get(component)
        return 0 if state is None else state.attempts

    def components(self) -> dict[str, dict[str, object]]:
        """Every registered component: its restart attempts, the last restart's error, whether it is
        degraded and why (the immune status view)."""
        with self._lock:
            states = {c: self._state.get(c, RestartState()) for c in sorted(self._restarts)}
            return {c: {"attempts": s.attempts, "max_attempts": self.max_restart_count, "last_error": s.last_error,
                        "degraded": s.degraded is not None, "degraded_reason": s.degraded} for c, s in states.items()}

    def degraded(self) -> dict[str, str]:
        """component -> why it is degraded (the body of ``/ready``)."""
        with self._lock:
            return {c: s.degraded for c, s in sorted(self._state.items()) if s.degraded is not None}

    def reset(self, component: str) -> bool:
        """Forget ``component``'s attempts and degradation; whether there was anything to forget."""
        with self._lock:
            return self._state.pop(component, None) is not None
