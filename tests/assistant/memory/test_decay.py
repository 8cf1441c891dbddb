"""Importance decay against hand-computed values of the spec's formula.

    stability      = 1 + ln(1 + access_count)
    effective_rate = base_decay_rate x type_modifier / stability
    reinforcement  = min(access_count x 0.005, 0.08)
    new_importance = max(importance x e^(-effective_rate x days) + reinforcement, type_floor)

with base_decay_rate = -ln(decay_factor) and decay_factor 0.95 (the memory configuration default).
Every expected number below is written out from the spec (its per-type table is copied here, not
imported), so a change of the package's constants fails these tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from assistant.config import MemorySettings
from assistant.memory.decay import (
    DECAY_PARAMS,
    TYPE_CODES,
    base_rate_from_factor,
    cleanup_due,
    curve,
    days_until_cleanup,
    decay_arrays,
    decayed_importance,
    effective_rate,
    next_low_since,
    reinforcement,
    stability,
)
from assistant.memory.types import MemoryType

DECAY_FACTOR = 0.95
BASE = -math.log(DECAY_FACTOR)  # 0.0512932943875505...

# The spec's table: type -> (decay modifier, importance floor).
SPEC_TABLE = {
    MemoryType.CORRECTION: (0.50, 0.35),
    MemoryType.FACT: (0.70, 0.30),
    MemoryType.PREFERENCE: (0.80, 0.25),
    MemoryType.TOOL_RESULT: (1.00, 0.10),
    MemoryType.CONTEXT: (1.00, 0.10),
}
TYPES = list(SPEC_TABLE)


def by_hand(importance: float, memory_type: MemoryType, access_count: int, days: float) -> float:
    """The spec's formula, written out with math.exp and math.log; the result stays within
    importance's range 0..1 (the spec's formula alone could pass 1.0 through reinforcement)."""
    modifier, floor = SPEC_TABLE[memory_type]
    stab = 1.0 + math.log(1.0 + access_count)
    rate = BASE * modifier / stab
    reinforce = min(access_count * 0.005, 0.08)
    return min(max(importance * math.exp(-rate * days) + reinforce, floor), 1.0)


# --- constants ------------------------------------------------------------------------------------


def test_base_rate_is_minus_ln_of_the_default_decay_factor() -> None:
    assert MemorySettings().decay_factor == 0.95
    assert base_rate_from_factor(0.95) == pytest.approx(0.05129329438755058, abs=1e-15)
    assert math.exp(-base_rate_from_factor(0.95)) == pytest.approx(0.95, abs=1e-15)
    assert base_rate_from_factor(0.9) == pytest.approx(0.10536051565782628, abs=1e-15)


@pytest.mark.parametrize("memory_type", TYPES, ids=str)
def test_per_type_parameters_are_the_spec_table(memory_type: MemoryType) -> None:
    modifier, floor = SPEC_TABLE[memory_type]
    assert DECAY_PARAMS[memory_type].modifier == modifier
    assert DECAY_PARAMS[memory_type].floor == floor


def test_stability_reinforcement_and_effective_rate_pieces() -> None:
    assert stability(0) == 1.0
    assert stability(1) == pytest.approx(1.0 + 0.6931471805599453)
    assert stability(9) == pytest.approx(1.0 + math.log(10.0))
    assert reinforcement(0) == 0.0
    assert reinforcement(1) == pytest.approx(0.005)
    assert reinforcement(10) == pytest.approx(0.05)
    assert effective_rate(BASE, 0.7, 0) == pytest.approx(BASE * 0.7)
    assert effective_rate(BASE, 0.5, 4) == pytest.approx(BASE * 0.5 / (1.0 + math.log(5.0)))


# --- one step, every type --------------------------------------------------------------------------


@pytest.mark.parametrize("memory_type", TYPES, ids=str)
@pytest.mark.parametrize(
    ("importance", "access_count", "days"),
    [(0.9, 0, 1.0), (0.9, 0, 7.0), (0.8, 3, 10.0), (1.0, 10, 30.0), (0.6, 1, 0.5), (0.75, 16, 45.0)],
)
def test_one_step_matches_the_formula_for_every_type(memory_type, importance, access_count, days) -> None:
    expected = by_hand(importance, memory_type, access_count, days)
    assert decayed_importance(importance, memory_type, access_count, days, BASE) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("memory_type", "expected"),
    [
        # Never accessed: e^(-BASE x modifier x days) = 0.95^(modifier x days); importance 0.9, 10 days.
        (MemoryType.CORRECTION, 0.9 * 0.95 ** 5.0),    # 0.69833...
        (MemoryType.FACT, 0.9 * 0.95 ** 7.0),          # 0.62850...
        (MemoryType.PREFERENCE, 0.9 * 0.95 ** 8.0),    # 0.59708...
        (MemoryType.TOOL_RESULT, 0.9 * 0.95 ** 10.0),  # 0.53891...
        (MemoryType.CONTEXT, 0.9 * 0.95 ** 10.0),
    ],
    ids=str,
)
def test_never_accessed_ten_days_literal_values(memory_type: MemoryType, expected: float) -> None:
    assert decayed_importance(0.9, memory_type, 0, 10.0, BASE) == pytest.approx(expected, abs=1e-12)


def test_context_one_day_keeps_95_percent() -> None:
    assert decayed_importance(1.0, MemoryType.CONTEXT, 0, 1.0, BASE) == pytest.approx(0.95, abs=1e-12)
    assert decayed_importance(0.5, MemoryType.TOOL_RESULT, 0, 1.0, BASE) == pytest.approx(0.475, abs=1e-12)


def test_accessed_memory_literal_value() -> None:
    # Fact, importance 0.8, 3 accesses, 10 days:
    # stability = 1 + ln 4 = 2.386294361; rate = 0.051293294 x 0.7 / 2.386294361 = 0.015046402
    # 0.8 x e^(-0.15046402) = 0.8 x 0.860307 = 0.688246; + reinforcement 0.015 = 0.703246
    stab = 1.0 + math.log(4.0)
    rate = -math.log(0.95) * 0.7 / stab
    assert decayed_importance(0.8, MemoryType.FACT, 3, 10.0, BASE) == pytest.approx(
        0.8 * math.exp(-rate * 10.0) + 0.015, abs=1e-12
    )
    assert decayed_importance(0.8, MemoryType.FACT, 3, 10.0, BASE) == pytest.approx(0.703246, abs=1e-6)


def test_more_accesses_decay_slower() -> None:
    values = [decayed_importance(0.9, MemoryType.CONTEXT, n, 20.0, BASE) - min(n * 0.005, 0.08) for n in range(6)]
    assert values == sorted(values)
    assert len(set(values)) == len(values)


def test_zero_days_adds_only_reinforcement() -> None:
    for n in (0, 1, 5, 12):
        assert decayed_importance(0.5, MemoryType.FACT, n, 0.0, BASE) == pytest.approx(0.5 + 0.005 * n, abs=1e-12)


# --- floors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("memory_type", TYPES, ids=str)
def test_floor_is_reached_after_a_long_time(memory_type: MemoryType) -> None:
    _, floor = SPEC_TABLE[memory_type]
    assert decayed_importance(0.95, memory_type, 0, 3650.0, BASE) == floor


@pytest.mark.parametrize("memory_type", TYPES, ids=str)
def test_floor_lifts_an_importance_already_below_it(memory_type: MemoryType) -> None:
    _, floor = SPEC_TABLE[memory_type]
    assert decayed_importance(0.05, memory_type, 0, 1.0, BASE) == floor


def test_floors_differ_per_type_for_the_same_input() -> None:
    got = {t: decayed_importance(0.9, t, 0, 400.0, BASE) for t in TYPES}
    assert got == {
        MemoryType.CORRECTION: 0.35,
        MemoryType.FACT: 0.30,
        MemoryType.PREFERENCE: 0.25,
        MemoryType.TOOL_RESULT: 0.10,
        MemoryType.CONTEXT: 0.10,
    }


def test_reinforcement_is_added_before_the_floor_comparison() -> None:
    # 0.3 x e^(-BASE x 200) is tiny; + 0.08 (capped) = 0.08000... < Context floor 0.10 -> 0.10
    assert decayed_importance(0.3, MemoryType.CONTEXT, 30, 2000.0, BASE) == 0.10
    # Correction, 20 accesses, 1 day: 0.4 x e^(-rate) + 0.08 is above 0.35
    stab = 1.0 + math.log(21.0)
    expected = 0.4 * math.exp(-BASE * 0.5 / stab) + 0.08
    assert expected > 0.35
    assert decayed_importance(0.4, MemoryType.CORRECTION, 20, 1.0, BASE) == pytest.approx(expected, abs=1e-12)


# --- reinforcement cap -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("access_count", "bonus"), [(0, 0.0), (1, 0.005), (8, 0.04), (15, 0.075), (16, 0.08), (17, 0.08), (40, 0.08), (1000, 0.08)]
)
def test_reinforcement_caps_at_0_08_from_16_accesses(access_count: int, bonus: float) -> None:
    assert float(reinforcement(access_count)) == pytest.approx(bonus, abs=1e-15)
    # days = 0: no decay, only the bonus
    assert decayed_importance(0.5, MemoryType.CONTEXT, access_count, 0.0, BASE) == pytest.approx(0.5 + bonus, abs=1e-12)


def test_capped_reinforcement_inside_a_real_step() -> None:
    for n in (16, 25, 100):
        stab = 1.0 + math.log(1.0 + n)
        expected = 0.7 * math.exp(-BASE * 0.8 / stab * 5.0) + 0.08
        assert decayed_importance(0.7, MemoryType.PREFERENCE, n, 5.0, BASE) == pytest.approx(expected, abs=1e-12)


def test_importance_never_passes_1_0() -> None:
    # 0.98 + 0.08 reinforcement would be 1.06: importance is defined on 0..1
    assert decayed_importance(0.98, MemoryType.CORRECTION, 20, 0.0, BASE) == 1.0
    assert decayed_importance(1.0, MemoryType.FACT, 16, 0.1, BASE) == 1.0
    values = curve(MemoryType.CORRECTION, 30, 60, base_decay_rate=BASE, importance=0.9)
    assert max(values) == 1.0
    got = decay_arrays(np.array([0.99, 0.5]), np.array([TYPE_CODES[MemoryType.FACT]] * 2), np.array([16, 0]),
                       np.array([0.0, 0.0]), BASE)
    assert got.tolist() == [1.0, 0.5]


# --- vectorised decay equals the scalar function -----------------------------------------------------


def test_decay_arrays_equals_the_scalar_function_for_mixed_types() -> None:
    rng = np.random.default_rng(7)
    n = 500
    types = [TYPES[i % len(TYPES)] for i in range(n)]
    importance = rng.uniform(0.0, 1.0, n)
    access = rng.integers(0, 40, n)
    days = rng.uniform(0.0, 120.0, n)
    codes = np.array([TYPE_CODES[t] for t in types])
    got = decay_arrays(importance, codes, access, days, BASE)
    assert got.shape == (n,)
    for i in range(n):
        scalar = decayed_importance(float(importance[i]), types[i], int(access[i]), float(days[i]), BASE)
        assert got[i] == pytest.approx(scalar, abs=1e-12)
        assert got[i] == pytest.approx(by_hand(float(importance[i]), types[i], int(access[i]), float(days[i])), abs=1e-12)


def test_decayed_importance_accepts_arrays_of_one_type() -> None:
    importance = np.array([0.2, 0.5, 0.9])
    access = np.array([0, 3, 20])
    got = decayed_importance(importance, MemoryType.FACT, access, 12.0, BASE)
    assert isinstance(got, np.ndarray)
    expected = [by_hand(float(i), MemoryType.FACT, int(a), 12.0) for i, a in zip(importance, access, strict=True)]
    assert got.tolist() == pytest.approx(expected, abs=1e-12)


# --- curve -----------------------------------------------------------------------------------------


def test_curve_of_an_unaccessed_context_memory_is_0_95_per_day_until_the_floor() -> None:
    values = curve(MemoryType.CONTEXT, 0, 90, base_decay_rate=BASE)
    assert len(values) == 91
    assert values[0] == 1.0
    for day in (1, 10, 30, 44):
        assert values[day] == pytest.approx(0.95 ** day, rel=1e-9)
    # 0.95^45 = 0.0994 < 0.10: the floor from day 45 on
    assert 0.95 ** 44 > 0.10 > 0.95 ** 45
    assert values[45:] == [0.10] * 46


@pytest.mark.parametrize("memory_type", TYPES, ids=str)
def test_curve_steps_are_scalar_steps(memory_type: MemoryType) -> None:
    values = curve(memory_type, 3, 60, base_decay_rate=BASE, importance=0.8)
    assert values[0] == 0.8
    for previous, current in zip(values, values[1:], strict=False):
        assert current == pytest.approx(by_hand(previous, memory_type, 3, 1.0), abs=1e-12)
    assert min(values) >= SPEC_TABLE[memory_type][1]


def test_curve_with_half_day_steps() -> None:
    values = curve(MemoryType.FACT, 0, 10, base_decay_rate=BASE, importance=0.9, step_days=0.5)
    assert len(values) == 21
    assert values[-1] == pytest.approx(0.9 * 0.95 ** (0.7 * 10), rel=1e-9)


def test_curves_of_types_order_by_modifier() -> None:
    day30 = {t: curve(t, 0, 30, base_decay_rate=BASE, importance=0.9)[30] for t in TYPES}
    assert day30[MemoryType.CORRECTION] > day30[MemoryType.FACT] > day30[MemoryType.PREFERENCE] > day30[MemoryType.CONTEXT]
    assert day30[MemoryType.CONTEXT] == day30[MemoryType.TOOL_RESULT]
    assert day30[MemoryType.CORRECTION] == pytest.approx(0.9 * 0.95 ** 15, rel=1e-9)


# --- clean-up: archived after 30 days at or below min_importance ----------------------------------

MIN_IMPORTANCE = 0.1  # the spec's default
AFTER_DAYS = 30  # the configuration default
D = 86_400.0


def test_the_clean_up_defaults() -> None:
    settings = MemorySettings()
    assert (settings.min_importance, settings.cleanup_after_days) == (MIN_IMPORTANCE, AFTER_DAYS)


def test_next_low_since_starts_keeps_and_stops_the_clock() -> None:
    assert next_low_since(0.10, math.nan, 5 * D, MIN_IMPORTANCE) == 5 * D  # reached the floor: starts
    assert next_low_since(0.10, 2 * D, 5 * D, MIN_IMPORTANCE) == 2 * D  # still there: kept
    assert math.isnan(next_low_since(0.105, 2 * D, 5 * D, MIN_IMPORTANCE))  # lifted above: stops
    assert math.isnan(next_low_since(0.30, math.nan, 5 * D, MIN_IMPORTANCE))  # a Fact at its floor: never
    got = next_low_since(np.array([0.05, 0.1, 0.35]), np.array([1.0, math.nan, 1.0]), 9.0, 0.1)
    assert got[0] == 1.0 and got[1] == 9.0 and math.isnan(got[2])


def test_cleanup_due_after_the_full_period() -> None:
    assert not cleanup_due(math.nan, 100 * D, AFTER_DAYS)
    assert not cleanup_due(10 * D, 39 * D, AFTER_DAYS)
    assert cleanup_due(10 * D, 40 * D, AFTER_DAYS)
    assert list(cleanup_due(np.array([0.0, math.nan, 5 * D]), 30 * D, AFTER_DAYS)) == [True, False, False]


def test_a_context_memory_left_alone_is_archived_on_day_62() -> None:
    """0.5 x 0.95^31 = 0.102 > 0.10 (day 31), 0.5 x 0.95^32 = 0.097 -> the floor 0.10 (day 32);
    30 days at the floor: archived by the run of day 62."""
    assert 0.5 * 0.95 ** 31 > 0.1 > 0.5 * 0.95 ** 32
    for memory_type in (MemoryType.CONTEXT, MemoryType.TOOL_RESULT):
        assert days_until_cleanup(memory_type, 0.5, base_decay_rate=BASE, min_importance=MIN_IMPORTANCE,
                                  after_days=AFTER_DAYS) == 62
    assert days_until_cleanup(MemoryType.CONTEXT, 0.1, base_decay_rate=BASE, min_importance=MIN_IMPORTANCE,
                              after_days=AFTER_DAYS) == 31  # at the floor from the first run (day 1)


@pytest.mark.parametrize("memory_type", [MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.CORRECTION])
def test_types_whose_floor_is_above_min_importance_are_never_archived(memory_type: MemoryType) -> None:
    assert days_until_cleanup(memory_type, 0.9, base_decay_rate=BASE, min_importance=MIN_IMPORTANCE,
                              after_days=AFTER_DAYS) is None


def test_a_memory_in_use_is_never_archived() -> None:
    """One access: reinforcement 0.005 a run balances the decay above the floor, at
    i = 0.005 / (1 - e^(-BASE / (1 + ln 2))) = 0.167."""
    assert days_until_cleanup(MemoryType.CONTEXT, 0.5, base_decay_rate=BASE, min_importance=MIN_IMPORTANCE,
                              after_days=AFTER_DAYS, access_count=1) is None
    balance = 0.005 / (1 - math.exp(-BASE / (1 + math.log(2))))
    assert balance == pytest.approx(0.1675, abs=1e-3)


def test_a_higher_min_importance_reaches_a_fact() -> None:
    """min_importance 0.3 = the Fact floor: 0.5 x 0.95^(0.7 d) <= 0.3 from day 15 (0.7 x 15 = 10.5 >
    ln 0.6 / ln 0.95 = 9.96), archived 30 days later."""
    assert days_until_cleanup(MemoryType.FACT, 0.5, base_decay_rate=BASE, min_importance=0.3,
                              after_days=AFTER_DAYS) == 45
