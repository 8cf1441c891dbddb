"""Engine sizes chosen from the machine: threads from physical cores, batch sizes from memory.

llama.cpp's matrix kernels keep a core's vector units busy, so a second hyper-thread on the same
core adds contention, not speed: the default thread count is the number of *physical* cores this
process may run on (its CPU affinity, capped by a cgroup CPU quota), not the logical CPU count.
``inference.threads`` / ``inference.batch_threads`` override it.

Batch sizes: llama.cpp evaluates a prompt in micro-batches of ``n_ubatch`` tokens; its compute
buffer grows with it. 512 (llama.cpp's default) where memory allows, smaller on small boards (a
4 GB Raspberry Pi); never above the context. ``inference.batch_size`` / ``ubatch_size`` override.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

GIB = 2**30


@dataclass(frozen=True)
class EngineSizes:
    threads: int
    batch_threads: int
    batch_size: int
    ubatch_size: int


def allowed_cpus() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


def physical_cores(cpuinfo: str | None = None, allowed: set[int] | None = None,
                   quota: float | None = None) -> int:
    """Distinct (package, core) pairs among the CPUs this process may use; at least 1."""
    allowed = allowed_cpus() if allowed is None else allowed
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    cores: set[tuple[str, str]] = set()
    seen_topology = False
    for block in cpuinfo.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if "processor" not in fields or not fields["processor"].isdigit():
            continue
        if int(fields["processor"]) not in allowed:
            continue
        if "core id" in fields:
            seen_topology = True
            cores.add((fields.get("physical id", "0"), fields["core id"]))
        else:
            cores.add(("cpu", fields["processor"]))  # ARM lists no topology: one core per CPU
    if not seen_topology and not cores:
        count = psutil.cpu_count(logical=False) or len(allowed) or 1
    else:
        count = len(cores)
    quota = cgroup_cpu_quota() if quota is None else quota
    if quota and quota > 0:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, min(count, len(allowed) or count))


def cgroup_cpu_quota(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> float | None:
    """CPUs the cgroup (v2) grants, e.g. 1.5 for ``150000 100000``; None without a limit."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def default_ubatch(total_memory: int) -> int:
    if total_memory >= 8 * GIB:
        return 512
    if total_memory >= 4 * GIB:
        return 256
    return 128


def engine_sizes(*, threads: int | None, batch_threads: int | None, batch_size: int | None,
                 ubatch_size: int | None, context_length: int, total_memory: int | None = None,
                 cores: int | None = None) -> EngineSizes:
    """The settings where given, the machine's figures where not."""
    if cores is None and threads is None:
        cores = physical_cores()
    total_memory = psutil.virtual_memory().total if total_memory is None else total_memory
    n_threads = threads or cores or 1
    ubatch = min(ubatch_size or default_ubatch(total_memory), context_length)
    batch = min(batch_size or max(ubatch, 512), context_length)
    return EngineSizes(threads=n_threads, batch_threads=batch_threads or n_threads,
                       batch_size=batch, ubatch_size=min(ubatch, batch))
