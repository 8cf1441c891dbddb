"""How a cycle's time divides between NREM and REM: a pure function of the cycle number.

Early cycles favour NREM (consolidation), later ones REM (synthesis), as in a night's sleep. For
``cycles`` cycles, cycle ``c`` (1-based) gives NREM the share

    nrem(c) = FIRST - (FIRST - LAST) x (c - 1) / (cycles - 1)        (0.8 -> 0.2 linearly)

and REM ``1 - nrem(c)``: the two always sum to 100 %. One cycle splits 0.5 / 0.5. With the default 5
cycles: 80/20, 65/35, 50/50, 35/65, 20/80. A cycle's time is ``max_duration_hours / max_cycles``; a
phase that reaches its share stops between two operations and the rest of its plan waits for the
next cycle (or night).
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_NREM = 0.8
LAST_NREM = 0.2


@dataclass(frozen=True)
class CycleBudget:
    cycle: int
    nrem_share: float
    rem_share: float
    nrem_seconds: float
    rem_seconds: float


def nrem_share(cycle: int, cycles: int) -> float:
    if cycles < 1 or not 1 <= cycle <= cycles:
        raise ValueError(f"cycle must be in 1..{cycles} (got {cycle})")
    if cycles == 1:
        return 0.5
    return FIRST_NREM - (FIRST_NREM - LAST_NREM) * (cycle - 1) / (cycles - 1)


def split(cycle: int, cycles: int, cycle_seconds: float = 0.0) -> CycleBudget:
    share = nrem_share(cycle, cycles)
    return CycleBudget(cycle, share, 1.0 - share, cycle_seconds * share, cycle_seconds * (1.0 - share))


def plan(cycles: int, max_duration_hours: float) -> list[CycleBudget]:
    """Every cycle's budget for a session (what the notebook plots)."""
    seconds = max_duration_hours * 3600.0 / cycles
    return [split(c, cycles, seconds) for c in range(1, cycles + 1)]
