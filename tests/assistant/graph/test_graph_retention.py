"""Ebbinghaus retention with the spec's numbers: base stability 1.0 day, recall bonus 1.5, threshold 0.1."""

from __future__ import annotations

import math

import numpy as np
import pytest

from assistant.config import KnowledgeVisualizationSettings, MemorySettings
from assistant.graph import retention as R


def test_the_spec_defaults() -> None:
    memory = MemorySettings()
    assert (memory.ebbinghaus_base_stability, memory.recall_bonus) == (R.BASE_STABILITY, R.RECALL_BONUS) == (1.0, 1.5)
    assert KnowledgeVisualizationSettings().min_retention_threshold == R.MIN_RETENTION == 0.1
    assert KnowledgeVisualizationSettings().max_nodes == 5000


@pytest.mark.parametrize(("days", "stability", "expected"), [
    (0, 1.0, 1.0), (1, 1.0, math.exp(-1)), (2, 1.0, math.exp(-2)), (3, 1.5, math.exp(-2)), (-5, 1.0, 1.0),
])
def test_retention_is_e_to_the_minus_t_over_s(days: float, stability: float, expected: float) -> None:
    assert R.retention(days, stability) == pytest.approx(expected)


def test_each_recall_multiplies_stability_by_the_bonus() -> None:
    assert R.stability(0) == 1.0 and R.stability(1) == 1.5 and R.stability(3) == pytest.approx(3.375)
    assert R.stability(2, base=2.0, bonus=2.0) == 8.0
    np.testing.assert_allclose(R.stability(np.arange(3)), [1.0, 1.5, 2.25])


def test_days_until_the_threshold() -> None:
    assert R.days_until(0.1, 1.0) == pytest.approx(math.log(10))  # 2.30 days without a recall
    assert R.days_until(0.1, 1.5) == pytest.approx(1.5 * math.log(10))
    with pytest.raises(ValueError):
        R.days_until(1.0, 1.0)


def test_retention_at_epoch_seconds() -> None:
    assert R.retention_at(R.DAY * 3, R.DAY, 2.0) == pytest.approx(math.exp(-1))


def test_the_curve_resets_at_each_recall_and_fades_slower_after() -> None:
    t, r = R.curve([1.0, 3.0], days=6, step=0.5)
    assert t[0] == 0 and t[-1] == 6 and r[0] == 1.0
    assert r[t.tolist().index(1.0)] == 1.0 and r[t.tolist().index(3.0)] == 1.0  # recalled: back to 1
    assert r[t.tolist().index(0.5)] == pytest.approx(math.exp(-0.5))  # S = 1
    assert r[t.tolist().index(1.5)] == pytest.approx(math.exp(-0.5 / 1.5))  # S = 1.5 after one recall
    assert r[t.tolist().index(6.0)] == pytest.approx(math.exp(-3 / 2.25))  # S = 2.25 after two
    never = R.curve([], days=6, step=0.5)[1]
    assert (r[t > 3] > never[t > 3]).all()
