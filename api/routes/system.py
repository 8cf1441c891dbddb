"""System status and the models the engine offers."""

from __future__ import annotations

from fastapi import APIRouter

from api.deps import CurrentPrincipal, ServicesDep
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.system import ModelList, SystemStatus

router = APIRouter(prefix="/v1/system", tags=["system"])


@router.get("/status", response_model=SystemStatus, responses=error_responses(*AUTH_ERRORS))
def status(user: CurrentPrincipal, services: ServicesDep) -> SystemStatus:
    """Real figures of this process: RSS in MiB, CPU percent since the previous call (100 = one
    core), the database size on disk (with its WAL), request and inference counts, and
    `cache_hit_rate`: the share of prompt tokens the engine served from its KV prefix cache
    (0.0 for engines that do not report it).

    `engine` (beyond the spec): the inference backend and, for the embedded llama.cpp engine, the CPU
    variant in use (`zen4`, `haswell` = the portable build, ...), how it was chosen (a self-test in a
    child process at first start, or its cached verdict), the variants rejected on this machine, and
    the thread and batch sizes (chosen from physical cores and memory unless set). Any key."""
    system = services.system
    return SystemStatus(
        version=system.version(),
        uptime_seconds=system.uptime_seconds(),
        environment=services.settings.server.environment,
        resources={
            "memory_used_mb": system.memory_used_mb(),
            "cpu_percent": system.cpu_percent(),
            "database_size_mb": round(services.db.size_bytes() / 2**20, 3),
        },
        statistics={
            "requests_total": services.metrics.requests_total,
            "inference_requests": services.metrics.inference_total,
            "cache_hit_rate": services.cache_hit_rate(),
        },
        engine=services.engine_status(),
    )


@router.get("/models", response_model=ModelList, responses=error_responses(*AUTH_ERRORS, 502, 503))
def models(user: CurrentPrincipal, services: ServicesDep) -> ModelList:
    """Models the engine can answer with. For the embedded engine: the installed packaged models
    (`context_length` is the usable context, the smaller of the model's and the configured one)."""
    return ModelList(models=[m.__dict__ for m in services.chat_model.models()])
