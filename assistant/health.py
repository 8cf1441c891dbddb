"""Readiness probes with latency, cached briefly so frequent probes do not load the engine.

``/ready`` probes the engine at most once per ``inference.health_cache_secs`` and lists the components
that sanitation's supervisor marked degraded (:attr:`HealthProbe.degraded`). ``/ready/all`` probes
every service (some of them outbound: the messenger's API, the IMAP server, the calendar, the
weather service) at most once per ``server.readiness_cache_secs`` for all clients together: the
probes of one round run concurrently, and requests that arrive while a round runs wait for it
instead of starting their own. Its own per-client-IP limit (``server.readiness_rpm``, the
:attr:`HealthProbe.limiter`) answers 429 beyond that; it is separate from the API's rate limit,
which exempts the health routes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from assistant.llm.base import ChatModel, Health
from assistant.ratelimit import RateLimiter
from assistant.storage.db import Database

SERVICE_NAMES = ("inference", "database", "cache", "messenger", "email", "calendar", "weather", "embedder")


@dataclass(frozen=True)
class ServiceHealth:
    healthy: bool
    latency_ms: int | None = None
    detail: str = ""
    circuit: str | None = None  # the backend's breaker: closed, open or half_open (None: it has none)


NOT_CONFIGURED = ServiceHealth(False, None, "not configured")


class HealthProbe:
    def __init__(self, model: ChatModel, cache_secs: float = 5.0, *, all_cache_secs: float = 5.0,
                 rpm: int = 60, clock: Callable[[], float] = time.monotonic):
        self.model = model
        self.cache_secs = cache_secs
        self.all_cache_secs = all_cache_secs
        self.limiter = RateLimiter(rpm, clock)
        self._clock = clock
        self._cached: tuple[float, Health] | None = None
        self._lock = threading.Lock()
        self._all: tuple[float, dict[str, ServiceHealth]] | None = None
        self._all_lock = threading.Lock()
        self.rounds = 0  # probe rounds run by ``all`` (the cache's misses)
        # component -> reason, for ``/ready`` (build_services sets it to the sanitation supervisor's
        # ``degraded``: components that still failed after their restarts with backoff)
        self.degraded: Callable[[], dict[str, str]] | None = None

    def degraded_components(self) -> dict[str, str]:
        """The degraded components with their reasons ({} when none, or when nobody supervises)."""
        if self.degraded is None:
            return {}
        try:
            return {str(k): str(v) for k, v in self.degraded().items()}
        except Exception as exc:  # readiness never fails on its reporter
            return {"supervisor": f"unreadable: {type(exc).__name__}: {exc}"[:300]}

    def all(self, probes: Mapping[str, Callable[[], ServiceHealth]]) -> dict[str, ServiceHealth]:
        """Every probe's result, run concurrently at most once per ``all_cache_secs``."""
        with self._all_lock:  # one round at a time; the others wait and read its result
            cached = self._all
            if cached is not None and self._clock() - cached[0] < self.all_cache_secs:
                return dict(cached[1])
            self.rounds += 1
            with ThreadPoolExecutor(max_workers=max(len(probes), 1), thread_name_prefix="probe") as pool:
                futures = {name: pool.submit(_safe, probe) for name, probe in probes.items()}
                report = {name: future.result() for name, future in futures.items()}
            self._all = (self._clock(), report)
            return dict(report)

    def inference(self) -> Health:
        """The engine's health; probed at most once per ``cache_secs``."""
        with self._lock:
            now = self._clock()
            if self._cached is not None and now - self._cached[0] < self.cache_secs:
                return self._cached[1]
            health = self.model.health()
            self._cached = (self._clock(), health)
            return health


def _safe(probe: Callable[[], ServiceHealth]) -> ServiceHealth:
    try:
        return probe()
    except Exception as exc:  # a probe that breaks reports the service as unhealthy, never raises
        return ServiceHealth(False, None, f"probe failed: {type(exc).__name__}: {exc}"[:300])


def timed(check: Callable[[], str]) -> ServiceHealth:
    """A local check as a ServiceHealth: healthy with its latency and the detail it returns, or
    unhealthy with the exception's message."""
    start = time.perf_counter()
    try:
        detail = check()
    except Exception as exc:
        return ServiceHealth(False, None, str(exc)[:300] or type(exc).__name__)
    return ServiceHealth(True, round((time.perf_counter() - start) * 1000), detail)


def database_health(db: Database) -> ServiceHealth:
    start = time.perf_counter()
    try:
        db.ping()
    except Exception as exc:  # a broken database is reported, not raised
        return ServiceHealth(False, None, str(exc))
    return ServiceHealth(True, round((time.perf_counter() - start) * 1000))


def http_health(url: str, timeout_secs: float = 2.0) -> ServiceHealth:
    start = time.perf_counter()
    try:
        response = httpx.get(url, timeout=timeout_secs)
    except httpx.HTTPError as exc:
        return ServiceHealth(False, None, str(exc))
    latency = round((time.perf_counter() - start) * 1000)
    return ServiceHealth(response.status_code < 500, latency, f"HTTP {response.status_code}")


def tcp_health(host: str, port: int, timeout_secs: float = 2.0) -> ServiceHealth:
    """Reachability of a non-HTTP service (IMAP): the latency of a TCP connect."""
    import socket

    start = time.perf_counter()
    try:
        with socket.create_connection((host, port), timeout=timeout_secs):
            pass
    except OSError as exc:
        return ServiceHealth(False, None, f"{host}:{port} unreachable: {exc}")
    return ServiceHealth(True, round((time.perf_counter() - start) * 1000), f"{host}:{port} accepts connections")

