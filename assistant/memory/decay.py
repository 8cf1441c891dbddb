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
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from assistant.memory.types import MemoryType

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
