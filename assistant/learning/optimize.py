"""Retrieval-parameter optimisation (``/api/optimization``): Bayesian optimisation with optuna of the
parameters a user's recall runs with, against an objective from the user's own data.

- The parameters and their bounds: :mod:`assistant.learning.optimize_space`.
- The objective (recall of the memories later answers used or feedback marked useful, blended with the
  answers' quality; LoCoMo recall as the cold start): :mod:`assistant.learning.optimize_score`,
  :mod:`~assistant.learning.optimize_data`, :mod:`~assistant.learning.optimize_locomo`.
- The study (SQLite storage ``data_dir/optuna.db``, the exploration mapping, the apply-only-if-better
  rule): :mod:`assistant.learning.optimize_study`.
- What is applied is stored per user (m028, :mod:`~assistant.learning.optimize_store`) and read by that
  user's recall: :class:`Optimizer` is the memory store's :class:`~assistant.memory.tuning.RetrievalTuning`.

Which objective a run uses: the user's own answers when there are at least ``min_user_cases`` of them
(``user_data``), else the configured data set (``locomo``), else the run is refused (409, saying how
many answers there are and which settings would allow it). Embedding happens once per run (the user's
questions) or once per process (the data set); every trial only re-scores.

One run at a time on the server (it is CPU work), in a background thread (:meth:`Optimizer.start`) or
blocking (:meth:`Optimizer.run`, the notebook's, with a tqdm bar); cancellable between trials; each
trial publishes a ``TrainingProgress`` signal (``data.task = "optimization"``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from assistant.config.extended import OptimizationSettings
from assistant.errors import ConflictError, NotFoundError
from assistant.learning import optimize_study as studies
from assistant.learning.optimize_data import UsefulMemories, user_cases
from assistant.learning.optimize_score import Batch, Case, split
from assistant.learning.optimize_space import BOUNDS
from assistant.learning.optimize_store import OptimizationStore
from assistant.memory.tuning import RetrievalParams
from assistant.observability.signals import SignalBus, SignalKind

if TYPE_CHECKING:
    from assistant.memory.store import MemoryStore

log = logging.getLogger("assistant.optimization")
USER_DATA, LOCOMO = "user_data", "locomo"


@dataclass(frozen=True)
class Objective:
    source: str  # USER_DATA | LOCOMO
    cases: list[Case]
    user_cases: int  # how many of the user's own answers there were (for the status)


class Optimizer:
    """The optimisation service of a server or notebook (see the module)."""

    def __init__(self, settings: OptimizationSettings, data_dir: Path, store: OptimizationStore, memory: MemoryStore,
                 *, explanations: Any = None, conversations: Any = None, sanitation: Any = None,
                 signals: SignalBus | None = None, useful: UsefulMemories | None = None, clock: Any = time.time):
        self.settings = settings
        self.data_dir = Path(data_dir)
        self.store = store
        self.memory = memory
        self.explanations = explanations
        self.conversations = conversations
        self.sanitation = sanitation
        self.signals = signals
        self.useful = useful
        self.clock = clock
        self._lock = threading.Lock()
        self._active: dict[str, Any] | None = None  # run_id, user_id, cancel (Event), thread
        self._cold: dict[tuple[str, int | None], list[Case]] = {}
        store.interrupted()

    # --- parameters ---------------------------------------------------------------------------------

    def defaults(self) -> RetrievalParams:
        """The configured parameters (what a user without applied ones gets)."""
        m = self.memory
        return RetrievalParams(m.settings.rag_threshold, m.settings.rag_limit, m.weights, m.hybrid,
                               m.settings.decay_factor)

    def current(self, user_id: str) -> RetrievalParams:
        tuned = self.store.tuned(str(user_id))
        return self.defaults().with_values(tuned) if tuned else self.defaults()

    # RetrievalTuning (the memory store asks on every search)
    def tuned(self, user_id: str) -> Mapping[str, float | int] | None:
        return self.store.tuned(user_id)

    def tuned_decay_factors(self) -> Mapping[str, float]:
        return self.store.tuned_decay_factors()

    def reset(self, user_id: str) -> bool:
        """Forget ``user_id``'s applied parameters (the configured ones apply again)."""
        return self.store.reset(user_id)

    # --- the objective's data -----------------------------------------------------------------------

    def _user_cases(self, user_id: str) -> list[Case]:
        if self.explanations is None or self.conversations is None:
            return []
        return user_cases(user_id, memory=self.memory, explanations=self.explanations,
                          conversations=self.conversations, sanitation=self.sanitation, useful=self.useful,
                          decay_factor=self.current(user_id).decay_factor, now=self.clock())

    def _dataset_cases(self, progress: bool = False) -> list[Case]:
        from assistant.learning.optimize_locomo import locomo_cases

        s = self.settings
        path = Path(s.dataset_path).expanduser()
        if not path.exists():
            raise ConflictError(f"the cold-start data set optimization.dataset_path = {str(s.dataset_path)!r} does "
                                "not exist", {"reason": "dataset_missing", "dataset_path": str(s.dataset_path)})
        key = (str(path.resolve()), s.dataset_conversations)
        if key not in self._cold:
            def wrap(it):  # noqa: ANN001, ANN202 - a tqdm bar over the conversations with ``progress``
                if not progress:
                    return it
                from tqdm.auto import tqdm

                return tqdm(list(it), desc="embedding the data set", unit="conversation")

            self._cold[key] = locomo_cases(path, self.memory.embedder, conversations=s.dataset_conversations,
                                           progress=wrap, memory_settings=self.memory.settings)
        return self._cold[key]

    def objective(self, user_id: str, *, progress: bool = False) -> Objective:
        """The cases a run for ``user_id`` would optimise (see the module for the choice and the refusal)."""
        s = self.settings
        own = self._user_cases(str(user_id))
        if len(own) >= s.min_user_cases:
            return Objective(USER_DATA, own, len(own))
        if s.dataset_path is not None:
            return Objective(LOCOMO, self._dataset_cases(progress), len(own))
        recorded = "" if self.explanations is not None else (
            " (answers are recorded only while sovereign_intelligence.enabled = true)")
        raise ConflictError(
            f"not enough of your own data to optimise retrieval: {len(own)} answer(s) whose memories were used, "
            f"marked useful or followed by a re-ask or correction{recorded}, and optimization.min_user_cases = "
            f"{s.min_user_cases} are needed; no cold-start data set is configured (optimization.dataset_path is "
            "not set)", {"reason": "not_enough_data", "user_cases": len(own), "min_user_cases": s.min_user_cases,
                         "dataset_path": None})

    # --- runs ---------------------------------------------------------------------------------------

    def _claim(self, user_id: str, run_id: str) -> threading.Event:
        with self._lock:
            if self._active is not None:
                mine = self._active["user_id"] == str(user_id)
                raise ConflictError(
                    f"an optimisation run is under way ({self._active['run_id']})" if mine else
                    "another user's optimisation run is under way: one run at a time on the server",
                    {"run_id": self._active["run_id"]} if mine else {})
            cancel = threading.Event()
            self._active = {"run_id": run_id, "user_id": str(user_id), "cancel": cancel, "thread": None}
            return cancel

    def _release(self, run_id: str) -> None:
        with self._lock:
            if self._active is not None and self._active["run_id"] == run_id:
                self._active = None

    def running(self, user_id: str) -> str | None:
        with self._lock:
            active = self._active
            return active["run_id"] if active is not None and active["user_id"] == str(user_id) else None

    def study(self, user_id: str, source: str | None = None) -> Any:
        """The user's optuna ``Study`` (of ``source``, default the latest run's), for
        ``optuna.visualization.plot_optimization_history`` and ``plot_param_importances``."""
        import optuna

        if source is None:
            latest = self.store.latest_run(str(user_id))
            if latest is None:
                raise NotFoundError("no optimisation run yet: nothing to plot")
            source = latest["source"]
        return optuna.load_study(study_name=studies.study_name(str(user_id), source),
                                 storage=studies.storage_url(self.data_dir))

    def run(self, user_id: str, n_trials: int | None = None, *, progress: bool = False) -> dict[str, Any]:
        """Run a study for ``user_id`` now (blocking): ``n_trials`` (default ``max_iterations``) trials,
        a tqdm bar with ``progress``. Returns the run (as :meth:`status` shows it)."""
        user, run_id = str(user_id), str(uuid4())
        total = n_trials or self.settings.max_iterations
        cancel = self._claim(user, run_id)
        try:
            objective = self.objective(user, progress=progress)
            self.store.create_run(run_id, user, studies.study_name(user, objective.source), objective.source, total)
            self._run(user, run_id, total, cancel, progress, objective)
        finally:
            self._release(run_id)
        return self.status(user)

    def start(self, user_id: str, n_trials: int | None = None) -> dict[str, Any]:
        """Start a run in a background thread and return its row; 409 while one runs. Without a cold-start
        data set the objective (the user's own answers, a few embeddings) is built here, so that a refusal
        for lack of data is the answer; with one, in the thread (embedding the data set takes a while), the
        run's ``source`` saying ``pending`` until then."""
        user, run_id = str(user_id), str(uuid4())
        total = n_trials or self.settings.max_iterations
        cancel = self._claim(user, run_id)
        try:
            objective = self.objective(user) if self.settings.dataset_path is None else None
            source = objective.source if objective is not None else "pending"
            self.store.create_run(run_id, user, studies.study_name(user, source), source, total)
        except Exception:
            self._release(run_id)
            raise
        thread = threading.Thread(target=self._background, args=(user, run_id, total, cancel, objective),
                                  name=f"optimization-{run_id[:8]}", daemon=True)
        with self._lock:
            if self._active is not None:
                self._active["thread"] = thread
        thread.start()
        return self.store.run(user, run_id) or {}

    def _background(self, user: str, run_id: str, total: int, cancel: threading.Event,
                    objective: Objective | None) -> None:
        try:
            if objective is None:
                try:
                    objective = self.objective(user)
                except Exception as exc:
                    self.store.update_run(run_id, state="failed", error=getattr(exc, "message", str(exc))[:500],
                                          finished=True)
                    raise
                self.store.update_run(run_id, source=objective.source,
                                      study=studies.study_name(user, objective.source))
            self._run(user, run_id, total, cancel, False, objective)
        except Exception:  # recorded on the run; a background thread has no caller to raise to
            log.exception("optimisation run %s failed", run_id)
        finally:
            self._release(run_id)

    def cancel(self, user_id: str) -> str:
        """Ask the caller's running run to stop after its current trial; 404 when none runs."""
        with self._lock:
            active = self._active
            if active is None or active["user_id"] != str(user_id):
                raise NotFoundError("no optimisation run of yours is under way")
            active["cancel"].set()
            return active["run_id"]

    def _run(self, user: str, run_id: str, total: int, cancel: threading.Event, progress: bool,
             objective: Objective) -> None:
        s = self.settings
        name = studies.study_name(user, objective.source)
        try:
            tuning_cases, validation_cases = split(objective.cases, s.validation_fraction)
            tuning = Batch(tuning_cases, k=s.recall_at, quality_weight=s.quality_weight)
            validation = Batch(validation_cases, k=s.recall_at, quality_weight=s.quality_weight)
            self.store.update_run(run_id, cases_tuning=len(tuning), cases_validation=len(validation))
            study = studies.open_study(studies.storage_url(self.data_dir), name, s.exploration_weight, s.seed)
            base = self.current(user)

            def on_trial(outcome: studies.TrialOutcome, result: studies.LoopResult) -> None:
                score = outcome.score.value if outcome.score else None
                held = outcome.validation.value if outcome.validation else None
                self.store.add_trial(user, run_id, name, outcome.number, outcome.values, score, held, outcome.state,
                                     outcome.applied)
                if outcome.applied:
                    self.store.apply(user, outcome.values, source=objective.source, run_id=run_id, study=name,
                                     trial_number=outcome.number, score=score, validation_score=held)
                best = result.best
                done = len(result.outcomes)
                self.store.update_run(
                    run_id, trials_done=done, baseline_score=result.baseline.value,
                    baseline_validation=result.baseline_validation.value,
                    best_score=best.score.value if best else None,
                    best_validation=best.validation.value if best else None, applied_trials=len(result.applied))
                if self.signals is not None:
                    self.signals.publish(SignalKind.TRAINING_PROGRESS, {
                        "task": "optimization", "run_id": run_id, "trial": done, "total": total,
                        "score": score, "validation_score": held, "applied": outcome.applied,
                        "best_score": best.score.value if best else None, "source": objective.source},
                        user_id=user, value=done / total)

            result = studies.run_trials(study, base, tuning, validation, total, on_trial=on_trial,
                                        cancelled=cancel.is_set, progress=progress)
            self.store.update_run(run_id, state="cancelled" if result.cancelled else "completed", finished=True)
        except Exception as exc:
            self.store.update_run(run_id, state="failed", error=f"{type(exc).__name__}: {exc}"[:500], finished=True)
            raise

    # --- views --------------------------------------------------------------------------------------

    def status(self, user_id: str) -> dict[str, Any]:
        """The caller's latest run (state, trials done of total, best and baseline scores, objective source),
        the parameters applied for them and the configured defaults."""
        user = str(user_id)
        run = self.store.latest_run(user)
        applied = self.store.applied(user)
        state = "idle" if run is None else run["state"]
        return {
            "state": state,
            "run": run,
            "current": self.current(user).flat(),
            "defaults": self.defaults().flat(),
            "applied": None if applied is None else {
                "values": applied.values, "source": applied.source, "run_id": applied.run_id,
                "trial_number": applied.trial_number, "score": applied.score,
                "validation_score": applied.validation_score, "applied_at": applied.applied_at},
            "bounds": {k: list(v) for k, v in BOUNDS.items()},
            "settings": {"max_iterations": self.settings.max_iterations,
                         "exploration_weight": self.settings.exploration_weight,
                         "n_startup_trials": studies.startup_trials(self.settings.exploration_weight),
                         "n_ei_candidates": studies.ei_candidates(self.settings.exploration_weight),
                         "recall_at": self.settings.recall_at, "quality_weight": self.settings.quality_weight,
                         "min_user_cases": self.settings.min_user_cases,
                         "cold_start": self.settings.dataset_path is not None},
        }

    def history(self, user_id: str, limit: int = 100, offset: int = 0,
                run_id: str | None = None) -> tuple[int, list[dict]]:
        return (self.store.count_trials(str(user_id), run_id),
                self.store.trials(str(user_id), limit, offset, run_id))

    def close(self) -> None:
        """Stop a running run after its current trial and wait for it (bounded)."""
        with self._lock:
            active = self._active
        if active is not None:
            active["cancel"].set()
            thread = active.get("thread")
            if thread is not None:
                thread.join(timeout=30)


def build_optimizer(settings: Any, db: Any, memory: MemoryStore | None, *, explanations: Any = None,
                    conversations: Any = None, signals: SignalBus | None = None,
                    useful: UsefulMemories | None = None) -> Optimizer | None:
    """The optimiser while ``optimization.enabled`` and the memory store is on (else None: the routes are
    503); attached to the memory store as its tuning, so each user's recall reads their parameters."""
    if not settings.optimization.enabled or memory is None:
        return None
    optimizer = Optimizer(settings.optimization, settings.data_dir, OptimizationStore(db), memory,
                          explanations=explanations, conversations=conversations, sanitation=settings.sanitation,
                          signals=signals, useful=useful)
    memory.tuning = optimizer
    return optimizer
