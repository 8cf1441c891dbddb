"""Readiness probes with latency, cached briefly so frequent probes do not load the engine."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import httpx

from assistant.llm.base import ChatModel, Health
from assistant.storage.db import Database

SERVICE_NAMES = ("inference", "database", "cache", "messenger", "email", "calendar", "weather")


@dataclass(frozen=True)
class ServiceHealth:
    healthy: bool
    latency_ms: int | None = None
    detail: str = ""


NOT_CONFIGURED = ServiceHealth(False, None, "not configured")


class HealthProbe:
    def __init__(self, model: ChatModel, cache_secs: float = 5.0):
        self.model = model
        self.cache_secs = cache_secs
        self._cached: tuple[float, Health] | None = None
        self._lock = threading.Lock()

    def inference(self) -> Health:
        """The engine's health; probed at most once per ``cache_secs``."""
        with self._lock:
            now = time.monotonic()
            if self._cached is not None and now - self._cached[0] < self.cache_secs:
                return self._cached[1]
            health = self.model.health()
            self._cached = (time.monotonic(), health)
            return health


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

