"""The privacy budget with the spec's numbers (epsilon 1.0, delta 1e-5, daily reset), the real
dp-accounting accountants, a real SQLite ledger and an injectable clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from dp_accounting import gaussian_mechanism

from assistant.config import PrivacySettings
from assistant.errors import ValidationFailed
from assistant.extended.privacy import BudgetExhausted, PrivacyBudget, build_privacy, period_bounds
from assistant.extended.privacy_mechanisms import (
    Gaussian,
    Laplace,
    PldAccountant,
    RdpAccountant,
    check_epsilon,
)
from assistant.extended.privacy_queries import per_conversation_sums, quality_release
from assistant.observability.signals import SignalBus, SignalKind
from assistant.storage.db import Database
from tests.assistant.sanitation.test_sanitation_quality import LATER, T0, WEATHER, FakeEmbedder, deps, known_set

NOON = datetime(2026, 3, 11, 12, 30, tzinfo=UTC)  # a Wednesday


class Clock:
    def __init__(self, now: datetime = NOON) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "ledger.db")
    yield database
    database.close()


def budget_of(db: Database, clock: Clock | None = None, signals: SignalBus | None = None, **settings) -> PrivacyBudget:
    return PrivacyBudget(PrivacySettings(**settings), db, signals, clock=clock or Clock())


def test_the_spec_defaults() -> None:
    s = PrivacySettings()
    assert (s.epsilon, s.delta, s.budget_reset_interval, s.enabled, s.accountant) == (1.0, 1e-5, "daily", True, "pld")


@pytest.mark.parametrize(("interval", "start", "reset"), [
    ("hourly", datetime(2026, 3, 11, 12, tzinfo=UTC), datetime(2026, 3, 11, 13, tzinfo=UTC)),
    ("daily", datetime(2026, 3, 11, tzinfo=UTC), datetime(2026, 3, 12, tzinfo=UTC)),
    ("weekly", datetime(2026, 3, 9, tzinfo=UTC), datetime(2026, 3, 16, tzinfo=UTC)),  # Monday to Monday
    ("monthly", datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)),
])
def test_periods_start_on_utc_boundaries(interval: str, start: datetime, reset: datetime) -> None:
    assert period_bounds(NOON, interval) == (start, reset)


def test_a_month_rolls_over_the_year() -> None:
    assert period_bounds(datetime(2026, 12, 31, 23, 59, tzinfo=UTC), "monthly")[1] == datetime(2027, 1, 1, tzinfo=UTC)


def test_ten_laplace_queries_of_01_exhaust_the_budget_and_the_eleventh_is_refused(db: Database) -> None:
    signals = SignalBus()
    budget = budget_of(db, signals=signals)
    charges = [budget.spend("u1", "memory_stats", Laplace(0.1)) for _ in range(10)]
    assert charges[0].epsilon_spent == pytest.approx(0.1, abs=1e-4)
    # PLD composes the ten to 0.990 at delta 1e-5: a little less than 10 x 0.1 (composition is sub-additive)
    assert charges[-1].epsilon_after == pytest.approx(0.990, abs=1e-3)
    assert sum(c.epsilon_spent for c in charges) == pytest.approx(charges[-1].epsilon_after, abs=1e-5)
    with pytest.raises(BudgetExhausted) as refused:
        budget.spend("u1", "memory_stats", Laplace(0.1))
    error = refused.value
    assert error.code == "RATE_LIMITED"
    assert error.details["remaining_epsilon"] == pytest.approx(1.0 - charges[-1].epsilon_after, abs=1e-5)
    assert error.details["requested_epsilon"] == 0.1
    assert error.details["reset_at"] == "2026-03-12T00:00:00.000Z"
    assert error.details["would_compose_to"] == pytest.approx(1.080, abs=1e-3)
    assert error.retry_after == int(timedelta(hours=11, minutes=30).total_seconds())
    status = budget.status("u1")
    assert len(status.ledger) == 10  # the refusal wrote nothing
    assert (status.spent, status.remaining) == (pytest.approx(0.990, abs=1e-3), pytest.approx(0.010, abs=1e-3))
    assert (status.epsilon, status.delta, status.accountant) == (1.0, 1e-5, "pld")
    spends = signals.recent(SignalKind.PRIVACY_SPEND, user_id="u1")
    assert [s.data["refused"] for s in spends] == [False] * 10 + [True]
    assert spends[0].value == pytest.approx(0.1, abs=1e-4) and spends[-1].value == 0.0


def test_a_smaller_query_still_fits_when_a_larger_one_does_not(db: Database) -> None:
    budget = budget_of(db)
    budget.spend("u1", "q", Laplace(0.9))
    with pytest.raises(BudgetExhausted):
        budget.spend("u1", "q", Laplace(0.2))
    assert budget.spend("u1", "q", Laplace(0.05)).epsilon_after <= 1.0


def test_the_budget_resets_after_the_interval(db: Database) -> None:
    clock = Clock()
    budget = budget_of(db, clock)
    for _ in range(10):
        budget.spend("u1", "memory_stats", Laplace(0.1))
    with pytest.raises(BudgetExhausted):
        budget.spend("u1", "memory_stats", Laplace(0.1))
    clock.now = datetime(2026, 3, 12, 0, 0, 1, tzinfo=UTC)  # the next day
    status = budget.status("u1")
    assert (status.spent, status.remaining, status.ledger) == (0.0, 1.0, [])
    assert (status.period_start, status.reset_at) == ("2026-03-12T00:00:00.000Z", "2026-03-13T00:00:00.000Z")
    charge = budget.spend("u1", "memory_stats", Laplace(0.1))
    assert charge.epsilon_before == 0.0 and charge.entry.period_start == "2026-03-12T00:00:00.000Z"
    assert len(budget.entries("u1", since=NOON - timedelta(days=1))) == 11  # every period's rows are kept


def test_hourly_reset(db: Database) -> None:
    clock = Clock()
    budget = budget_of(db, clock, budget_reset_interval="hourly")
    budget.spend("u1", "q", Laplace(1.0))
    with pytest.raises(BudgetExhausted) as refused:
        budget.spend("u1", "q", Laplace(0.1))
    assert refused.value.retry_after == 30 * 60
    clock.now += timedelta(minutes=30)
    assert budget.spend("u1", "q", Laplace(0.1)).epsilon_before == 0.0


def test_budgets_are_per_user(db: Database) -> None:
    budget = budget_of(db)
    budget.spend("u1", "q", Laplace(1.0))
    assert budget.status("u2").spent == 0.0
    assert budget.spend("u2", "q", Laplace(0.5)).epsilon_before == 0.0
    assert [e.query for e in budget.status("u1").ledger] == ["q"]


def test_the_rdp_accountant_charges_more_for_laplace(db: Database) -> None:
    budget = budget_of(db, accountant="rdp")
    assert budget.accountant.id == "rdp"
    charge = budget.spend("u1", "q", Laplace(0.1))
    assert charge.epsilon_spent == pytest.approx(0.1028, abs=1e-4)  # RDP's conversion is looser than PLD's
    for _ in range(9):
        budget.spend("u1", "q", Laplace(0.1))
    with pytest.raises(BudgetExhausted):
        budget.spend("u1", "q", Laplace(0.1))


def test_the_accountants_compose_gaussians_and_laplaces_together() -> None:
    events = [Laplace(0.3).event(), Gaussian(0.5, 1e-5).event(), Laplace(0.3).event()]
    pld, rdp = PldAccountant().epsilon(events, 1e-5), RdpAccountant().epsilon(events, 1e-5)
    # PLD composes 0.3 + 0.5 + 0.3 to 1.049 (below the sum, 1.1), RDP to 1.099: looser
    assert pld == pytest.approx(1.049, abs=2e-3) and pld < rdp < 1.1
    assert PldAccountant().epsilon([], 1e-5) == 0.0


def test_gaussian_sigma_comes_from_epsilon_and_delta() -> None:
    mechanism = Gaussian(0.5, 1e-5, sensitivity=2.0)
    assert mechanism.noise_multiplier == pytest.approx(gaussian_mechanism.get_sigma_gaussian(0.5, 1e-5))
    assert mechanism.std == pytest.approx(2.0 * mechanism.noise_multiplier)
    assert PldAccountant().epsilon([mechanism.event()], 1e-5) == pytest.approx(0.5, abs=1e-6)


def test_release_counts_adds_laplace_noise_of_the_calibrated_scale(db: Database) -> None:
    budget = budget_of(db)
    release = budget.release_counts("u1", "big", np.zeros(20_000), 0.5, sensitivity=2.0)
    assert release.mechanism.scale == 4.0
    assert np.mean(np.abs(release.values)) == pytest.approx(4.0, rel=0.05)  # E|Laplace(b)| = b
    named = budget.release_counts("u1", "named", {"a": 10, "b": 20}, 0.4)
    assert set(named.values) == {"a", "b"} and named.charge.entry.query == "named"
    assert named.charge.entry.parameters == {"epsilon": 0.4, "sensitivity": 1.0, "noise_multiplier": 2.5,
                                             "scale": 2.5}


def test_release_vector_clips_then_adds_gaussian_noise(db: Database) -> None:
    budget = budget_of(db)
    vector = np.full(10_000, 1.0)  # norm 100
    release = budget.release_vector("u1", "federated_update", vector, 0.5, clip_norm=1.0)
    assert release.clipped
    sigma = gaussian_mechanism.get_sigma_gaussian(0.5, 1e-5)
    residual = release.values - vector / 100.0
    assert np.std(residual) == pytest.approx(sigma, rel=0.05)
    assert release.charge.entry.mechanism == "gaussian"
    assert release.charge.entry.parameters["sigma"] == pytest.approx(sigma)
    small = budget.release_vector("u1", "federated_update", [0.1, 0.2], 0.1, clip_norm=1.0)
    assert not small.clipped and small.values.shape == (2,)


def test_noise_differs_between_releases(db: Database) -> None:
    budget = budget_of(db, epsilon=10.0)
    first = budget.release_counts("u1", "q", [0.0] * 8, 0.5).values
    second = budget.release_counts("u1", "q", [0.0] * 8, 0.5).values
    assert first != second  # a fresh OS-seeded generator per release


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), 0.0001, 101])
def test_an_epsilon_out_of_range_is_refused_naming_the_field(value: float) -> None:
    with pytest.raises(ValidationFailed) as refused:
        Laplace(value)
    assert refused.value.details["fields"][0]["field"] == "epsilon"


def test_epsilon_is_rounded_down_to_two_significant_digits() -> None:
    assert [check_epsilon(x) for x in (0.1, 0.123, 0.999, 1.0, 0.0015)] == [0.1, 0.12, 0.99, 1.0, 0.0015]
    assert Laplace(0.123).scale == pytest.approx(1 / 0.12)


def test_bad_query_names_and_counts_are_refused(db: Database) -> None:
    budget = budget_of(db)
    with pytest.raises(ValidationFailed):
        budget.spend("u1", "Has Spaces", Laplace(0.1))
    with pytest.raises(ValidationFailed):
        budget.release_counts("u1", "q", [1.0, float("nan")], 0.1)
    with pytest.raises(ValidationFailed):
        budget.release_vector("u1", "q", [1.0], 0.1, clip_norm=0)
    assert budget.status("u1").ledger == []  # nothing was charged


def test_disabled_builds_nothing(db: Database) -> None:
    from types import SimpleNamespace

    assert build_privacy(SimpleNamespace(privacy=PrivacySettings(enabled=False)), db) is None
    assert build_privacy(SimpleNamespace(privacy=PrivacySettings()), db) is not None


def test_the_frame_plots_the_ledger(db: Database) -> None:
    budget = budget_of(db)
    for eps in (0.1, 0.2, 0.3):
        budget.spend("u1", "q", Laplace(eps))
    frame = budget.frame("u1")
    assert list(frame["epsilon_spent"].round(3)) == [0.1, 0.2, 0.3]
    assert frame["composed_epsilon"].is_monotonic_increasing


# --- the quality components ------------------------------------------------------------------------


def test_each_conversation_contributes_its_own_rates() -> None:
    d = deps(known_set(), FakeEmbedder({WEATHER, "Tell me the forecast for Paris tomorrow"}))
    sums = per_conversation_sums(d, "u1", None, T0 + 33 + LATER)
    # a: 1 re-ask of 3 follow-ups, 1 correction of 4 messages; b: clean; c: abandoned; d: re-asked, abandoned
    assert sums == pytest.approx([4, 1 / 3 + 1, 0.25, 2])


def test_quality_release_is_close_to_the_truth_with_a_large_epsilon(db: Database) -> None:
    d = deps(known_set(), FakeEmbedder({WEATHER, "Tell me the forecast for Paris tomorrow"}))
    budget = budget_of(db, epsilon=100.0)
    release = quality_release(budget, d, "u1", 100.0)
    assert release.noise_scale == pytest.approx(0.04)
    assert release.re_ask_rate == pytest.approx(1 / 3, abs=0.1)
    assert release.correction_rate == pytest.approx(0.0625, abs=0.1)
    assert release.abandonment_rate == pytest.approx(0.5, abs=0.1)
    assert release.conversations == 4
    assert release.charge.entry.query == "quality_components"
    assert release.charge.entry.parameters["sensitivity"] == 4.0
