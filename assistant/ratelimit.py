"""Per-client fixed-window rate limiting (requests per minute).

A window opens at a client's first request and lasts 60 s; ``reset_secs`` is the time until it
closes. Fixed windows keep the headers exact and cheap (one dict entry per client).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

WINDOW_SECS = 60.0
MAX_CLIENTS = 100_000


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_secs: int

    @property
    def retry_after(self) -> int:
        return max(self.reset_secs, 1)


class RateLimiter:
    def __init__(self, rpm: int, clock: Callable[[], float] = time.monotonic):
        self.rpm = rpm
        self._clock = clock
        self._windows: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def hit(self, client: str) -> Decision:
        now = self._clock()
        with self._lock:
            start, count = self._windows.get(client, (now, 0))
            if now - start >= WINDOW_SECS:
                start, count = now, 0
            allowed = count < self.rpm
            if allowed:
                count += 1
            self._windows[client] = (start, count)
            if len(self._windows) > MAX_CLIENTS:
                self._prune(now)
        reset = math.ceil(WINDOW_SECS - (now - start))
        return Decision(allowed, self.rpm, max(self.rpm - count, 0), reset)

    def _prune(self, now: float) -> None:
        for client in [c for c, (s, _) in self._windows.items() if now - s >= WINDOW_SECS]:
            del self._windows[client]
