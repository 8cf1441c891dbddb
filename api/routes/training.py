"""Feedback and local LoRA training: `POST /api/training/feedback` and `GET /api/training/status` (the spec's),
and beyond the spec `POST /api/training/start`, `GET /api/training/runs/{run_id}` and
`POST /api/training/runs/{run_id}/cancel`.

Feedback is accepted whatever `lora.enabled` says (collecting it costs nothing, and the samples are there
once training is switched on); every other route is 503 `SERVICE_UNAVAILABLE` naming `lora.enabled` while
it is false, checked before the body. Reads need any key; feedback, start and cancel a `user` key. Owner
rule: the caller's messages, feedback, runs and adapter only; another user's message or run is 404, as an
unknown one. The work is :class:`assistant.learning.service.TrainingService`'s.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.training import FeedbackIn, FeedbackOut, RunOut, StatusOut
from assistant.errors import ServiceUnavailableError
from assistant.learning.service import DISABLED, TrainingService


def _enabled(training: TrainingService) -> None:
    if not training.enabled:
        raise ServiceUnavailableError(DISABLED)


UNBUILT = "the training service is not built"
Training = Annotated[TrainingService, service("training", UNBUILT)]
ENABLED = service("training", UNBUILT, _enabled)
router = APIRouter(prefix="/api/training", tags=["extended"])

OWNER = "Owner rule: the caller's own feedback, runs and adapter; another user's run is 404, as an unknown one."
PIPELINE = """

**The pipeline.** A run trains a rank-`lora.rank` (8) LoRA adapter of the base model (the packaged GGUF,
dequantised by transformers, adapted on the attention query and value projections) with peft on CPU at
`lora.learning_rate` (1e-4), on the caller's samples minus a held-back part (`lora.held_out_fraction`, 0.2,
chosen by a hash of each sample: never trained on); the loss is the answer's alone. It converts the adapter to
a GGUF LoRA with llama.cpp's converter, checks that llama.cpp loads it with the base model and answers, then
evaluates it: mean answer NLL on the held-back samples and on a regression set shipped with the package (20
general questions and tool calls). It becomes the caller's **active** adapter (applied to the caller's answers
only) when it is strictly better than what serves the caller now (the active adapter, else the base model) on
the held-back samples AND not worse than the base model by more than `lora.regression_tolerance` (5 %) on the
regression set; otherwise `rejected`. A rejected, failed or cancelled run changes nothing: the previous
adapter stays. Runs go one at a time through one background worker (`phase: queued` while waiting); progress
is also published as a `TrainingProgress` signal (`GET /api/v1/signals`)."""


@router.post("/feedback", response_model=FeedbackOut, responses=error_responses(400, *AUTH_ERRORS, 404, 413, 422),
             summary="Rate an answer, correct it or give the preferred answer",
             description="Feedback on one of the caller's assistant messages (a chat reply's `id`): a "
                         "`rating` (-1, 0, +1), optionally a `correction` and/or a `preferred_answer` (each up to "
                         "8,000 characters), and the memories that helped (`useful_memory_ids`). A second feedback on "
                         "the same message replaces the first. The texts are stored encrypted, per user. What becomes "
                         "a training sample (the conversation up to the question, then the answer to learn): the "
                         "preferred answer; else the correction; else, for +1, the rated answer itself; 0 or -1 "
                         "without text is a rating only. Re-asks and corrections the caller makes in chat are "
                         "captured too (after sanitation's quality assessment, and before each run): a -1 rating of "
                         "the answer; a re-ask whose second answer the caller accepted (moved on) trains on that "
                         "answer. Accepted while `lora.enabled = false` (nothing trains then: `training_enabled` "
                         "false). With `lora.auto_start` a run starts by itself once the caller has "
                         "`lora.min_samples` (50) new samples (`run_started`). A message that is not the caller's, or "
                         "does not exist, is 404; a user message (not an answer) is 422 on `message_id`."
                         + ROLE_CHANGE + OWNER)
def feedback(body: FeedbackIn, user: CurrentPrincipal, training: Training) -> FeedbackOut:
    stored, started = training.feedback(str(user.user_id), str(body.message_id), body.rating,
                                        correction=body.correction, preferred_answer=body.preferred_answer,
                                        useful_memory_ids=[str(m) for m in body.useful_memory_ids])
    return FeedbackOut(**stored.as_dict(), training_enabled=training.enabled,
                       run_started=None if started is None else RunOut.of(started))


@router.get("/status", response_model=StatusOut, responses=error_responses(*AUTH_ERRORS, 503), dependencies=[ENABLED],
            summary="The caller's training pipeline",
            description="The caller's samples (feedback rows, samples, samples new since the last evaluated run, "
                        "`min_samples`), the pipeline's `state` (`idle` before the first run, else the current or "
                        "latest run's: `preparing`, `training`, `evaluating`, `active`, `rejected`, `failed`, "
                        "`cancelled`), that run with its `progress` and `loss_curve`, the 20 latest runs and the "
                        "active adapter. 503 while `lora.enabled = false`." + PIPELINE + ROLE_READ + OWNER)
def status(user: CurrentPrincipal, training: Training) -> StatusOut:
    return StatusOut.of(training.status(str(user.user_id)))


@router.post("/start", status_code=202, response_model=RunOut,
             responses=error_responses(*AUTH_ERRORS, 409, 503), dependencies=[ENABLED],
             summary="Start a training run on the caller's feedback",
             description="Not in the spec's table: queues a run on the caller's feedback samples and answers 202 with "
                         "it (`state: preparing`, `phase: queued`); follow it with `GET /api/training/runs/{run_id}` "
                         "or the status. 409 `CONFLICT` while one of the caller's runs is under way (`details.run_id`, "
                         "`details.state`), or with fewer than `lora.min_samples` samples new since the caller's last "
                         "evaluated run (`details.reason: not_enough_samples`, `new_samples`, `samples`, "
                         "`min_samples`). 503 while `lora.enabled = false`, or when the base model file is missing."
                         + PIPELINE + ROLE_CHANGE + OWNER)
def start(user: CurrentPrincipal, training: Training) -> RunOut:
    return RunOut.of(training.start(str(user.user_id)))


@router.get("/runs/{run_id}", response_model=RunOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503),
            dependencies=[ENABLED], summary="A training run",
            description="Not in the spec's table: one of the caller's runs, under way (its progress and loss curve so "
                        "far) or over (its evaluation in `metrics`). An id that is not a UUID is 422."
                        + ROLE_READ + OWNER)
def get_run(run_id: UUID, user: CurrentPrincipal, training: Training) -> RunOut:
    return RunOut.of(training.get_run(str(user.user_id), str(run_id)))


@router.post("/runs/{run_id}/cancel", response_model=RunOut,
             responses=error_responses(*AUTH_ERRORS, 404, 409, 422, 503), dependencies=[ENABLED],
             summary="Cancel a training run",
             description="Not in the spec's table: asks the caller's run to stop; it stops between two training "
                         "steps or phases and ends `cancelled`, changing nothing (the previous adapter stays). "
                         "Answers the run as it is now (still running until the worker sees the request). A run that "
                         "is over is 409 `CONFLICT` (`details.state`)." + ROLE_CHANGE + OWNER)
def cancel(run_id: UUID, user: CurrentPrincipal, training: Training) -> RunOut:
    return RunOut.of(training.cancel(str(user.user_id), str(run_id)))
