"""Response bodies of the privacy-budget routes (``/api/v1/privacy``); built from the package's
``as_dict()`` shapes (:mod:`assistant.extended.privacy`, :mod:`assistant.extended.privacy_queries`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

INTERVALS = ["hourly", "daily", "weekly", "monthly"]


class LedgerEntryOut(BaseModel):
    id: str = Field(description="The charge's id.")
    query: str = Field(description="The aggregate query charged: `memory_stats`, `quality_components`, or another "
                                   "feature's (e.g. a federated update).")
    mechanism: str = Field(description="`laplace` (counts and sums) or `gaussian` (vectors).",
                           json_schema_extra={"enum": ["laplace", "gaussian"]})
    parameters: dict[str, float] = Field(
        description="The mechanism's parameters: the requested `epsilon`, the `sensitivity` (L1 for Laplace, L2 "
                    "for Gaussian), the `noise_multiplier` the accountant composes, and the Laplace `scale` or the "
                    "Gaussian `sigma` (with `delta`).")
    epsilon_spent: float = Field(ge=0, description="What the charge cost: the accountant's composed epsilon of the "
                                                   "period after it minus before it (composition is sub-additive: "
                                                   "it can be below the requested epsilon).")
    composed_epsilon: float = Field(ge=0, description="The period's composed epsilon after this charge.")
    period_start: str = Field(description="The budget period it belongs to (ISO 8601, UTC).")
    created_at: str = Field(description="When it was charged (ISO 8601, UTC).")


class ChargeOut(LedgerEntryOut):
    epsilon_before: float = Field(ge=0, description="The period's composed epsilon before the charge.")
    epsilon_after: float = Field(ge=0, description="The period's composed epsilon after the charge.")
    remaining: float = Field(ge=0, description="`privacy.epsilon` minus `epsilon_after` (never below 0).")
    reset_at: str = Field(description="When the budget resets (ISO 8601, UTC).")


class BudgetOut(BaseModel):
    """The caller's budget in the current period."""

    epsilon: float = Field(gt=0, description="The budget per period (`privacy.epsilon`, 1.0 by default).")
    delta: float = Field(gt=0, lt=1, description="The delta the composed epsilon is computed at (`privacy.delta`, "
                                                 "1e-5 by default).")
    spent: float = Field(ge=0, description="The accountant's composed epsilon of the period's ledger (0 when empty).")
    remaining: float = Field(ge=0, description="`epsilon` minus `spent` (never below 0).")
    period_start: str = Field(description="The current period's start (ISO 8601, UTC; periods start on the hour, at "
                                          "midnight, Monday midnight or the first of the month, UTC).")
    reset_at: str = Field(description="When the budget resets: the next period's start (ISO 8601, UTC).")
    reset_interval: str = Field(description="`privacy.budget_reset_interval`.", json_schema_extra={"enum": INTERVALS})
    accountant: str = Field(description="`pld` (privacy-loss distributions) or `rdp` (Renyi DP), Google's "
                                        "dp-accounting (`privacy.accountant`).", json_schema_extra={"enum": ["pld", "rdp"]})
    ledger: list[LedgerEntryOut] = Field(description="The period's charges, oldest first (the latest 1,000).")

    @classmethod
    def of(cls, status: Any) -> BudgetOut:
        return cls(**status.as_dict())


class TypeCountOut(BaseModel):
    memory_type: str = Field(description="The memory type, as the stats view names it (`Tool Result`, ...); every "
                                         "type is listed, present or not.")
    count: int = Field(ge=0, description="The noisy count, rounded and floored at 0.")
    noisy_count: float = Field(description="The noisy count itself (unbiased; may be negative).")


class LaplaceReleaseOut(BaseModel):
    """What every noised release carries besides its figures: the mechanism, its calibration and the charge."""

    epsilon: float = Field(description="The epsilon the Laplace scale is calibrated to: the requested one rounded "
                                       "down to two significant digits.")
    mechanism: str = Field(description="`laplace`.")
    noise_scale: float = Field(description="The Laplace scale, sensitivity / epsilon.")
    charge: ChargeOut = Field(description="The ledger entry of this release and the budget after it.")


class MemoryStatsOut(LaplaceReleaseOut):
    by_type: list[TypeCountOut] = Field(description="Noisy counts of the caller's memories per type.")
    total: int = Field(ge=0, description="The sum of the rounded counts.")
    mean_importance: float = Field(ge=0, le=1, description="Noisy sum of importances (each clipped to 0..1) over "
                                                            "the noisy total, clipped to 0..1.")
    sensitivity: float = Field(description="The L1 sensitivity of the released vector: 2 (one memory changes one "
                                           "count by 1 and the importance sum by at most 1).")
    privacy_unit: str = Field(description="What the guarantee protects: `one memory`.")


class QualityReleaseOut(LaplaceReleaseOut):
    re_ask_rate: float = Field(ge=0, le=1, description="Noisy mean over conversations of their re-ask rate.")
    correction_rate: float = Field(ge=0, le=1, description="Noisy mean over conversations of their correction rate.")
    abandonment_rate: float = Field(ge=0, le=1, description="Noisy share of abandoned conversations.")
    score: float = Field(ge=0, le=1, description="1 − (re_ask_rate × 0.4 + correction_rate × 0.4 + abandonment_rate "
                                                 "× 0.2), the weights `sanitation.quality_*_weight`.")
    conversations: int = Field(ge=0, description="Noisy number of conversations in the window, rounded.")
    window_start: str | None = Field(description="The window's start: the caller's last completed sanitation run "
                                                 "(null before the first: every conversation).")
    window_end: str = Field(description="The window's end (now).")
    sensitivity: float = Field(description="The L1 sensitivity of the released vector (n, three sums): 4.")
    privacy_unit: str = Field(description="What the guarantee protects: `one conversation`.")
