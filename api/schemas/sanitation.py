"""Response bodies of the sanitation routes (``/v1/sanitation``) and of the quarantine routes.

The spec leaves the result record's fields to us (:class:`assistant.sanitation.types.SanitationResult`
documents them); the quality assessment has the spec's ``score``, ``trend`` and ``recommendations``
plus its three components. Everything is built from the package's ``as_dict()`` shapes.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.memories import MemoryOut
from assistant.defence.types import DefencePattern
from assistant.memory.types import Memory
from assistant.sanitation.types import QualityAssessment, SanitationResult


class JudgementOut(BaseModel):
    memory_id: str
    verdict: str = Field(description="`stale`, `poisoned` or `contradicted` (the quarantined ones; `ok` is "
                                     "only counted).")
    reason: str = Field(description="Why, in words: what the user reads in the quarantine list.")
    by: str = Field(description="What decided: `defence:static`, `defence:dynamic`, `temporal`, `graph`, "
                                "`judge`...")
    winner_id: str | None = Field(None, description="A contradiction: the memory that won (it keeps its place).")


class DriftOut(BaseModel):
    setting: str = Field(description="The setting corrected, e.g. `sanitation.quarantine_ttl_days`.")
    found: Any = Field(description="The value found.")
    corrected: Any = Field(description="The value used (clamped into the bounds).")
    bounds: list[Any] = Field(description="`[low, high]`.")


class AnomalyOut(BaseModel):
    kind: str = Field(description="`latency_spike` or `error_rate_surge`.")
    component: str = Field(description="`engine`, `embedder`, `bus` or `http`.")
    severity: str = Field(description="`warning` or `severe` (a severe anomaly restarts the component).")
    value: float
    threshold: float
    detail: str
    action: str = Field("", description="What was done: a restart with its attempt and backoff, `marked "
                                        "degraded`, or empty.")


class QualityOut(BaseModel):
    """score = 1 − (re_ask_rate × 0.4 + correction_rate × 0.4 + abandonment_rate × 0.2) (the weights are
    `sanitation.quality_*_weight`), over the window since the caller's last completed run."""

    score: float = Field(description="The composite score: 1 when nothing went wrong, 0 at the default weights' "
                                     "worst (weights summing past 1 can take it below 0).")
    trend: str = Field(description="`Improving`, `Stable` or `Degrading`, from the run history.",
                       json_schema_extra={"enum": ["Improving", "Stable", "Degrading"]})
    recommendations: list[str] = Field(description="What to look at, from the components.")
    re_ask_rate: float = Field(ge=0.0, le=1.0, description="User messages semantically repeating their previous one.")
    correction_rate: float = Field(ge=0.0, le=1.0, description="User messages with the learning heuristic's "
                                                               "correction cue.")
    abandonment_rate: float = Field(ge=0.0, le=1.0, description="Conversations whose last message is unanswered "
                                                                "or followed by no reply within the session window.")
    messages: int = Field(ge=0, description="User messages in the window.")
    conversations: int = Field(ge=0, description="Conversations in the window.")
    window_start: str | None = Field(description="Start of the window (the last run), null before the first run.")
    window_end: str
    regression: bool = Field(False, description="The score dropped past the threshold (a `QualityRegression` "
                                                "event was published).")

    @classmethod
    def of(cls, q: QualityAssessment | dict) -> QualityOut:
        return cls(**(q.as_dict() if isinstance(q, QualityAssessment) else q))


class SanitationResultOut(BaseModel):
    """One sanitation run (between NREM and REM in a dream cycle, or on demand)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    session_id: str | None = Field(description="The dream session it ran in; null for an on-demand run.")
    cycle: int | None = Field(description="The dream cycle; null for an on-demand run.")
    trigger: str = Field(description="`dream` or `manual`.")
    status: str = Field(description="`completed`, `rolled_back` (a critical failure: nothing it did was kept) "
                                    "or `skipped`.")
    started_at: str
    completed_at: str | None
    duration_ms: float = Field(ge=0.0)
    counts: dict[str, int] = Field(description="Memories per verdict (`ok`, `stale`, `poisoned`, `contradicted`), "
                                               "`judged`, and `purged` (quarantined past `quarantine_ttl_days`).")
    quarantined: list[JudgementOut] = Field(description="The memories quarantined by this run, with reasons.")
    purged: list[str] = Field(description="Ids of the memories purged by this run.")
    graph: dict[str, int] = Field(description="Graph integrity: `orphan_nodes`, `dangling_edges`, "
                                              "`unsourced_edges`, `issues` (all fixed).")
    patterns_added: list[str] = Field(description="Ids of the dynamic defence patterns this run added.")
    patterns_rejected: int = Field(ge=0, description="Candidate patterns rejected (they flagged benign text, or "
                                                     "would not compile under RE2 rules).")
    defence: dict[str, Any] = Field(default_factory=dict, description="The defence after this run over defence "
                                    "evolution's attacks: `tested`, `blocked`, `score` (0..100; the "
                                    "`defense_score_x100` gauge).")
    drift: list[DriftOut] = Field(description="Configuration drift corrected (each also logged on the event bus).")
    quality: QualityOut | None = Field(description="The quality assessment of this run.")
    anomalies: list[AnomalyOut]
    rolled_back: bool
    failed_step: str | None = Field(description="The step that failed (`snapshot`, `purge`, `hygiene`, "
                                                "`graph_integrity`, `defence_evolution`, `config_drift`, `quality`, "
                                                "`anomalies`, `commit`), when rolled back.")
    error: str | None
    judge_failures: int = Field(ge=0, description="Engine judge answers that were not valid JSON (counted; the "
                                                  "memory is then `ok`, never quarantined by accident).")

    @classmethod
    def of(cls, r: SanitationResult) -> SanitationResultOut:
        return cls(**r.as_dict())


class SanitationResultList(BaseModel):
    results: list[SanitationResultOut]
    total: int = Field(ge=0, description="How many are in `results`.")


class DefencePatternOut(BaseModel):
    id: str
    pattern: str = Field(description="A normalised regex (RE2 syntax), matched against folded text.")
    hash: str = Field(description="sha256 of the pattern: the dedup key per user.")
    active: bool
    source: str = Field(description="What it was generalised from: `red_team`, `dev_corpus`, `variants`...")
    family: str = Field(description="The attack family of its origin.")
    hits: int = Field(ge=0, description="How many texts it flagged.")
    created_at: str
    deactivated_at: str | None
    session_id: str | None = Field(description="The dream session whose sanitation added it.")

    @classmethod
    def of(cls, p: DefencePattern) -> DefencePatternOut:
        return cls(**p.as_dict())


class DefencePatternList(BaseModel):
    patterns: list[DefencePatternOut] = Field(description="Active patterns, oldest first.")
    total: int = Field(ge=0)


class QuarantinedMemoryOut(MemoryOut):
    quarantined_at: str | None = Field(description="When it was quarantined.")
    quarantine_reason: str | None = Field(description="Why (the sanitation verdict's reason).")
    original_memory_type: str | None = Field(description="The type it had, given back on restore.")

    @classmethod
    def of(cls, m: Memory) -> QuarantinedMemoryOut:  # type: ignore[override]
        return cls(**MemoryOut.of(m).model_dump(), quarantined_at=m.quarantined_at,
                   quarantine_reason=m.quarantine_reason,
                   original_memory_type=m.original_memory_type.value if m.original_memory_type else None)


class QuarantineList(BaseModel):
    memories: list[QuarantinedMemoryOut] = Field(description="Newest quarantine first.")
    total: int = Field(ge=0, description="All of the caller's quarantined memories (not only this page).")
    limit: int
    offset: int
