"""Real figures about the running process, for /v1/system/status."""

from __future__ import annotations

import time

import psutil

import assistant


class SystemMonitor:
    def __init__(self) -> None:
        self.process = psutil.Process()
        self.process.cpu_percent(None)  # prime: the next call measures since now
        self.started = time.monotonic()

    def uptime_seconds(self) -> int:
        return int(time.monotonic() - self.started)

    def memory_used_mb(self) -> float:
        return round(self.process.memory_info().rss / 2**20, 1)

    def cpu_percent(self) -> float:
        """CPU use of this process since the previous call (100 = one core busy)."""
        return float(self.process.cpu_percent(None))

    @staticmethod
    def version() -> str:
        return assistant.__version__
