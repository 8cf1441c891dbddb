"""Distillation: a larger teacher engine answers a prompt set, and the answers train the user's student
adapter through the training pipeline, under its activation rule.

A run (:meth:`Distillation.start`, in a background thread) for a user:

1. **prompt set** (:mod:`assistant.learning.distill_prompts`): the user's own past questions (newest first,
   deduplicated, up to ``distillation.max_prompts``), or a list the user gives (a file's lines, say);
2. **collecting**: the teacher (:mod:`assistant.learning.distill_teacher`: the configured Ollama or
   OpenAI-compatible engine) answers each prompt, ``distillation.concurrency`` at a time; progress after
   each prompt (a ``TrainingProgress`` signal, and ``on_progress``); failures are counted; after
   :data:`FAIL_STREAK` failures in a row the teacher is given up on. Cancellable between and during answers;
3. **dataset**: one :class:`~assistant.learning.types.TrainingSample` (source ``distillation``) per usable
   answer, the user's question as the prompt and the teacher's answer as the target (the answers are data:
   training targets only), after the student's system prompt as in feedback samples. Fewer than
   ``lora.min_samples`` fails the run with the counts;
4. **training**: the dataset goes to the training service (``training.start(user_id, samples,
   source="distillation")``), whose run trains a LoRA adapter, evaluates it on held-back samples and the
   regression set and activates it only when better and not worse: the distillation run follows it
   (``training``, ``evaluating``) to its end (``active``, ``rejected``, ``failed``, ``cancelled``).

One run at a time per user, distillation or training: a second is 409 naming the run under way. The dataset
is held in memory until handed over (the training store seals what it keeps); the run's record
(:mod:`assistant.learning.distill_store`) has counts and the teacher's identity only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import uuid4

from assistant.clock import iso
from assistant.config.extended import DistillationSettings, LoraSettings
from assistant.errors import AssistantError, ConflictError, NotFoundError, ServiceUnavailableError, ValidationFailed
from assistant.learning.distill_link import TrainingLink, TrainingRuns, TrainingRunView
from assistant.learning.distill_prompts import PromptSet, QuestionSource, given_prompts, past_questions
from assistant.learning.distill_store import DistillationRun, DistillationStore, DistillPhase
from assistant.learning.distill_teacher import NOT_CONFIGURED, Outcome, Teacher, TeacherAnswer, TeacherFactory, identity
from assistant.learning.types import RunState, TrainingSample
from assistant.observability.signals import SignalBus, SignalKind

if TYPE_CHECKING:
    from assistant.defence.types import Detector
    from assistant.learning.service import TrainingService
    from assistant.storage.db import Database

log = logging.getLogger("assistant.distillation")

FAIL_STREAK = 5  # teacher failures in a row: it is down (or refuses everything); collecting stops
LORA_OFF = "distillation trains a LoRA adapter: LoRA training is disabled (lora.enabled = false)"
TRAINING_PHASES = {RunState.PREPARING: DistillPhase.TRAINING, RunState.TRAINING: DistillPhase.TRAINING,
                   RunState.EVALUATING: DistillPhase.EVALUATING, RunState.ACTIVE: DistillPhase.ACTIVE,
                   RunState.REJECTED: DistillPhase.REJECTED, RunState.FAILED: DistillPhase.FAILED,
                   RunState.CANCELLED: DistillPhase.CANCELLED}
Listener = Callable[[DistillationRun], None]


@dataclass
class _Live:
    run: DistillationRun
    cancel: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    listener: Listener | None = None


class Distillation:
    """The distillation runs of a server or notebook (see the module docstring)."""

    def __init__(self, settings: DistillationSettings, lora: LoraSettings, store: DistillationStore,
                 questions: QuestionSource, teachers: TeacherFactory, training: TrainingRuns | None, *,
                 signals: SignalBus | None = None, system_prompt: str | None = None, poll_secs: float = 1.0):
        self.settings = settings
        self.system_prompt = system_prompt  # the student's (inference.system_prompt): first in every sample
        self.lora = lora
        self.store = store
        self.questions = questions
        self.teachers = teachers
        self.training = training
        self.signals = signals
        self.poll_secs = poll_secs
        self._live: dict[str, _Live] = {}  # user id -> the user's run under way (or just ended)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        store.interrupted()

    # --- readiness and reads ----------------------------------------------------------------------

    def unavailable(self) -> str | None:
        """Why no run can start (LoRA off, no teacher), or None."""
        if not self.lora.enabled or self.training is None:
            return LORA_OFF
        if identity(self.settings) is None:
            return NOT_CONFIGURED
        return None

    def status(self, user_id: str) -> DistillationRun | None:
        """The user's run under way, or their latest; None before their first."""
        with self._lock:
            live = self._live.get(str(user_id))
            if live is not None:
                return live.run
        run = self.store.latest(str(user_id))
        return self._refresh(run) if run is not None and run.running else run

    def get(self, user_id: str, run_id: str) -> DistillationRun:
        with self._lock:
            live = self._live.get(str(user_id))
            if live is not None and live.run.id == str(run_id):
                return live.run
        run = self.store.get(str(user_id), str(run_id))
        if run is None:
            raise NotFoundError(f"distillation run {run_id} not found")
        return self._refresh(run) if run.running else run

    def history(self, user_id: str, limit: int = 20) -> list[DistillationRun]:
        return self.store.history(str(user_id), limit)

    # --- runs -------------------------------------------------------------------------------------

    def prompt_set(self, user_id: str, prompts: list[str] | None = None, max_prompts: int | None = None) -> PromptSet:
        """The run's prompts: ``prompts`` checked, or the user's past questions; :class:`ValidationFailed` when
        there are fewer than ``lora.min_samples`` (each answer is one training sample)."""
        limit = self.settings.max_prompts
        if max_prompts is not None and not 1 <= max_prompts <= limit:
            error = f"must be 1 to {limit} (distillation.max_prompts)"
            raise ValidationFailed(f"max_prompts {error}", [{"field": "max_prompts", "error": error}])
        limit = max_prompts or limit
        chosen = given_prompts(prompts, limit) if prompts is not None else past_questions(self.questions, user_id,
                                                                                           limit)
        need = self.lora.min_samples
        if len(chosen.prompts) < need:
            what = ("distinct prompts given" if chosen.source == "given"
                    else "distinct past questions in your conversations")
            error = (f"{len(chosen.prompts)} {what}; a distillation run needs at least lora.min_samples = {need} "
                     "(each teacher answer becomes one training sample)")
            raise ValidationFailed(f"too few prompts: {error}", [{"field": "prompts", "error": error}])
        return chosen

    def start(self, user_id: str, prompts: list[str] | None = None, *, max_prompts: int | None = None,
              on_progress: Listener | None = None) -> DistillationRun:
        """Start a run for ``user_id`` in the background; returns it in ``collecting``. 503 when LoRA is off
        or no teacher is configured, 422 for bad or too few prompts, 409 while the user has a distillation
        or training run under way (``details.run_id``)."""
        user_id = str(user_id)
        reason = self.unavailable()
        if reason is not None:
            raise ServiceUnavailableError(reason)
        chosen = self.prompt_set(user_id, prompts, max_prompts)
        with self._lock:
            self._refuse_busy(user_id)
            teacher = self.teachers(user_id)
            run = DistillationRun(id=str(uuid4()), user_id=user_id, phase=DistillPhase.COLLECTING,
                                  prompt_source=chosen.source, prompts=len(chosen.prompts), teacher=teacher.identity)
            self.store.save(run)
            live = _Live(run, listener=on_progress)
            live.thread = threading.Thread(target=self._work, args=(live, chosen.prompts, teacher),
                                           name=f"distillation-{run.id[:8]}", daemon=True)
            self._live[user_id] = live
            live.thread.start()
        self._publish(run)
        return run

    def _refuse_busy(self, user_id: str) -> None:
        live = self._live.get(user_id)
        if live is not None and live.run.running:
            raise ConflictError(f"a distillation run is under way for this user ({live.run.id})",
                                {"run_id": live.run.id, "kind": "distillation"})
        assert self.training is not None
        busy = self.training.running(user_id)
        if busy is not None:
            raise ConflictError(f"a training run is under way for this user ({busy.id}); distillation trains through "
                                "the same pipeline: wait for it or cancel it", {"run_id": busy.id, "kind": "training"})

    def cancel(self, user_id: str) -> DistillationRun:
        """Stop the user's run under way: between (and during) teacher answers, or its training run.
        Nothing is trained or activated. 404 when the user has none under way."""
        with self._lock:
            live = self._live.get(str(user_id))
            if live is None or not live.run.running:
                raise NotFoundError("no distillation run of yours is under way")
            live.cancel.set()
            return live.run

    def wait(self, user_id: str, timeout: float | None = None) -> DistillationRun | None:
        """Block until the user's run under way ends (or ``timeout``); its record."""
        with self._lock:
            live = self._live.get(str(user_id))
        if live is not None and live.thread is not None:
            live.thread.join(timeout)
        return self.status(user_id)

    def close(self) -> None:
        """Stop collecting (those runs fail: their answers were in memory only) and wait for the threads; a run
        already in training keeps its course, and its status follows it after a restart."""
        self._closing.set()
        with self._lock:
            lives = list(self._live.values())
        for live in lives:
            if live.thread is not None:
                live.thread.join(30)

    # --- the worker ---------------------------------------------------------------------------------

    def _work(self, live: _Live, prompts: tuple[str, ...], teacher: Teacher) -> None:
        try:
            try:
                samples, stopped = self._collect(live, prompts, teacher)
            finally:
                teacher.close()
            if live.cancel.is_set():
                self._move(live, phase=DistillPhase.CANCELLED, finished_at=iso())
                return
            if self._closing.is_set():
                self._move(live, phase=DistillPhase.FAILED, finished_at=iso(),
                           error="interrupted: the service closed while the teacher answered")
                return
            run, need = live.run, self.lora.min_samples
            if len(samples) < need:
                why = (f"the teacher gave {len(samples)} usable answers to {run.prompts} prompts ({run.failed} failed, "
                       f"{run.flagged} flagged by the defence); training needs at least lora.min_samples = {need}")
                self._move(live, phase=DistillPhase.FAILED, error=why + (f"; {stopped}" if stopped else ""),
                           finished_at=iso())
                return
            self._train(live, samples)
        except Exception as exc:  # noqa: BLE001 - the run ends failed, whatever broke
            log.exception("distillation run %s failed", live.run.id)
            message = exc.message if isinstance(exc, AssistantError) else f"{type(exc).__name__}: {exc}"
            self._move(live, phase=DistillPhase.FAILED, error=f"internal error: {message}", finished_at=iso())

    def _collect(self, live: _Live, prompts: tuple[str, ...], teacher: Teacher) -> tuple[list[TrainingSample], str]:
        """Ask the teacher every prompt; the samples in prompt order, and why collecting stopped early ('')."""
        answers: dict[int, str] = {}
        streak = {"n": 0, "why": ""}
        give_up = threading.Event()
        lock = threading.Lock()

        def stop() -> bool:
            return live.cancel.is_set() or self._closing.is_set() or give_up.is_set()

        def ask(index: int) -> None:
            if stop():
                return
            answer = teacher.answer(prompts[index], stop)
            if answer.outcome is Outcome.CANCELLED:
                return
            with lock:
                self._count(live, answer)
                if answer.usable:
                    answers[index] = answer.text
                    streak["n"] = 0
                else:
                    streak["n"] += 1
                    streak["why"] = answer.reason
                    if streak["n"] >= FAIL_STREAK:
                        give_up.set()

        with ThreadPoolExecutor(self.settings.concurrency, thread_name_prefix="distillation-teacher") as pool:
            for future in [pool.submit(ask, i) for i in range(len(prompts))]:
                future.result()
        stopped = (f"collecting stopped after {FAIL_STREAK} teacher failures in a row (last: {streak['why']})"
                   if give_up.is_set() else "")
        system = ({"role": "system", "content": self.system_prompt},) if self.system_prompt else ()
        samples = [TrainingSample((*system, {"role": "user", "content": prompts[i]}), answers[i], "distillation")
                   for i in sorted(answers)]
        return samples, stopped

    def _count(self, live: _Live, answer: TeacherAnswer) -> None:
        run = live.run
        if answer.usable:
            self._move(live, answered=run.answered + 1, truncated=run.truncated + (answer.outcome is Outcome.TRUNCATED))
        elif answer.outcome is Outcome.FLAGGED:
            self._move(live, flagged=run.flagged + 1)
        else:
            self._move(live, failed=run.failed + 1)

    def _train(self, live: _Live, samples: list[TrainingSample]) -> None:
        assert self.training is not None
        user_id = live.run.user_id
        try:
            started = self.training.start(user_id, samples)
        except ConflictError as exc:
            other = exc.details.get("run_id")
            why = (f"a training run ({other}) started while the teacher answered: {exc.message}" if other
                   else f"the training pipeline refused the dataset: {exc.message}")
            self._move(live, phase=DistillPhase.FAILED, dataset_size=len(samples), finished_at=iso(), error=why)
            return
        except AssistantError as exc:
            self._move(live, phase=DistillPhase.FAILED, dataset_size=len(samples), finished_at=iso(),
                       error=f"the training pipeline refused the dataset: {exc.message}")
            return
        self._move(live, phase=DistillPhase.TRAINING, dataset_size=len(samples), training_run_id=started.id,
                   training_progress=0.0)
        del samples  # the training run holds (and seals) them now
        cancelled, pause = False, live.cancel
        while not self._closing.is_set():  # closing: the training run keeps its course (status follows it later)
            if live.cancel.is_set() and not cancelled:
                cancelled, pause = True, threading.Event()
                self.training.cancel(user_id, started.id)
            view = self.training.get(user_id, started.id)
            if view is None:
                self._move(live, phase=DistillPhase.FAILED, finished_at=iso(),
                           error=f"the training run {started.id} disappeared")
                return
            if self._follow(live, view):
                return
            pause.wait(self.poll_secs)

    def _follow(self, live: _Live, view: TrainingRunView) -> bool:
        """Move the run with its training run; True once that one has ended."""
        phase = TRAINING_PHASES.get(RunState(view.state), DistillPhase.TRAINING)
        if phase in (DistillPhase.TRAINING, DistillPhase.EVALUATING):
            if phase != live.run.phase or round(view.fraction, 4) != live.run.training_progress:
                self._move(live, phase=phase, training_progress=round(view.fraction, 4))
            return False
        error = view.error if phase in (DistillPhase.FAILED, DistillPhase.REJECTED) else None
        self._move(live, phase=phase, training_progress=1.0, error=error, finished_at=iso())
        return True

    def _refresh(self, run: DistillationRun) -> DistillationRun:
        """A run in training with no thread following it (after a restart): its training run's state now."""
        if self.training is None or run.training_run_id is None:
            return run
        view = self.training.get(run.user_id, run.training_run_id)
        if view is None:
            return run
        phase = TRAINING_PHASES.get(RunState(view.state), DistillPhase.TRAINING)
        ended = phase not in (DistillPhase.TRAINING, DistillPhase.EVALUATING)
        moved = run.moved(phase=phase, training_progress=1.0 if ended else round(view.fraction, 4),
                          error=view.error if phase in (DistillPhase.FAILED, DistillPhase.REJECTED) else None,
                          finished_at=iso() if ended else None)
        self.store.save(moved)
        return moved

    def _move(self, live: _Live, **changes: object) -> None:
        with self._lock:
            live.run = live.run.moved(**changes)
            run = live.run
        self.store.save(run)
        self._publish(run)
        if live.listener is not None:
            try:
                live.listener(run)
            except Exception:  # noqa: BLE001 - a notebook's progress bar must not end the run
                log.exception("distillation progress listener failed")

    def _publish(self, run: DistillationRun) -> None:
        if self.signals is None:
            return
        self.signals.publish(SignalKind.TRAINING_PROGRESS,
                             {"task": "distillation", "run_id": run.id, "phase": run.phase.value, "done": run.done,
                              "prompts": run.prompts, "answered": run.answered, "failed": run.failed,
                              "training_run_id": run.training_run_id},
                             user_id=run.user_id, value=run.progress)


def build_distillation(settings: DistillationSettings, lora: LoraSettings, db: Database, questions: QuestionSource,
                       training: TrainingService | None, *, data_dir: Path, system_prompt: str | None = None,
                       detector: Detector | None = None, signals: SignalBus | None = None) -> Distillation | None:
    """The distillation service, or None while ``distillation.enabled`` is false. ``training`` None (or
    ``lora.enabled`` false): runs cannot start (503 naming lora.enabled), the status still reads."""
    if not settings.enabled:
        return None
    from assistant.learning.distill_teacher import engine_teachers

    teachers = engine_teachers(settings, data_dir, system_prompt=system_prompt, detector=detector)
    link = None if training is None else TrainingLink(training)
    return Distillation(settings, lora, DistillationStore(db), questions, teachers, link, signals=signals,
                        system_prompt=system_prompt)
