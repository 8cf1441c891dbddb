"""The optuna side of retrieval-parameter optimisation: the study, its sampler, and the trial loop with
the apply-only-if-better rule.

**Storage.** One SQLite file next to the data, ``data_dir/optuna.db`` (optuna's RDB storage); one
study per user and objective source (``retrieval.<user id>.<source>``: scores on the user's own answers
and on LoCoMo are not comparable, so they never share a study). A new run continues the study.

**Exploration.** ``optimization.exploration_weight`` (w, default 1.0) sets the two exploration terms of
optuna's TPE sampler:

- ``n_startup_trials = max(1, ceil(10 x w))``: trials drawn at random before TPE models the space
  (w = 1 gives optuna's default, 10; w = 0 starts modelling after one trial);
- ``n_ei_candidates = max(1, round(24 / max(w, 0.1)))``: how many points TPE draws from its model of the
  good region before it keeps the one with the best expected improvement. Fewer candidates, a noisier
  argmax: more exploration (w = 1 gives optuna's default, 24; w = 2 gives 12; w = 0 gives 240, the
  greediest).

Trials already in a continued study count towards the startup trials.

**Apply only if better.** The cases are split in two (:func:`assistant.learning.optimize_score.split`):
the study maximises the objective on the tuning side; a trial whose tuning score beats the best so far
in this run (which starts at the currently applied parameters' score) is a candidate, and a candidate is
applied only when its score on the held-out validation side beats the validation score of the
parameters applied at that moment. The study's first trial in a new study is the current parameters
themselves (enqueued), so the history starts from what is in use.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.learning import optimize_space as space
from assistant.learning.optimize_score import Batch, Score
from assistant.memory.tuning import RetrievalParams

STUDY_FILE = "optuna.db"


def startup_trials(exploration_weight: float) -> int:
    return max(1, math.ceil(10 * exploration_weight))


def ei_candidates(exploration_weight: float) -> int:
    return max(1, round(24 / max(exploration_weight, 0.1)))


def sampler_for(exploration_weight: float, seed: int | None = None) -> Any:
    """optuna's TPE sampler with ``exploration_weight`` mapped as the module says."""
    import optuna

    return optuna.samplers.TPESampler(n_startup_trials=startup_trials(exploration_weight),
                                      n_ei_candidates=ei_candidates(exploration_weight), seed=seed)


def storage_url(data_dir: Path) -> str:
    return f"sqlite:///{Path(data_dir) / STUDY_FILE}"


def study_name(user_id: str, source: str) -> str:
    return f"retrieval.{user_id}.{source}"


def open_study(storage: str | None, name: str, exploration_weight: float, seed: int | None = None) -> Any:
    """Create or continue the study ``name`` (``storage`` None: in memory, for benchmarks)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name=name, storage=storage, direction="maximize",
                               sampler=sampler_for(exploration_weight, seed), load_if_exists=True)


@dataclass(frozen=True)
class TrialOutcome:
    number: int
    raw: dict[str, float]  # the sampled point
    values: dict[str, float | int]  # the parameters it stands for
    score: Score | None  # on the tuning cases
    validation: Score | None  # on the held-out cases
    state: str  # "complete" | "failed"
    candidate: bool = False  # beat the run's best tuning score
    applied: bool = False
    error: str | None = None


@dataclass
class LoopResult:
    outcomes: list[TrialOutcome] = field(default_factory=list)
    baseline: Score | None = None
    baseline_validation: Score | None = None
    cancelled: bool = False

    @property
    def applied(self) -> list[TrialOutcome]:
        return [o for o in self.outcomes if o.applied]

    @property
    def best(self) -> TrialOutcome | None:
        done = [o for o in self.outcomes if o.score is not None]
        return max(done, key=lambda o: o.score.value) if done else None


def run_trials(study: Any, base: RetrievalParams, tuning: Batch, validation: Batch, n_trials: int, *,
               on_trial: Callable[[TrialOutcome, LoopResult], None] = lambda outcome, result: None,
               cancelled: Callable[[], bool] = lambda: False, progress: bool = False) -> LoopResult:
    """Run ``n_trials`` trials of ``study`` from the current parameters ``base`` (see the module).
    ``on_trial`` is told of each outcome (it applies the parameters when ``outcome.applied``)."""
    import optuna

    result = LoopResult(baseline=tuning.score(base), baseline_validation=validation.score(base))
    best_tuning, best_validation = result.baseline.value, result.baseline_validation.value
    if not study.trials:
        study.enqueue_trial(space.raw_of(base))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=n_trials, desc="optimisation trials", unit="trial")
    try:
        for _ in range(n_trials):
            if cancelled():
                result.cancelled = True
                break
            trial = study.ask()
            raw = space.suggest(trial)
            values = space.to_values(raw)
            try:
                params = base.with_values(values)
                score, held = tuning.score(params), validation.score(params)
            except Exception as exc:  # a trial that cannot be scored fails alone
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                outcome = TrialOutcome(trial.number, raw, values, None, None, "failed", error=str(exc))
            else:
                trial.set_user_attr("validation_score", held.value)
                trial.set_user_attr("recall", score.recall)
                study.tell(trial, score.value)
                candidate = score.value > best_tuning
                applied = candidate and held.value > best_validation
                if candidate:
                    best_tuning = score.value
                if applied:
                    best_validation = held.value
                outcome = TrialOutcome(trial.number, raw, values, score, held, "complete", candidate, applied)
            result.outcomes.append(outcome)
            on_trial(outcome, result)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(best=f"{best_tuning:.4f}", applied=len(result.applied))
    finally:
        if bar is not None:
            bar.close()
    return result
