"""The state of each peer (health, down period, latency, forwards in flight) and the choice of a peer.

A peer is *available* when it is not marked down and its last probe was healthy. Among the available
ones, the request's preferred peer comes first, then the lowest latency: the exponentially weighted
moving average (``mesh.latency_alpha``) of its successful forwards, a peer not measured yet counting as
0 ms so that it gets its first request and with it a measurement; ties go to fewer forwards in flight,
then to the name. A full peer (``max_concurrency`` forwards in flight) is skipped, never waited for:
:meth:`PeerState.try_acquire` does not block.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from assistant.config.extended import MeshPeer
from assistant.mesh.types import PeerStatus


class PeerState:
    """One peer's health, down period, latency EWMA and in-flight count. Times are the mesh's clock
    (epoch seconds). Thread-safe: forwards end on worker threads."""

    def __init__(self, config: MeshPeer, alpha: float):
        self.config = config
        self.alpha = alpha
        self._lock = threading.Lock()
        self.in_flight = 0
        self.healthy: bool | None = None
        self.checked_at: float | None = None
        self.down_until: float | None = None
        self.last_error: str | None = None
        self.latency_ewma_ms: float | None = None
        self.served = 0
        self.failed = 0

    @property
    def name(self) -> str:
        return self.config.name

    def is_down(self, now: float) -> bool:
        return self.down_until is not None and now < self.down_until

    def needs_probe(self, now: float, interval: float) -> bool:
        """Not down, and never probed or probed ``interval`` seconds ago or more."""
        return not self.is_down(now) and (self.checked_at is None or now - self.checked_at >= interval)

    def available(self, now: float) -> bool:
        return not self.is_down(now) and self.healthy is True

    def probed(self, now: float, error: str | None, down_secs: float) -> None:
        """The result of a health probe: ``error`` None is healthy; otherwise the peer is down for ``down_secs``."""
        with self._lock:
            self.checked_at = now
            self.healthy = error is None
            if error is None:
                self.down_until = None
            else:
                self.last_error, self.down_until = error, now + down_secs

    def try_acquire(self) -> bool:
        """Take one of the peer's ``max_concurrency`` slots; False (at once) when all are taken."""
        with self._lock:
            if self.in_flight >= self.config.max_concurrency:
                return False
            self.in_flight += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.in_flight = max(0, self.in_flight - 1)

    def succeeded(self, latency_ms: float) -> None:
        """A forward answered: fold its latency into the EWMA."""
        with self._lock:
            self.served += 1
            previous = self.latency_ewma_ms
            self.latency_ewma_ms = latency_ms if previous is None else (
                self.alpha * latency_ms + (1 - self.alpha) * previous)

    def failed_forward(self, now: float, error: str, down_secs: float) -> None:
        """A forward failed or timed out: the peer is down for ``down_secs`` and probed again after."""
        with self._lock:
            self.failed += 1
            self.healthy = False
            self.last_error, self.down_until = error, now + down_secs

    def status(self, now: float) -> PeerStatus:
        with self._lock:
            return PeerStatus(
                name=self.name, url=self.config.url, healthy=self.healthy,
                down_until=self.down_until if self.is_down(now) else None, last_error=self.last_error,
                checked_at=self.checked_at,
                latency_ewma_ms=None if self.latency_ewma_ms is None else round(self.latency_ewma_ms, 1),
                in_flight=self.in_flight, max_concurrency=self.config.max_concurrency,
                served=self.served, failed=self.failed)


def ranked(peers: Iterable[PeerState], now: float, prefer: str | None = None) -> list[PeerState]:
    """The available peers, best first: ``prefer`` first, then lowest latency EWMA (unmeasured = 0),
    fewest in flight, name."""
    return sorted((p for p in peers if p.available(now)),
                  key=lambda p: (p.name != prefer, p.latency_ewma_ms or 0.0, p.in_flight, p.name))
