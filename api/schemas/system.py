from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class InferenceReadiness(BaseModel):
    healthy: bool
    model: str
    latency_ms: int | None = None
    detail: str | None = None


class Readiness(BaseModel):
    status: str
    inference: InferenceReadiness
    degraded: dict[str, str] = Field(
        default_factory=dict, description="Components (`engine`, `embedder`, `bus`) that still failed after "
        "sanitation restarted them `max_restart_count` times with backoff, each with the reason; {} when none. "
        "They do not change the status code, which stays the engine's readiness")


class ServiceState(BaseModel):
    healthy: bool
    latency_ms: int | None = None
    configured: bool = Field(True, description="false: the service is not set up here (healthy is then false)")
    circuit: Literal["closed", "open", "half_open"] | None = Field(
        None, description="The backend's circuit breaker (null for services without one): `open` means calls "
        "are refused at once with 503 after repeated failures, `half_open` that one trial call is let through")


class LatencyPercentiles(BaseModel):
    p50_ms: float | None
    p90_ms: float | None
    p99_ms: float | None


class ReadinessAll(BaseModel):
    status: str
    services: dict[str, ServiceState]
    latency_percentiles: LatencyPercentiles


class Liveness(BaseModel):
    status: str


class Resources(BaseModel):
    memory_used_mb: float
    cpu_percent: float
    database_size_mb: float


class Statistics(BaseModel):
    requests_total: int
    inference_requests: int
    cache_hit_rate: float


class SystemStatus(BaseModel):
    version: str
    uptime_seconds: int
    environment: str
    resources: Resources
    statistics: Statistics


class Model(BaseModel):
    id: str
    name: str
    parameters: str
    context_length: int
    default: bool


class ModelList(BaseModel):
    models: list[Model]


class HttpMetrics(BaseModel):
    requests_total: int
    requests_success: int
    requests_client_error: int
    requests_server_error: int
    active_requests: int
    response_time_avg_ms: float


class InferenceMetrics(BaseModel):
    requests_total: int
    requests_success: int
    requests_failed: int
    time_avg_ms: float
    tokens_total: int
    healthy: bool


class MetricsBody(BaseModel):
    uptime_seconds: int
    http: HttpMetrics
    inference: InferenceMetrics
