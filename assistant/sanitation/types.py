"""The values of sanitation: memory verdicts, drift corrections, the quality assessment, anomalies,
and the result record of one run (the spec leaves its fields to us: documented here and in the API)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class MemoryVerdict(StrEnum):
    OK = "ok"
    STALE = "stale"  # time-bound content whose time has passed ("tomorrow at 3", "this week")
    POISONED = "poisoned"  # the injection defence flags it
    CONTRADICTED = "contradicted"  # a newer memory / graph fact says otherwise, and this one lost


class Trend(StrEnum):
    IMPROVING = "Improving"
    STABLE = "Stable"
    DEGRADING = "Degrading"


class Step(StrEnum):
    """The steps of a run, in order (a failure names the step; tests inject a failure at each)."""

    SNAPSHOT = "snapshot"
    PURGE = "purge"
    HYGIENE = "hygiene"
    GRAPH = "graph_integrity"
    DEFENCE = "defence_evolution"
    DRIFT = "config_drift"
    QUALITY = "quality"
    ANOMALIES = "anomalies"
    COMMIT = "commit"


@dataclass(frozen=True)
class Judgement:
    """The verdict on one memory, with the reason a user reads in the quarantine list."""

    memory_id: str
    verdict: MemoryVerdict
    reason: str = ""
    by: str = ""  # what decided: "defence:static", "temporal", "graph", "judge", ...
    winner_id: str | None = None  # contradicted: the memory that won

    def as_dict(self) -> dict:
        return {k: v.value if isinstance(v, StrEnum) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class DriftCorrection:
    setting: str  # "sanitation.quarantine_ttl_days"
    found: Any
    corrected: Any
    bounds: tuple[Any, Any]

    def as_dict(self) -> dict:
        return {"setting": self.setting, "found": self.found, "corrected": self.corrected, "bounds": list(self.bounds)}


@dataclass(frozen=True)
class QualityAssessment:
    """score = 1 - (re_ask_rate x W_re_ask + correction_rate x W_correction + abandonment_rate x W_abandon)."""

    score: float
    re_ask_rate: float
    correction_rate: float
    abandonment_rate: float
    trend: Trend
    recommendations: list[str]
    messages: int  # user messages in the window
    conversations: int
    window_start: str | None
    window_end: str
    regression: bool = False  # the score dropped past the threshold (a QualityRegression event)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["trend"] = self.trend.value
        return out


@dataclass(frozen=True)
class Anomaly:
    kind: str  # "latency_spike" | "error_rate_surge"
    component: str  # "engine" | "embedder" | "bus" | "http"
    severity: str  # "warning" | "severe"
    value: float
    threshold: float
    detail: str
    action: str = ""  # "restarted (attempt 2, backoff 60 s)" | "marked degraded" | ""

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class SanitationResult:
    """One run's record (``GET /v1/sanitation/latest``): counts per verdict, the ids judged bad with
    reasons, patterns added, drift corrections, the quality assessment, anomalies, whether the run
    was rolled back and why, and how long it took."""

    id: str
    user_id: str
    session_id: str | None  # the dream session it ran in; None when run on demand
    cycle: int | None
    trigger: str  # "dream" | "manual"
    status: str  # "completed" | "rolled_back" | "skipped"
    started_at: str
    completed_at: str | None = None
    duration_ms: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)  # ok, stale, poisoned, contradicted, purged, judged
    quarantined: list[dict] = field(default_factory=list)  # Judgement.as_dict() of the quarantined memories
    purged: list[str] = field(default_factory=list)
    graph: dict[str, int] = field(default_factory=dict)  # orphan_nodes, dangling_edges, unsourced_edges, issues
    patterns_added: list[str] = field(default_factory=list)  # pattern ids
    patterns_rejected: int = 0
    defence: dict = field(default_factory=dict)  # tested, blocked, score: the evolution's attacks after this run
    drift: list[dict] = field(default_factory=list)  # DriftCorrection.as_dict()
    quality: dict | None = None  # QualityAssessment.as_dict()
    anomalies: list[dict] = field(default_factory=list)  # Anomaly.as_dict()
    rolled_back: bool = False
    failed_step: str | None = None
    error: str | None = None
    judge_failures: int = 0  # engine judge answers that were not valid JSON (counted, never a quarantine)

    def as_dict(self) -> dict:
        return asdict(self)
