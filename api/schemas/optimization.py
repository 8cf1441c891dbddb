"""Bodies of retrieval-parameter optimisation (``/api/optimization``), built from
:class:`assistant.learning.optimize.Optimizer`'s ``status`` and ``history``. Shapes are ours (the spec
lists the routes only)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assistant.learning.optimize_space import BOUNDS

PARAMETERS = ", ".join(f"`{name}` ({low} to {high})" for name, (low, high) in BOUNDS.items())
RUN_STATES = ["running", "completed", "cancelled", "failed"]
STATES = ["idle", *RUN_STATES]
SOURCES = ["user_data", "locomo", "pending"]
MAX_TRIALS = 1000


class Parameters(BaseModel):
    rag_threshold: float = Field(description="Least fused retrieval similarity for a memory to enter a prompt.")
    rag_limit: int = Field(description="At most this many memories in a prompt.")
    similarity_weight: float = Field(description="Relevance weight of the retrieval similarity.")
    importance_weight: float = Field(description="Relevance weight of importance.")
    freshness_weight: float = Field(description="Relevance weight of freshness.")
    dense_weight: float = Field(description="Hybrid fusion: weight of the dense cosine.")
    keyword_weight: float = Field(description="Hybrid fusion: weight of BM25 (1 - dense_weight once tuned).")
    context_weight: float = Field(description="Hybrid search: weight of the neighbouring memories' keyword match.")
    decay_factor: float = Field(description="Daily decay factor; the decay base rate is -ln(decay_factor).")


class RunOut(BaseModel):
    id: str
    state: str = Field(json_schema_extra={"enum": RUN_STATES})
    source: str = Field(json_schema_extra={"enum": SOURCES}, description=(
        "The objective: `user_data` (the caller's own answers), `locomo` (the cold-start data set), `pending` "
        "(being decided: the data set is being embedded)."))
    trials_done: int = Field(ge=0)
    trials_total: int = Field(ge=0)
    cases_tuning: int = Field(ge=0, description="Questions the study maximises the objective on.")
    cases_validation: int = Field(ge=0, description="Held-out questions a trial must improve on to be applied.")
    baseline_score: float | None = Field(description="The parameters in force at the start, on the tuning cases.")
    baseline_validation: float | None = Field(description="The same on the held-out cases.")
    best_score: float | None = Field(description="The best trial of this run on the tuning cases.")
    best_validation: float | None = Field(description="That trial on the held-out cases.")
    applied_trials: int = Field(ge=0, description="Trials of this run whose parameters were applied.")
    error: str | None
    started_at: str
    finished_at: str | None

    @classmethod
    def of(cls, row: dict[str, Any]) -> RunOut:
        return cls(**{k: row.get(k) for k in cls.model_fields})


class AppliedOut(BaseModel):
    values: Parameters
    source: str = Field(json_schema_extra={"enum": SOURCES[:2]})
    run_id: str
    trial_number: int
    score: float | None
    validation_score: float | None
    applied_at: str


class SettingsOut(BaseModel):
    max_iterations: int
    exploration_weight: float
    n_startup_trials: int = Field(description="TPE's random start: max(1, ceil(10 × exploration_weight)).")
    n_ei_candidates: int = Field(description="TPE's candidates per trial: round(24 / max(exploration_weight, 0.1)).")
    recall_at: int
    quality_weight: float
    min_user_cases: int
    cold_start: bool = Field(description="A cold-start data set is configured (`optimization.dataset_path`).")


class StatusOut(BaseModel):
    state: str = Field(json_schema_extra={"enum": STATES}, description="`idle` before the first run, else the "
                                                                       "latest run's state.")
    run: RunOut | None = Field(description="The caller's latest run (null before the first).")
    current: Parameters = Field(description="The parameters the caller's recall uses now.")
    defaults: Parameters = Field(description="The configured parameters (`[memory]` and the store's weights).")
    applied: AppliedOut | None = Field(description="What optimisation applied for the caller (null: the defaults).")
    bounds: dict[str, list[float]] = Field(description="The search space: parameter -> [low, high].")
    settings: SettingsOut

    @classmethod
    def of(cls, status: dict[str, Any]) -> StatusOut:
        run = status["run"]
        return cls(**{**status, "run": RunOut.of(run) if run else None})


class TrialOut(BaseModel):
    number: int = Field(description="The trial's number in its optuna study (0 is the parameters in force).")
    run_id: str
    source: str = Field(json_schema_extra={"enum": SOURCES[:2]})
    params: Parameters
    score: float | None = Field(description="The objective on the tuning cases (null: the trial failed).")
    validation_score: float | None = Field(description="The objective on the held-out cases.")
    state: str = Field(json_schema_extra={"enum": ["complete", "failed"]})
    applied: bool = Field(description="Its parameters were applied (it beat the applied ones on the held-out cases).")
    created_at: str

    @classmethod
    def of(cls, row: dict[str, Any]) -> TrialOut:
        return cls(**{k: row.get(k) for k in cls.model_fields})


class HistoryOut(BaseModel):
    total: int = Field(ge=0)
    limit: int
    offset: int
    trials: list[TrialOut]


class RunIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{}, {"n_trials": 10}]})

    n_trials: int | None = Field(None, ge=1, le=MAX_TRIALS, description=(
        f"Trials of this run, 1 to {MAX_TRIALS}. Default: `optimization.max_iterations` (50)."))
