"""The aggregate queries that spend the privacy budget: memory statistics and the quality components
shared with peers. Each reads the caller's real data, charges the budget
(:class:`~assistant.extended.privacy.PrivacyBudget`) and releases only noised values.

**Memory statistics** (:func:`memory_stats`). Privacy unit: one memory. The true vector is the
count of the caller's memories per type (all nine :class:`~assistant.memory.types.MemoryType`
values, present or not, so which types exist is not revealed by the list) plus the sum of their
importances clipped to 0..1. Adding or removing one memory changes one count by 1 and the sum by
at most 1: L1 sensitivity 2, so one Laplace release of scale ``2 / epsilon`` covers the vector.
Post-processing (free): ``count`` is the noisy count rounded and floored at 0 (``noisy_count`` is the
unbiased value), ``total`` their sum, ``mean_importance`` = noisy sum / max(1, noisy total), clipped
to 0..1.

**Quality components** (:func:`quality_release`): sanitation's quality assessment
(:mod:`assistant.sanitation.quality`) over the caller's conversations since their last completed
sanitation run, in a form safe to share with peers. Privacy unit: one conversation. Sanitation's
re-ask and correction rates are ratios over messages, whose sensitivity to one conversation is
unbounded (a conversation may hold any number of messages); so each conversation contributes its
own rates, each in 0..1 (re-asks / its follow-ups, corrections / its user messages, abandoned 0 or
1), and the released vector is ``(n, sum of re-ask rates, sum of correction rates, number
abandoned)`` over the ``n`` conversations with a user message in the window. One conversation
changes each coordinate by at most 1: L1 sensitivity 4, Laplace scale ``4 / epsilon``. The rates
are the noisy sums over max(1, noisy n), clipped to 0..1 (conversation-weighted, where sanitation's
own re-ask and correction rates are message-weighted; the abandonment rate is the same quantity),
and the score is sanitation's formula with ``[sanitation]``'s weights. With few conversations the
noise dominates (at epsilon 1, n = 20: the rates carry a noise of about +-0.2): that is the price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from assistant.extended.privacy import Charge, PrivacyBudget
from assistant.memory.types import MemoryType

MEMORY_SENSITIVITY = 2.0
QUALITY_SENSITIVITY = 4.0


def _clip01(value: float) -> float:
    return min(1.0, max(0.0, float(value)))


@dataclass(frozen=True)
class MemoryStatsRelease:
    by_type: list[dict[str, Any]]
    total: int
    mean_importance: float
    epsilon: float
    noise_scale: float
    charge: Charge

    def as_dict(self) -> dict[str, Any]:
        return {"by_type": self.by_type, "total": self.total, "mean_importance": self.mean_importance,
                "epsilon": self.epsilon, "mechanism": "laplace", "sensitivity": MEMORY_SENSITIVITY,
                "noise_scale": self.noise_scale, "privacy_unit": "one memory", "charge": self.charge.as_dict()}


def true_memory_stats(db: Any, user_id: str) -> tuple[dict[str, int], float]:
    """The exact counts per type and the clipped importance sum (never returned to a caller as is)."""
    rows = db.query("SELECT m.memory_type, count(*) AS n, total(min(max(coalesce(s.importance, 0.0), 0.0), 1.0)) "
                    "AS importance FROM memories m LEFT JOIN memory_scores s ON s.memory_rowid = m.rowid "
                    "WHERE m.user_id = ? GROUP BY m.memory_type", (str(user_id),))
    counts = {t.value: 0 for t in MemoryType}
    importance = 0.0
    for row in rows:
        if row["memory_type"] in counts:
            counts[row["memory_type"]] = int(row["n"])
            importance += float(row["importance"])
    return counts, importance


def memory_stats(budget: PrivacyBudget, db: Any, user_id: str, epsilon: float) -> MemoryStatsRelease:
    """The caller's memory counts per type and mean importance, ``epsilon``-DP (charged to their budget)."""
    counts, importance = true_memory_stats(db, user_id)
    release = budget.release_counts(user_id, "memory_stats", {**counts, "_importance": importance}, epsilon,
                                    MEMORY_SENSITIVITY)
    noised = dict(release.values)
    importance_sum = noised.pop("_importance")
    by_type = [{"memory_type": t.display_name, "count": max(0, round(noised[t.value])),
                "noisy_count": round(noised[t.value], 3)} for t in MemoryType]
    total = sum(row["count"] for row in by_type)
    mean = _clip01(importance_sum / max(1.0, sum(noised.values())))
    return MemoryStatsRelease(by_type, total, round(mean, 4), release.mechanism.epsilon, release.mechanism.scale,
                              release.charge)


@dataclass(frozen=True)
class QualityRelease:
    re_ask_rate: float
    correction_rate: float
    abandonment_rate: float
    score: float
    conversations: int
    window_start: str | None
    window_end: str
    epsilon: float
    noise_scale: float
    charge: Charge

    def as_dict(self) -> dict[str, Any]:
        return {"re_ask_rate": self.re_ask_rate, "correction_rate": self.correction_rate,
                "abandonment_rate": self.abandonment_rate, "score": self.score, "conversations": self.conversations,
                "window_start": self.window_start, "window_end": self.window_end, "epsilon": self.epsilon,
                "mechanism": "laplace", "sensitivity": QUALITY_SENSITIVITY, "noise_scale": self.noise_scale,
                "privacy_unit": "one conversation", "charge": self.charge.as_dict()}


def per_conversation_sums(deps: Any, user_id: str, since: float | None, now: float) -> list[float]:
    """``[n, sum of re-ask rates, sum of correction rates, abandoned]`` over the conversations with a
    user message in the window (exact; never returned to a caller as is)."""
    from assistant.sanitation.quality import measure, window_conversations

    store = getattr(deps, "conversations", None)
    found = [] if store is None else window_conversations(store, str(user_id), since)
    embedder = getattr(getattr(deps, "memory", None), "embedder", None)
    sums = [0.0, 0.0, 0.0, 0.0]
    for conversation in found:
        rates = measure([conversation], since, now, embedder)
        if rates.conversations == 0:
            continue
        sums[0] += 1
        sums[1] += rates.re_ask_rate
        sums[2] += rates.correction_rate
        sums[3] += rates.abandonment_rate
    return sums


def quality_release(budget: PrivacyBudget, deps: Any, user_id: str, epsilon: float) -> QualityRelease:
    """Sanitation's quality components of the caller, ``epsilon``-DP, for sharing with peers.
    ``deps`` is the sanitation service's :class:`~assistant.sanitation.service.SanitationDeps`."""
    from assistant.clock import iso_at

    now = float(deps.clock())
    since = deps.store.last_run_ts(str(user_id))
    sums = per_conversation_sums(deps, user_id, since, now)
    release = budget.release_counts(user_id, "quality_components", sums, epsilon, QUALITY_SENSITIVITY)
    n, re_ask, correction, abandoned = release.values
    denominator = max(1.0, n)
    rates = [_clip01(re_ask / denominator), _clip01(correction / denominator), _clip01(abandoned / denominator)]
    weights = deps.settings
    score = _clip01(1.0 - (rates[0] * weights.quality_re_ask_weight + rates[1] * weights.quality_correction_weight
                           + rates[2] * weights.quality_abandonment_weight))
    return QualityRelease(round(rates[0], 4), round(rates[1], 4), round(rates[2], 4), round(score, 4),
                          max(0, round(n)), None if since is None else iso_at(since), iso_at(now), release.mechanism.epsilon,
                          release.mechanism.scale, release.charge)
