"""The privacy budget: `GET /api/v1/privacy/budget` (the spec's), and two aggregate queries that spend it
(beyond the spec's table): `GET /api/v1/privacy/memory-stats` and `GET /api/v1/privacy/quality`.

Role: any key (`read-only` included) for all three. The aggregate queries are GET routes that change
one thing, the caller's budget: even a read-only key spends it (the budget is the user's, not the
key's). Owner rule: the caller's budget, ledger and data only; another user's charges never show.
While `privacy.enabled = false` every route is 503 `SERVICE_UNAVAILABLE` naming the key, checked
before the parameters. The work is :class:`assistant.extended.privacy.PrivacyBudget`'s and
:mod:`assistant.extended.privacy_queries`'.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import ROLE_READ, CurrentPrincipal, ServicesDep, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.privacy import BudgetOut, MemoryStatsOut, QualityReleaseOut
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.extended.privacy import PrivacyBudget
from assistant.extended.privacy_mechanisms import MAX_EPSILON, MIN_EPSILON
from assistant.extended.privacy_queries import memory_stats, quality_release

DISABLED = "the privacy budget is disabled (privacy.enabled = false)"
PRIVACY = service("privacy", DISABLED)
Privacy = Annotated[PrivacyBudget, PRIVACY]
router = APIRouter(prefix="/api/v1/privacy", tags=["extended"], dependencies=[PRIVACY])

OWNER = "Only the caller's budget and data; another user's charges never show."
SPENDS = ("\n\n**Spends the caller's budget.** The epsilon requested is charged to the caller's budget (the "
          "accountant's composed epsilon after minus before: see `GET /api/v1/privacy/budget`) before anything is "
          "released; a query that would take the composed epsilon past `privacy.epsilon` is refused with 429 "
          "`RATE_LIMITED`, a `Retry-After` header (seconds until the reset) and `details` {`remaining_epsilon`, "
          "`reset_at`, `requested_epsilon`, `spent_epsilon`, `epsilon`, `delta`, `would_compose_to`, `query`}, and "
          "releases nothing. An `epsilon` above the whole budget is 422 (it could never be granted). This is a GET "
          "that changes the caller's budget: a `read-only` key spends it too.")
QUERIES = error_responses(*AUTH_ERRORS, 422, 503)
EPSILON_DOC = (f"The epsilon to spend on this release, {MIN_EPSILON:g} to {MAX_EPSILON:g} and at most "
               "`privacy.epsilon`: smaller is more private and noisier. Rounded down to two significant digits.")
Epsilon = Annotated[float, Query(ge=MIN_EPSILON, le=MAX_EPSILON, description=EPSILON_DOC)]


def within_budget(budget: PrivacyBudget, epsilon: float) -> float:
    if epsilon > budget.epsilon:
        error = f"must be at most privacy.epsilon ({budget.epsilon:g}), the whole budget of a period (got {epsilon:g})"
        raise ValidationFailed(f"epsilon {error}", [{"field": "epsilon", "error": error}])
    return epsilon


@router.get("/budget", response_model=BudgetOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The caller's privacy budget and ledger",
            description="Differential privacy for aggregate outputs (memory statistics, quality components shared "
                        "with peers, federated updates): each user has `privacy.epsilon` (1.0) at `privacy.delta` "
                        "(1e-5) per `privacy.budget_reset_interval` (daily), and every aggregate release is charged "
                        "through a calibrated mechanism (Laplace for counts and sums, Gaussian for vectors). `spent` "
                        "is Google's dp-accounting accountant (`accountant`: `pld` or `rdp`) composing the period's "
                        "ledger; `ledger` lists the period's charges. Reading the budget spends nothing."
                        + ROLE_READ + OWNER)
def budget(user: CurrentPrincipal, privacy: Privacy) -> BudgetOut:
    return BudgetOut.of(privacy.status(str(user.user_id)))


@router.get("/memory-stats", response_model=MemoryStatsOut, responses=QUERIES,
            summary="Differentially private statistics of the caller's memories",
            description="Not in the spec's table: the number of the caller's memories per type (all nine types) and "
                        "their mean importance, with Laplace noise of scale 2 / `epsilon` (privacy unit: one memory; "
                        "L1 sensitivity 2). 503 while the memory store is off (`memory.enabled = false`)."
                        + SPENDS + ROLE_READ + OWNER)
def memory_statistics(user: CurrentPrincipal, privacy: Privacy, services: ServicesDep,
                      epsilon: Epsilon = 0.1) -> MemoryStatsOut:
    if services.memory is None:
        raise ServiceUnavailableError("memory statistics need the memory store (memory.enabled = false)")
    release = memory_stats(privacy, services.db, str(user.user_id), within_budget(privacy, epsilon))
    return MemoryStatsOut(**release.as_dict())


@router.get("/quality", response_model=QualityReleaseOut, responses=QUERIES,
            summary="Differentially private quality components, to share with peers",
            description="Not in the spec's table: sanitation's quality components (re-ask, correction and "
                        "abandonment rates, and the score from them) over the caller's conversations since their "
                        "last sanitation run, in a form safe to share: each conversation contributes its own rates "
                        "(each 0..1), and the conversation count and the three sums get Laplace noise of scale "
                        "4 / `epsilon` (privacy unit: one conversation; L1 sensitivity 4). With few conversations "
                        "the noise dominates. 503 while sanitation is off (`sanitation.enabled = false`)."
                        + SPENDS + ROLE_READ + OWNER)
def quality(user: CurrentPrincipal, privacy: Privacy, services: ServicesDep, epsilon: Epsilon = 0.1,
            ) -> QualityReleaseOut:
    if services.sanitation is None:
        raise ServiceUnavailableError("the quality components come from sanitation (sanitation.enabled = false, or "
                                      "memory.enabled = false)")
    release = quality_release(privacy, services.sanitation.deps, str(user.user_id), within_budget(privacy, epsilon))
    return QualityReleaseOut(**release.as_dict())
