"""Retrieval-parameter optimisation: `GET /api/optimization/status` and `GET /api/optimization/history` (the
spec's), and beyond the spec `POST /api/optimization/run` and `POST /api/optimization/cancel`.

While `optimization.enabled = false` (the default) every route is 503 `SERVICE_UNAVAILABLE` naming the key,
checked before the body. Everything is the caller's own: their runs, trials and applied parameters; a
trial or run of another user is never shown. Reads need any key; starting or cancelling a run needs a
`user` key. Not admin: a run tunes only the caller's own recall, is bounded by its trial count, and only
one runs at a time on the server. The work is :class:`assistant.learning.optimize.Optimizer`'s.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, Limit, Offset, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.optimization import PARAMETERS, HistoryOut, RunIn, RunOut, StatusOut, TrialOut
from assistant.learning.optimize import Optimizer

DISABLED = "retrieval-parameter optimisation is disabled (optimization.enabled = false)"
OPTIMIZATION = service("optimization", DISABLED)
Opt = Annotated[Optimizer, OPTIMIZATION]
router = APIRouter(prefix="/api/optimization", tags=["extended"], dependencies=[OPTIMIZATION])

OWNER = "Only the caller's own runs, trials and parameters."
HOW = f"""

**What is tuned.** Bayesian optimisation (optuna's TPE sampler, the study stored in `data_dir/optuna.db`, one
per user and objective source) of the parameters the caller's recall runs with: {PARAMETERS}. Relevance weights
are normalised to sum 1 and `keyword_weight` = 1 - `dense_weight`.

**Objective.** `(1 - a) × R + a × Q - 0.01 × mean prompt size / 10`: R = recall@`recall_at` (5) of the memories
that later answers used (their distinctive words reached the answer) or that feedback marked useful
(`useful_memory_ids`), among what the prompt would carry with the trial's parameters; Q = the answers' quality
(sanitation's re-ask and correction weights) with the memories injected into re-asked or corrected answers and
not used counted against it; a = `quality_weight` (0.3). With fewer than `optimization.min_user_cases` (20) such
answers, the cold start: LoCoMo R@5 on `optimization.dataset_path` (a = 0). Each trial re-scores features
computed once (no search, no embedding per trial).

**Exploration.** `exploration_weight` w sets TPE's exploration: `n_startup_trials` = max(1, ceil(10 w)) random
trials, then `n_ei_candidates` = round(24 / max(w, 0.1)) points drawn per trial (fewer: more exploration).

**Applied only if better.** The questions are split by conversation into tuning and held-out cases
(`validation_fraction`, 0.3); a trial that beats the run's best tuning score is applied only when it also beats
the applied parameters on the held-out cases; the caller's recall then uses it at once."""


@router.get("/status", response_model=StatusOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="Optimisation status",
            description="The caller's latest run (`state`: `idle` before the first, then `running`, `completed`, "
                        "`cancelled` or `failed`; trials done of total; baseline and best scores on the tuning and "
                        "held-out cases; the objective `source`), the parameters their recall uses now (`current`) "
                        "against the configured `defaults`, what was `applied` and when, the search space and the "
                        "settings." + HOW + ROLE_READ + OWNER)
def status(user: CurrentPrincipal, optimizer: Opt) -> StatusOut:
    return StatusOut.of(optimizer.status(str(user.user_id)))


@router.get("/history", response_model=HistoryOut, responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="Parameter history",
            description="Every trial of the caller's runs, oldest first: its number in the study, parameters, "
                        "score on the tuning cases, score on the held-out cases, state (`complete`, `failed`) and "
                        "whether it was applied. Paged with `limit` (1 to 1,000, default 100) and `offset`; "
                        "`run_id` keeps one run's trials (an unknown or another user's run: an empty page)."
                        + HOW + ROLE_READ + OWNER)
def history(user: CurrentPrincipal, optimizer: Opt, limit: Limit = 100, offset: Offset = 0,
            run_id: Annotated[str | None, Query(max_length=64, description="Only this run's trials.")] = None,
            ) -> HistoryOut:
    total, rows = optimizer.history(str(user.user_id), limit, offset, run_id)
    return HistoryOut(total=total, limit=limit, offset=offset, trials=[TrialOut.of(r) for r in rows])


@router.post("/run", status_code=202, response_model=RunOut, responses=error_responses(400, *AUTH_ERRORS, 409, 422, 503),
             summary="Start an optimisation run",
             description="Not in the spec's table: starts a run of `n_trials` trials (default "
                         "`optimization.max_iterations`) for the caller in the background and answers 202 with the "
                         "run (`state: running`); follow it with `GET /api/optimization/status` (a `TrainingProgress` "
                         "signal with `data.task = \"optimization\"` is also published per trial). 409 `CONFLICT` "
                         "while a run is under way (one at a time on the server; `details.run_id` when it is the "
                         "caller's), or when there is nothing to optimise against: fewer than "
                         "`optimization.min_user_cases` usable answers and no `optimization.dataset_path` "
                         "(`details.reason = not_enough_data`, with the counts)." + HOW + ROLE_CHANGE
                         + "Not admin: it tunes the caller's own recall only.")
def run(user: CurrentPrincipal, optimizer: Opt,
        body: Annotated[RunIn | None, Body(description="None, or the run's options.")] = None) -> RunOut:
    body = body or RunIn()
    return RunOut.of(optimizer.start(str(user.user_id), body.n_trials))


@router.post("/cancel", response_model=StatusOut, responses=error_responses(*AUTH_ERRORS, 404, 503),
             summary="Cancel the caller's run",
             description="Not in the spec's table: asks the caller's running run to stop after its current trial "
                         "(parameters already applied stay applied; the run ends `cancelled`). 404 `NOT_FOUND` when "
                         "none of the caller's runs is under way." + ROLE_CHANGE + OWNER)
def cancel(user: CurrentPrincipal, optimizer: Opt) -> StatusOut:
    optimizer.cancel(str(user.user_id))
    return StatusOut.of(optimizer.status(str(user.user_id)))
