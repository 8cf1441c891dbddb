"""The signal bus, read back: `GET /api/v1/signals?kind=&since=` (beyond the spec's table).

Role: any key (`read-only` included). Owner rule: the caller's signals and the server-wide ones (no user:
temperatures, anomalies); another user's never appear. The work is
:class:`assistant.observability.signals.SignalBus`'s.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import ROLE_READ, CurrentPrincipal, ServicesDep
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.signals import SignalList, SignalOut
from assistant.observability.signals import MAX_QUERY, SignalKind

router = APIRouter(prefix="/api/v1", tags=["extended"])


@router.get("/signals", response_model=SignalList, responses=error_responses(*AUTH_ERRORS, 422),
            summary="Signals of the extended features over time",
            description="Not in the spec's table: the typed signals every extended feature publishes (ten kinds: "
                        "`ThermalUpdate`, `CognitiveLoadEstimate`, `PrivacySpend`, `RedTeamResult`, `QualityScore`, "
                        "`Anomaly`, `PrecacheHit`, `DreamPhase`, `TrainingProgress`, `SovereigntyScore`), from the "
                        "DuckDB time series (kept `sovereign_intelligence.signal_retention_days`, 90 by default), "
                        "oldest first, at most `limit` (the latest ones). `since` is an ISO 8601 time; one without "
                        "a zone is UTC. An unknown `kind` is 422 naming the kinds." + ROLE_READ
                        + "Only the caller's signals and the server-wide ones (no user) are listed; another user's "
                          "never.")
def signals(user: CurrentPrincipal, services: ServicesDep,
            kind: Annotated[SignalKind | None, Query(description="Only this kind.")] = None,
            since: Annotated[datetime | None, Query(description="Only signals published at or after this time.")]
            = None,
            limit: Annotated[int, Query(ge=1, le=MAX_QUERY, description=f"At most this many, 1 to {MAX_QUERY:,}.")]
            = 1000,
            ) -> SignalList:
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    bus = services.signals
    found = bus.query(kind, since=since, user_id=str(user.user_id), limit=limit)
    return SignalList(signals=[SignalOut.of(s) for s in found], total=len(found), kinds=list(SignalKind),
                      capacity=bus.capacity, retention_days=bus.retention_days)
