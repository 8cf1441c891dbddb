"""Metrics as JSON and in the Prometheus text exposition format (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from api.deps import ServicesDep
from api.schemas.system import MetricsBody

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
    `inference_time_ms_bucket{le}` with le 100, 250, 500, 1000, +Inf (plus `_sum`, `_count`)."""
    return Response(services.metrics.prometheus(), media_type=CONTENT_TYPE_LATEST)
