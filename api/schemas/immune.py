"""Response body of the immune status (``GET /api/v1/immune/status``), built from
:meth:`assistant.extended.immune.ImmuneView.status`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class LayerOut(BaseModel):
    """One layer of the defence. Besides `name` and `active`, what it holds: `patterns` (static rules; the caller's
    active evolved patterns, with `deactivated`, `hits`, `by_source`, `by_family`), `variant` and
    `indirect_threshold` (classifier), `band` (judge), `reason` (why a layer is absent)."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(json_schema_extra={"enum": ["normalisation", "static", "dynamic", "classifier", "judge"]})
    active: bool


class DefenceOut(BaseModel):
    enabled: bool = Field(description="`[defence] enabled`.")
    threshold: float | None = Field(description="From this suspicion the caller's own messages are flagged.")
    indirect_threshold: float | None = Field(description="From this suspicion indirect content (tool results, "
                                                         "memories, mail, web pages) is flagged.")
    neutralise: bool = Field(description="Flagged spans of indirect content are replaced before the model reads it.")
    layers: list[LayerOut] = Field(description="In the order they run.")
    inspected: int = Field(ge=0, description="Texts inspected since start (server-wide).")
    flagged: int = Field(ge=0, description="Texts flagged since start (server-wide).")


class RedTeamStatusOut(BaseModel):
    status: str = Field(description="`disabled` (`red_team.enabled = false`), `never_run`, `idle` or `running` (a run "
                                    "of the caller's under way).",
                        json_schema_extra={"enum": ["disabled", "never_run", "idle", "running"]})
    reason: str | None = Field(None, description="Why it is disabled.")
    latest: dict[str, Any] | None = Field(None, description="The caller's latest completed run: `run_id`, "
                                          "`defense_score`, `attacks_tested`, `attacks_blocked`, `bypasses`, `mode`, "
                                          "`started_at`, `finished_at`, `families` (score per family).")
    running: dict[str, Any] | None = Field(None, description="The caller's run under way: `run_id`, `done`, `total`, "
                                                             "`started_at`.")


class SanitationStatusOut(BaseModel):
    status: str = Field(description="`disabled`, `never_run` or `idle`.",
                        json_schema_extra={"enum": ["disabled", "never_run", "idle"]})
    reason: str | None = Field(None, description="Why it is disabled.")
    latest: dict[str, Any] | None = Field(None, description="The caller's latest run: `id`, `status`, `trigger`, "
                                          "`started_at`, `completed_at`, `patterns_added`, `patterns_rejected`, "
                                          "`quarantined`, `defense_score` (0..100, over its evolution's attacks), "
                                          "`quality_score`, `rolled_back`.")


class QuarantineOut(BaseModel):
    quarantined: int = Field(ge=0, description="The caller's memories in quarantine now.")
    purged: int = Field(ge=0, description="The caller's quarantined memories purged after `quarantine_ttl_days`.")
    last_purged_at: str | None = None


class AnomaliesOut(BaseModel):
    detected: int = Field(ge=0, description="Anomalies detected since start (the sanitation counter).")
    recent: list[dict[str, Any]] = Field(description="The latest anomaly signals (server-wide, no user data): `at`, "
                                                     "`kind`, `component`, `severity`, `value`, `threshold`, "
                                                     "`detail`, `action`.")


class RestartOut(BaseModel):
    attempts: int = Field(ge=0)
    max_attempts: int = Field(ge=0, description="`sanitation.max_restart_count`.")
    last_error: str | None
    degraded: bool
    degraded_reason: str | None


class GaugesOut(BaseModel):
    defense_score_x100: int | None = Field(description="The latest defence score (a red-team or sanitation run), "
                                                       "0..100: the Prometheus gauge.")
    quality_score_x100: int | None = Field(description="The latest quality score × 100 (sanitation on).")
    sanitation: dict[str, Any] | None = Field(description="Sanitation's counters since start (sanitation on).")


class ImmuneStatusOut(BaseModel):
    defence: DefenceOut
    red_team: RedTeamStatusOut
    sanitation: SanitationStatusOut
    quarantine: QuarantineOut
    anomalies: AnomaliesOut
    restarts: dict[str, RestartOut] = Field(description="Per component the sanitation supervisor restarts (`engine`, "
                                                        "`embedder`, `bus`).")
    gauges: GaugesOut

    @classmethod
    def of(cls, status: dict[str, Any]) -> ImmuneStatusOut:
        return cls(**status)
