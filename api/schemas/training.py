"""Request and response bodies of the training routes (``/api/training``); built from the package's values
(:mod:`assistant.learning.feedback`, :mod:`assistant.learning.runs`, :class:`assistant.learning.types.AdapterRecord`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import BaseModel, Field

from assistant.learning.feedback import MAX_MEMORY_IDS, MAX_TEXT
from assistant.learning.runs import Run
from assistant.learning.types import AdapterRecord, RunState

STATES = [s.value for s in RunState]
PHASES = ["queued", "preparing", "training", "converting", "smoke_check", "evaluating", *STATES[4:]]


class FeedbackIn(BaseModel):
    message_id: UUID = Field(description="The assistant message rated: an answer of one of the caller's conversations "
                                         "(the `id` of a chat reply). Another user's or an unknown message is 404.")
    rating: int = Field(ge=-1, le=1, description="-1 (bad), 0 (neutral) or +1 (good). +1 without text makes the "
                                                 "answer itself a training sample; 0 or -1 without text is a rating only.")
    correction: str | None = Field(None, max_length=MAX_TEXT, description=(
        "What was wrong, or the right fact, in the caller's words; without `preferred_answer` it is trained on as "
        "the answer (sample source `correction`)."))
    preferred_answer: str | None = Field(None, max_length=MAX_TEXT, description=(
        "The whole answer the assistant should have given; trained on verbatim (sample source `preferred`)."))
    useful_memory_ids: list[UUID] = Field(default_factory=list, max_length=MAX_MEMORY_IDS, description=(
        "Memories that helped this answer (ids from the chat reply's `memories`); they feed the optimisation "
        "of retrieval parameters. Not checked against the memory store (a deleted memory is harmless)."))


class FeedbackOut(BaseModel):
    id: str = Field(description="The feedback's id.")
    message_id: str = Field(description="The rated answer.")
    conversation_id: str = Field(description="Its conversation.")
    kind: str = Field(description="`explicit` (this route); `re_ask` and `correction` rows are captured implicitly.")
    rating: int = Field(description="-1, 0 or +1.")
    sample: bool = Field(description="Whether it yields a training sample.")
    correction: str | None = Field(description="The correction sent, if any.")
    preferred_answer: str | None = Field(description="The preferred answer sent, if any.")
    useful_memory_ids: list[str] = Field(description="The memories marked useful.")
    created_at: str = Field(description="First submitted (ISO 8601, UTC).")
    updated_at: str = Field(description="Last replaced (ISO 8601, UTC).")
    training_enabled: bool = Field(description="`lora.enabled`: while false, feedback is kept but nothing trains.")
    run_started: RunOut | None = Field(description="The training run this submission started (`lora.auto_start` with "
                                                   "`lora.min_samples` new samples), or null.")


class ProgressOut(BaseModel):
    phase: str = Field(description="What the run is doing: `queued`, `preparing`, `training`, `converting`, "
                                   "`smoke_check`, `evaluating`, then its final state.",
                       json_schema_extra={"enum": PHASES})
    step: int = Field(ge=0, description="Training steps done (0 outside the training phase's steps).")
    total_steps: int = Field(ge=0, description="Training steps of the run (0 before they are known).")
    fraction: float = Field(ge=0, le=1, description="`step` / `total_steps` (0 when unknown).")
    loss: float | None = Field(description="The last step's loss (answer tokens' mean NLL), if any.")


class RunOut(BaseModel):
    id: str = Field(description="The run's id.")
    source: str = Field(description="What it trains on: `feedback`, `distillation`, or an adapter submitted by "
                                    "`federated` sync.")
    state: str = Field(description="`preparing` -> `training` -> `evaluating` -> `active` | `rejected`; or `failed`, "
                                   "`cancelled` (beyond the issue's list: stopped by the caller).",
                       json_schema_extra={"enum": STATES[1:]})
    progress: ProgressOut = Field(description="Where the run is.")
    losses: list[float] = Field(description="The loss curve: one loss per training step.")
    metrics: dict[str, Any] = Field(description="Evaluation: mean answer NLL on the held-back feedback (`held_out`) "
                                                "and on the regression set (`regression`) for `base`, `active` and "
                                                "`candidate`, the `decision` and its `reference`, `adapter_bytes`, "
                                                "`steps`, `duration_s`, the smoke check's `smoke_answer`.")
    samples: int = Field(ge=0, description="Samples trained on (a submitted adapter: the samples it was made from).")
    held_out: int = Field(ge=0, description="Held-back samples it was evaluated on.")
    base_model: str = Field(description="The base model the adapter is for.")
    adapter_id: str | None = Field(description="The adapter it activated, if it became active.")
    error: str | None = Field(description="Why it failed, was rejected or cancelled.")
    created_at: str = Field(description="Started (ISO 8601, UTC).")
    updated_at: str = Field(description="Last progress (ISO 8601, UTC).")
    finished_at: str | None = Field(description="Ended (ISO 8601, UTC), or null while it runs.")

    @classmethod
    def of(cls, run: Run) -> RunOut:
        return cls(**run.as_dict())


class AdapterOut(BaseModel):
    id: str = Field(description="The adapter's id.")
    run_id: str = Field(description="The run that made it.")
    base_model: str = Field(description="The base model it applies to (the engine's model name).")
    samples: int = Field(ge=0, description="Samples it was trained on.")
    size_bytes: int = Field(ge=0, description="The GGUF adapter file's size.")
    metrics: dict[str, Any] = Field(description="Its evaluation when it was activated.")
    created_at: str = Field(description="Activated (ISO 8601, UTC).")

    @classmethod
    def of(cls, record: AdapterRecord | None) -> AdapterOut | None:
        if record is None:
            return None
        size = record.gguf_path.stat().st_size if record.gguf_path.is_file() else 0
        return cls(id=record.id, run_id=record.run_id, base_model=record.base_model, samples=record.samples,
                   size_bytes=size, metrics=record.metrics, created_at=record.created_at)


class SamplesOut(BaseModel):
    feedback: int = Field(ge=0, description="Feedback rows, explicit and implicit.")
    samples: int = Field(ge=0, description="Rows that yield a training sample.")
    new_samples: int = Field(ge=0, description="Samples new since the last evaluated feedback run (active or "
                                               "rejected); a run needs `min_samples` of them.")
    min_samples: int = Field(ge=1, description="`lora.min_samples` (50 by default).")
    positive: int = Field(ge=0, description="Ratings +1.")
    neutral: int = Field(ge=0, description="Ratings 0.")
    negative: int = Field(ge=0, description="Ratings -1 (implicit re-asks and corrections included).")
    implicit: int = Field(ge=0, description="Rows captured from sanitation's re-ask and correction signals.")


class StatusOut(BaseModel):
    enabled: bool = Field(description="`lora.enabled`.")
    state: str = Field(description="The caller's pipeline: the state of their current or latest run, `idle` before "
                                   "the first.", json_schema_extra={"enum": STATES})
    base_model: str = Field(description="The base model adapters are trained for.")
    samples: SamplesOut = Field(description="The caller's feedback and samples.")
    run: RunOut | None = Field(description="The current run, else the latest one (with its loss curve).")
    progress: ProgressOut | None = Field(description="`run.progress`, repeated for progress bars.")
    loss_curve: list[float] = Field(description="`run.losses`, repeated for plots.")
    runs: list[RunOut] = Field(description="The caller's 20 latest runs, newest first.")
    active_adapter: AdapterOut | None = Field(description="The adapter applied to the caller's answers, or null.")

    @classmethod
    def of(cls, status: dict[str, Any]) -> StatusOut:
        run = status["run"]
        return cls(enabled=status["enabled"], state=status["state"], base_model=status["base_model"],
                   samples=SamplesOut(**status["samples"]), run=None if run is None else RunOut.of(run),
                   progress=None if run is None else ProgressOut(**run.progress()),
                   loss_curve=[] if run is None else list(run.losses), runs=[RunOut.of(r) for r in status["runs"]],
                   active_adapter=AdapterOut.of(status["active_adapter"]))


FeedbackOut.model_rebuild()
