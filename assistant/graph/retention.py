"""Ebbinghaus retention of graph nodes and edges: pure functions to call and plot.

R = e^(-t/S): ``t`` days since the node (or edge) was last seen, ``S`` its stability in days. S
starts at ``memory.ebbinghaus_base_stability`` (1.0) and is multiplied by ``memory.recall_bonus``
(1.5) at each recall: a memory that mentions it is written again or retrieved. So after ``n``
recalls S = base x bonus^n, and a node recalled often fades slowly. A node under
``knowledge_visualization.min_retention_threshold`` (0.1) is hidden from the graph endpoint, not
deleted (dream mode prunes or merges it).

Everything accepts numpy arrays as well as floats.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DAY = 86_400.0
BASE_STABILITY = 1.0  # memory.ebbinghaus_base_stability
RECALL_BONUS = 1.5  # memory.recall_bonus
MIN_RETENTION = 0.1  # knowledge_visualization.min_retention_threshold


def retention(days: float | np.ndarray, stability: float | np.ndarray) -> float | np.ndarray:
    """R = e^(-t/S); ``t`` below 0 (a clock step back) counts as 0."""
    t = np.maximum(np.asarray(days, dtype=np.float64), 0.0)
    r = np.exp(-t / np.asarray(stability, dtype=np.float64))
    return float(r) if r.ndim == 0 else r


def stability(recalls: int | np.ndarray, base: float = BASE_STABILITY,
              bonus: float = RECALL_BONUS) -> float | np.ndarray:
    """S after ``recalls`` recalls: base x bonus^recalls."""
    s = base * np.power(float(bonus), np.asarray(recalls, dtype=np.float64))
    return float(s) if s.ndim == 0 else s


def retention_at(now: float | np.ndarray, last_seen: float | np.ndarray,
                 stability_days: float | np.ndarray) -> float | np.ndarray:
    """Retention at epoch ``now`` of something last seen at epoch ``last_seen``."""
    return retention((np.asarray(now, dtype=np.float64) - np.asarray(last_seen, dtype=np.float64)) / DAY,
                     stability_days)


def days_until(threshold: float, stability_days: float) -> float:
    """Days after the last recall until retention falls to ``threshold``: t = -S ln(threshold)."""
    if not 0.0 < threshold < 1.0:
        raise ValueError("threshold must be between 0 and 1 (exclusive)")
    return float(-stability_days * np.log(threshold))


def curve(recall_days: Sequence[float], days: float, *, base: float = BASE_STABILITY,
          bonus: float = RECALL_BONUS, step: float = 0.25) -> tuple[np.ndarray, np.ndarray]:
    """Retention over ``days`` for a node first seen at day 0 and recalled on ``recall_days``.

    Returns (t, R) sampled every ``step`` days: each recall resets t to 0 and multiplies S by
    ``bonus``, the saw-tooth of a spaced-repetition curve."""
    t = np.arange(0.0, days + step / 2, step)
    recalls = np.sort(np.asarray([d for d in recall_days if 0 <= d <= days], dtype=np.float64))
    count = np.searchsorted(recalls, t, side="right")  # recalls at or before each t
    last = np.concatenate([[0.0], recalls])[count]
    return t, np.asarray(retention(t - last, stability(count, base, bonus)))
