"""Measurement helpers shared by the benchmarks."""

from __future__ import annotations

import resource


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MB."""
    current = 0.0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    return current, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
