"""Liveness, readiness and readiness of every service (no authentication)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.deps import ServicesDep
from api.errors import error_response
from api.schemas.common import error_responses
from api.schemas.system import Liveness, Readiness, ReadinessAll
from assistant.health import NOT_CONFIGURED

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Liveness, summary="Liveness")
async def health() -> Liveness:
    """The process is up and serving. Always `{"status": "ok"}`."""
    return Liveness(status="ok")


@router.get(
    "/ready",
    response_model=Readiness,
    summary="Readiness of the inference engine",
    responses={503: {"model": Readiness, "description": "The engine is not ready; `inference.detail` says why"}},
)
def ready(services: ServicesDep) -> JSONResponse:
    """200 `{status: "ready"}` when the inference engine answers; 503 `{status: "unavailable"}` with
    `inference.detail` naming the cause (model not installed, engine unreachable) otherwise.
    The probe result is cached for `inference.health_cache_secs` (5 s). `degraded` names the
    components that sanitation restarted `max_restart_count` times without recovery, with the
    reason (`{}` when none); it is reported in the body only and does not change the status code."""
    h = services.probe.inference()
    services.metrics.inference_healthy = h.healthy
    body = Readiness(
        status="ready" if h.healthy else "unavailable",
        inference={"healthy": h.healthy, "model": h.model, "latency_ms": h.latency_ms, "detail": h.detail or None},
        degraded=services.probe.degraded_components(),
    )
    return JSONResponse(body.model_dump(), status_code=200 if h.healthy else 503)


@router.get("/ready/all", response_model=ReadinessAll, summary="Readiness of every service",
            responses=error_responses(429))
def ready_all(request: Request, services: ServicesDep) -> ReadinessAll | JSONResponse:
    """Each service as `{healthy, latency_ms, configured, circuit}`: `inference`, `database`,
    `cache` (llama.cpp's KV prefix cache: healthy once the model is loaded; not configured for
    other engines), `messenger`, `email`, `calendar`, `weather` (reachability of the configured
    backend) and `embedder` (one real embedding). A service that is not configured reports
    `healthy: false`, `latency_ms: null`, `configured: false`. `circuit` is the backend's circuit
    breaker (`closed`, `open`, `half_open`; null for the database and the cache). `status` is `ok`
    when inference and database are healthy, else `degraded`. `latency_percentiles` are of HTTP
    request latency over the recorded history (null before any request).

    Probes are real and some go out over the network, so their results are cached for
    `server.readiness_cache_secs` (5 s) for all clients together, and one round runs at a time.
    This route is exempt from the API's rate limit but has its own: `server.readiness_rpm`
    (60) requests per minute per client IP, then 429 `RATE_LIMITED` with `Retry-After`."""
    client = request.client.host if request.client else "unknown"
    decision = services.probe.limiter.hit(client)
    if not decision.allowed:
        return error_response(
            request, "RATE_LIMITED",
            f"/ready/all allows {decision.limit} requests per minute per client; retry in {decision.retry_after} s",
            headers={"Retry-After": str(decision.retry_after)}, retry_after=decision.retry_after,
        )
    report = services.service_health()
    p = services.analytics.percentiles("request")
    status = "ok" if report["inference"].healthy and report["database"].healthy else "degraded"
    return ReadinessAll(
        status=status,
        services={
            name: {"healthy": s.healthy, "latency_ms": s.latency_ms, "configured": s.detail != NOT_CONFIGURED.detail,
                   "circuit": s.circuit}
            for name, s in report.items()
        },
        latency_percentiles={
            "p50_ms": None if p.p50_ms is None else round(p.p50_ms, 2),
            "p90_ms": None if p.p90_ms is None else round(p.p90_ms, 2),
            "p99_ms": None if p.p99_ms is None else round(p.p99_ms, 2),
        },
    )
