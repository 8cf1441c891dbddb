"""Metrics as JSON and in the Prometheus text exposition format (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from api.deps import ServicesDep
from api.schemas.system import MetricsBody
from assistant.observability.metrics import sanitation_exposition

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_model=MetricsBody)
def metrics(services: ServicesDep) -> MetricsBody:
    """Counters since start. `inference.healthy` is the latest readiness probe's verdict."""
    return MetricsBody(**services.metrics.snapshot())


@router.get("/metrics/prometheus", response_class=Response,
            responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}})
def prometheus(services: ServicesDep) -> Response:
    """Series: `app_uptime_seconds` (counter), `http_requests_total{status}` with status
    `success`, `client_error`, `server_error` (counter), and the histogram
    `inference_time_ms_bucket{le}` with le 100, 250, 500, 1000, +Inf (plus `_sum`, `_count`).

    With sanitation on, the spec's sanitation series (prefix `assistant_sanitation_`, the spec's
    exact names, no `_total` suffix): the counters `memories_quarantined`, `contradictions_resolved`,
    `graph_orphans`, `defense_patterns_added`, `anomalies_detected`, `rollbacks` (since start) and the
    gauges `defense_score_x100`, `quality_score_x100` (the latest values). They are here, not in the
    JSON body of `/metrics`, whose shape the spec fixes (as the dream series are)."""
    body = services.metrics.prometheus()
    if services.sanitation is not None:
        body += sanitation_exposition(services.sanitation.counters.snapshot())
    return Response(body, media_type=CONTENT_TYPE_LATEST)
