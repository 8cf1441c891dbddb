"""Distillation: `POST /api/distillation/start` and `GET /api/distillation/status` (the spec's), and beyond the
spec `POST /api/distillation/cancel`.

While `distillation.enabled = false` (the default) every route is 503 `SERVICE_UNAVAILABLE` naming the key,
checked before the body. Starting a run is also 503 while `lora.enabled = false` (distillation trains a LoRA
adapter) or no teacher is configured (`distillation.teacher_base_url`, `distillation.teacher_model`), each
named. Reads need any key; start and cancel a `user` key. Not admin: a run acts only for the caller (their own
questions, their own adapter), bounded by `distillation.max_prompts`, one at a time per user. The work is
:class:`assistant.learning.distill.Distillation`'s; this module only maps HTTP.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Body, Query

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.distillation import DistillationStartIn, DistillationStatusOut
from assistant.errors import ServiceUnavailableError
from assistant.learning.distill import Distillation

DISABLED = "distillation is disabled (distillation.enabled = false)"
DISTILLATION = service("distillation", DISABLED)


def _ready(found: Distillation) -> None:
    reason = found.unavailable()
    if reason is not None:
        raise ServiceUnavailableError(reason)


Distiller = Annotated[Distillation, DISTILLATION]
ReadyDistiller = Annotated[Distillation, service("distillation", DISABLED, _ready)]
router = APIRouter(prefix="/api/distillation", tags=["extended"], dependencies=[DISTILLATION])

OWNER = "Only the caller's runs: another user's run is 404, as an unknown one."
HOW = """

**What a run does.** The configured teacher (`distillation.teacher_engine`: `ollama` or `openai_compatible`, at
`distillation.teacher_base_url`, model `distillation.teacher_model` — a larger model, on another machine say)
answers each prompt of the prompt set (`distillation.concurrency` at a time, at most `distillation.max_tokens` per
answer). Each usable answer becomes one training sample (source `distillation`): the caller's question as the
prompt, the teacher's answer as the target. Teacher answers are data, never instructions: they are training
targets only, an answer the prompt-injection defence flags is dropped, and a tool call is not an answer. The
dataset goes to the training pipeline (`GET /api/training/status` shows that run), which trains the caller's
LoRA adapter, evaluates it on held-back samples and the regression set, and activates it only when it is better
and not worse there; a rejected, failed or cancelled run changes nothing. Fewer usable answers than
`lora.min_samples` (50) fail the run with the counts in `error`. The prompts and answers are held in memory
until handed to the training run (whose store seals them); the run's record keeps counts and the teacher's
identity only. Progress is also published as `TrainingProgress` signals (`task: distillation`)."""


@router.post("/start", status_code=202, response_model=DistillationStatusOut,
             responses=error_responses(400, *AUTH_ERRORS, 409, 413, 422, 503), summary="Start a distillation run",
             description="Starts a run for the caller in the background and answers 202 with its status (`phase: "
                         "collecting`); follow it with `GET /api/distillation/status`. The prompt set is the caller's "
                         "own past questions (their messages in all their conversations, newest first, repeats "
                         "dropped, up to `max_prompts`), or the body's `prompts` (a file's lines: see the field). "
                         "Fewer distinct prompts than `lora.min_samples` is 422 naming `prompts`. 409 `CONFLICT` "
                         "while the caller has a distillation or training run under way (`details.run_id`, "
                         "`details.kind`). 503 while LoRA is off or no teacher is configured (the message names the "
                         "setting)." + HOW + ROLE_CHANGE
                         + "Not admin: the run acts only for the caller, bounded by the configured maximum.")
def start(user: CurrentPrincipal, distiller: ReadyDistiller,
          body: Annotated[DistillationStartIn | None, Body(description="None, or the run's options.")] = None,
          ) -> DistillationStatusOut:
    body = body or DistillationStartIn()
    run = distiller.start(str(user.user_id), body.prompts, max_prompts=body.max_prompts)
    return DistillationStatusOut.of(run, distiller)


@router.get("/status", response_model=DistillationStatusOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503),
            summary="The caller's distillation run: phase and progress",
            description="The caller's run under way, else their latest (`phase: idle` before the first), or with "
                        "`run_id` that run (404 when it is not the caller's). `phase` and `progress` (answers "
                        "collected of the prompts, then the training run's progress), the teacher's identity "
                        "(engine, model, host: never its API key), the counts, the training run's id and the "
                        "dataset's size. `ready`/`unavailable` say whether a run could start now." + HOW + ROLE_READ
                        + OWNER)
def status(user: CurrentPrincipal, distiller: Distiller,
           run_id: Annotated[UUID | None, Query(description="A run of the caller's (default: the current or latest "
                                                            "one). Not a UUID: 422.")] = None,
           ) -> DistillationStatusOut:
    caller = str(user.user_id)
    run = distiller.get(caller, str(run_id)) if run_id is not None else distiller.status(caller)
    return DistillationStatusOut.of(run, distiller)


@router.post("/cancel", status_code=202, response_model=DistillationStatusOut,
             responses=error_responses(*AUTH_ERRORS, 404, 503), summary="Cancel the caller's distillation run",
             description="Not in the spec's table: stops the caller's run under way. While collecting, the teacher "
                         "is not asked again (an answer in progress is stopped) and nothing is trained; while "
                         "training, the training run is cancelled. The run ends `cancelled` and nothing changes "
                         "(the active adapter stays). Answers 202 with the run as it is now; 404 `NOT_FOUND` when the "
                         "caller has no run under way." + ROLE_CHANGE + OWNER)
def cancel(user: CurrentPrincipal, distiller: Distiller) -> DistillationStatusOut:
    return DistillationStatusOut.of(distiller.cancel(str(user.user_id)), distiller)
