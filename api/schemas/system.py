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


class RejectedVariant(BaseModel):
    variant: str
    reason: str = Field(description="why its self-test failed, e.g. `killed by SIGSEGV`")


class EngineStatus(BaseModel):
    """How the embedded engine runs on this machine (beyond the spec)."""

    backend: str = Field(description="`inference.backend`: llama-cpp, ollama or openai")
    cpu_variant: str | None = Field(
        None, description="the llama.cpp CPU build in use (e.g. `zen4`, `haswell` = the portable one); null "
        "before the embedded model loads, for a build without runtime dispatch, and for other backends")
    cpu_variant_source: str | None = Field(
        None, description="`self-test` (tested in a child process at this start), `cache` (an earlier test on "
        "this build, CPU and kernel), `setting` (`inference.cpu_variant`), `untested`, or `static` (no dispatch)")
    cpu_features: list[str] = Field(default_factory=list, description="instruction sets llama.cpp reports in use")
    rejected_variants: list[RejectedVariant] = Field(
        default_factory=list, description="better variants that failed their self-test here")
    self_test_tokens_per_second: float | None = None
    threads: int | None = Field(None, description="generation threads (default: physical cores)")
    batch_threads: int | None = None
    batch_size: int | None = None
    ubatch_size: int | None = None


class SystemStatus(BaseModel):
    version: str
    uptime_seconds: int
    environment: str
    resources: Resources
    statistics: Statistics
    engine: EngineStatus


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
