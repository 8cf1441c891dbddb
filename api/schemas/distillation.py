"""Request and response bodies of distillation (``/api/distillation``), built from
:class:`assistant.learning.distill_store.DistillationRun`. The spec names the routes only; the shapes are ours."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from assistant.learning.distill import Distillation
from assistant.learning.distill_prompts import MAX_PROMPT_CHARS
from assistant.learning.distill_store import DistillationRun, DistillPhase

PHASES = ["idle", *(p.value for p in DistillPhase)]
MAX_PROMPTS = 10_000  # the schema's bound; the configured distillation.max_prompts (200) is checked too


class DistillationStartIn(BaseModel):
    """Every field is optional: `{}` (or no body) distils the caller's own past questions."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {}, {"max_prompts": 60}, {"prompts": ["How do I reverse a list in Python?", "What is a LoRA adapter?"]}]})

    prompts: list[str] | None = Field(None, min_length=1, max_length=MAX_PROMPTS, description=(
        "The prompt set, instead of the caller's past questions: each 1 to "
        f"{MAX_PROMPT_CHARS:,} characters, at most `distillation.max_prompts` (200) of them (more is 422 naming the "
        "setting); repeats (case and white space ignored) count once. **A file of prompts** is sent as this list: "
        "read it client-side, one prompt per line, or JSONL whose lines are strings or objects with `prompt`, "
        "`question`, `content` or `text` (or OpenAI `messages`, the last `user` message) — the package's "
        "`assistant.learning.distill_prompts.read_prompt_file(text)` does exactly that."))
    max_prompts: int | None = Field(None, ge=1, le=MAX_PROMPTS, description=(
        "With the caller's past questions: how many, newest first (1 to `distillation.max_prompts`, its default)."))


class TeacherOut(BaseModel):
    engine: str = Field(description="`ollama` or `openai_compatible` (`distillation.teacher_engine`).",
                        json_schema_extra={"enum": ["ollama", "openai_compatible"]})
    model: str = Field(description="The teacher's model (`distillation.teacher_model`).")
    host: str = Field(description="`scheme://host:port` of `distillation.teacher_base_url`: never its path, "
                                  "credentials or the API key.")


class DistillationStatusOut(BaseModel):
    """A distillation run: its phase and progress, or `phase: idle` before the caller's first run."""

    phase: str = Field(json_schema_extra={"enum": PHASES}, description=(
        "`idle` (no run yet), `collecting` (the teacher answers the prompts), `training` and `evaluating` (the "
        "training run the dataset went to), then `active` (the student adapter was better on held-back samples and "
        "not worse on the regression set: it now answers the caller), `rejected` (it was not: nothing changed), "
        "`failed` (see `error`: nothing changed) or `cancelled` (by the caller: nothing changed)."))
    run_id: str | None = Field(description="The distillation run (null while idle).")
    progress: float = Field(ge=0, le=1, description=(
        "The current phase's progress: while `collecting`, prompts done / prompts; while `training` or "
        "`evaluating`, the training run's own progress; 1 once over."))
    prompts: int = Field(ge=0, description="Prompts in the run's prompt set.")
    prompt_source: str | None = Field(json_schema_extra={"enum": ["history", "given", None]}, description=(
        "`history` (the caller's past questions) or `given` (the request's `prompts`)."))
    done: int = Field(ge=0, description="Prompts the teacher was asked so far: `answered` + `failed` + `flagged`.")
    answered: int = Field(ge=0, description="Usable answers collected (the dataset).")
    failed: int = Field(ge=0, description="Prompts the teacher failed (unreachable, an HTTP error, an empty answer, "
                                          "a tool call instead of an answer). After 5 in a row it is given up on.")
    flagged: int = Field(ge=0, description="Answers the prompt-injection defence flagged: dropped, never trained on.")
    truncated: int = Field(ge=0, description="Answers cut at `distillation.max_tokens` (kept, counted in `answered`).")
    dataset_size: int = Field(ge=0, description="Samples handed to the training run (0 until then).")
    teacher: TeacherOut | None = Field(description="The run's teacher (while idle: the configured one, or null).")
    training_run_id: str | None = Field(description="The training run trained on the dataset: see "
                                                    "`GET /api/training/status`.")
    error: str | None = Field(description="Why the run failed (or its adapter was rejected), precisely.")
    created_at: str | None
    updated_at: str | None
    finished_at: str | None
    ready: bool = Field(description="A run can start now as far as the configuration goes (LoRA on, a teacher set).")
    unavailable: str | None = Field(description="Why a run cannot start (LoRA off, no teacher), when `ready` is false.")

    @classmethod
    def of(cls, run: DistillationRun | None, service: Distillation) -> DistillationStatusOut:
        reason = service.unavailable()
        readiness = {"ready": reason is None, "unavailable": reason}
        if run is None:
            from assistant.learning.distill_teacher import identity

            teacher = identity(service.settings)
            return cls(phase="idle", run_id=None, progress=0.0, prompts=0, prompt_source=None, done=0, answered=0,
                       failed=0, flagged=0, truncated=0, dataset_size=0,
                       teacher=None if teacher is None else TeacherOut(**teacher.as_dict()), training_run_id=None,
                       error=None, created_at=None, updated_at=None, finished_at=None, **readiness)
        data = run.as_dict()
        return cls(phase=run.phase.value, run_id=run.id, progress=run.progress, prompts=run.prompts,
                   prompt_source=run.prompt_source, done=run.done, answered=run.answered, failed=run.failed,
                   flagged=run.flagged, truncated=run.truncated, dataset_size=run.dataset_size,
                   teacher=TeacherOut(**data["teacher"]), training_run_id=run.training_run_id, error=run.error,
                   created_at=run.created_at, updated_at=run.updated_at, finished_at=run.finished_at, **readiness)
