"""Importance decay: pure functions (scalar and numpy) with the spec's per-type parameters.

    stability      = 1 + ln(1 + access_count)
    effective_rate = base_decay_rate x type_modifier / stability
    reinforcement  = min(access_count x 0.005, 0.08)
    new_importance = max(importance x e^(-effective_rate x days) + reinforcement, type_floor)

``days`` is the time since the memory's LAST decay run (or its creation), so running the cycle
twice does not charge the idle period twice. ``base_decay_rate`` comes from ``memory.decay_factor``
(0.95 by default) as -ln(decay_factor): a Context memory never accessed keeps 95 % of its
importance per day. Reinforcement is added once per run; the scheduled job runs daily. The result
is capped at 1.0, the top of importance's range (the spec's formula alone would let a often-used
memory climb past it, run after run).

Clean-up ("memories below ``min_importance`` are cleaned up"): the floors make that literal reading
dead code. Importance never goes under its type's floor, and the lowest floors (Context, ToolResult:
0.10) equal the default ``min_importance`` (0.10), so "strictly below" never holds with the
spec's own numbers. Two ways out were open: delete when the value before the floor dips below
``min_importance`` (a Context memory would then vanish the day after it reaches its floor: the
floor would protect nothing), or archive what has stayed at or below ``min_importance`` for a
while. This module takes the second:

    a memory whose importance is at or below min_importance after a decay run starts a clock
    (``low_since``, the run's time); one that rises above it (an access adds reinforcement, an
    edit raises importance) stops it; after ``cleanup_after_days`` (30) at or below, the memory
    is archived — memory_type Archived, the original type kept, ``archived_at`` set.

Why archive rather than delete: it is reversible (the memory keeps its content, can be read,
searched, changed back or deleted by its owner), it is what the spec's dream mode does to memories
at the bottom ("archive memories below their importance floor"), and it is clean-up where it
counts: an archived memory ranks at half its relevance and half its retrieval score
(``scoring.ARCHIVED_FACTOR``), so with the default ``rag_threshold`` 0.5 it never reaches a prompt
again. With the spec's numbers: a Context memory stored at 0.5 and never used reaches its floor
0.10 on day 32 (0.5 x 0.95^31 = 0.102, 0.5 x 0.95^32 = 0.097 -> 0.10) and is archived on day 62;
Fact (0.30), Preference (0.25) and Correction (0.35) floors are above 0.10, so they are never
archived with the defaults. :func:`next_low_since` and :func:`cleanup_due` are the rule;
``MemoryStore.decay`` applies them after each run, and :func:`days_until_cleanup` simulates it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from assistant.memory.types import MemoryType

SECONDS_PER_DAY = 86_400.0
# ``low_since`` of a memory the clean-up has archived (or found archived): never looked at again,
# until a merge gives it new content (and a NULL ``low_since``).
CLEANED_UP = math.inf
REINFORCEMENT_PER_ACCESS = 0.005
REINFORCEMENT_CAP = 0.08
MAX_IMPORTANCE = 1.0  # importance is defined on 0..1; reinforcement added every run could pass it


@dataclass(frozen=True)
class DecayParams:
    modifier: float
    floor: float


DECAY_PARAMS: dict[MemoryType, DecayParams] = {
    MemoryType.CORRECTION: DecayParams(0.50, 0.35),
    MemoryType.FACT: DecayParams(0.70, 0.30),
    MemoryType.PREFERENCE: DecayParams(0.80, 0.25),
    MemoryType.TOOL_RESULT: DecayParams(1.00, 0.10),
    MemoryType.CONTEXT: DecayParams(1.00, 0.10),
    # Not in the spec's table: insights decay like Context. Archived memories decay by their
    # original type; Hypothesis (30-day TTL) and Quarantined (purged after its TTL) do not decay.
    MemoryType.DREAM_INSIGHT: DecayParams(1.00, 0.10),
}
NOT_DECAYED = frozenset({MemoryType.HYPOTHESIS, MemoryType.QUARANTINED})


def base_rate_from_factor(decay_factor: float) -> float:
    """Per-day base rate such that e^(-rate) = decay_factor."""
    return -math.log(decay_factor)


def stability(access_count):
    return 1.0 + np.log1p(access_count)


def effective_rate(base_decay_rate: float, modifier, access_count):
    return base_decay_rate * modifier / stability(access_count)


def reinforcement(access_count):
    return np.minimum(np.asarray(access_count) * REINFORCEMENT_PER_ACCESS, REINFORCEMENT_CAP)


def decayed_importance(importance, memory_type: MemoryType, access_count, days, base_decay_rate: float):
    """One decay step for one memory type (scalars or arrays of the same type)."""
    params = DECAY_PARAMS[memory_type]
    rate = effective_rate(base_decay_rate, params.modifier, access_count)
    value = np.minimum(np.maximum(importance * np.exp(-rate * days) + reinforcement(access_count), params.floor),
                       MAX_IMPORTANCE)
    return float(value) if np.ndim(value) == 0 else value


def params_arrays(types: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row modifier and floor for an array of type codes (see ``TYPE_CODES``)."""
    modifiers = np.array([DECAY_PARAMS.get(t, DecayParams(1.0, 0.1)).modifier for t in TYPE_ORDER])
    floors = np.array([DECAY_PARAMS.get(t, DecayParams(1.0, 0.1)).floor for t in TYPE_ORDER])
    return modifiers[types], floors[types]


TYPE_ORDER = tuple(MemoryType)
TYPE_CODES = {t: i for i, t in enumerate(TYPE_ORDER)}


def decay_arrays(importance: np.ndarray, type_codes: np.ndarray, access_count: np.ndarray, days: np.ndarray,
                 base_decay_rate: float) -> np.ndarray:
    """Vectorised decay of many memories of mixed types (codes from ``TYPE_CODES``)."""
    modifier, floor = params_arrays(type_codes)
    rate = base_decay_rate * modifier / (1.0 + np.log1p(access_count))
    reinforced = importance * np.exp(-rate * days) + np.minimum(access_count * REINFORCEMENT_PER_ACCESS,
                                                                REINFORCEMENT_CAP)
    return np.minimum(np.maximum(reinforced, floor), MAX_IMPORTANCE)


def curve(memory_type: MemoryType, access_count: int, days: int = 90, *, base_decay_rate: float,
          importance: float = 1.0, step_days: float = 1.0) -> list[float]:
    """Importance day by day when the daily job runs ``days`` times (for plots)."""
    values = [importance]
    for _ in range(int(days / step_days)):
        values.append(decayed_importance(values[-1], memory_type, access_count, step_days, base_decay_rate))
    return values


# --- clean-up ------------------------------------------------------------------------------------


def next_low_since(importance, low_since, now: float, min_importance: float):
    """Since when each memory has been at or below ``min_importance`` after a run at ``now``
    (epoch seconds): kept when it already was, ``now`` when it has just got there, NaN (the store's
    NULL) when it is above. ``low_since`` is NaN for a memory that was above."""
    importance = np.asarray(importance, dtype=np.float64)
    low_since = np.asarray(low_since, dtype=np.float64)
    low = importance <= min_importance + 1e-12  # the floor 0.10 stored as 0.1 equals 0.1
    value = np.where(low, np.where(np.isnan(low_since), now, low_since), np.nan)
    return float(value) if np.ndim(value) == 0 else value


def cleanup_due(low_since, now: float, after_days: float):
    """Whether each memory has been at or below ``min_importance`` for ``after_days`` days."""
    low_since = np.asarray(low_since, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        due = ~np.isnan(low_since) & (now - low_since >= after_days * SECONDS_PER_DAY - 1e-6)
    return bool(due) if np.ndim(due) == 0 else due


def days_until_cleanup(memory_type: MemoryType, importance: float, *, base_decay_rate: float,
                       min_importance: float, after_days: float, access_count: int = 0,
                       horizon_days: int = 3650) -> int | None:
    """The day the daily job archives a memory left alone, or None within ``horizon_days``."""
    low_since = math.nan
    for day in range(1, horizon_days + 1):
        importance = decayed_importance(importance, memory_type, access_count, 1.0, base_decay_rate)
        now = day * SECONDS_PER_DAY
        low_since = next_low_since(importance, low_since, now, min_importance)
        if cleanup_due(low_since, now, after_days):
            return day
    return None
