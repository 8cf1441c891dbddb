"""The training service: feedback in, per-user LoRA adapters out, one background worker.

Feedback (:meth:`TrainingService.feedback`) is accepted whether or not ``lora.enabled``: collecting it
costs nothing and the samples are there when training is switched on. Everything that trains
(:meth:`start`, :meth:`submit_adapter`, :meth:`cancel`, :meth:`status`) needs ``lora.enabled``:
:class:`ServiceUnavailableError` naming the key otherwise.

Runs (:mod:`assistant.learning.runs`, the steps in :mod:`assistant.learning.pipeline`) are queued to one
worker thread, first come first served; a user has at most one run under way: a second is
:class:`ConflictError` carrying the running run's id. ``start(user)`` trains on the user's feedback
samples and needs at least ``lora.min_samples`` (50) samples new since the user's last evaluated
feedback run (active or rejected; a failed or cancelled run consumed nothing); ``start(user, samples,
source)`` (distillation) trains on the given samples, at least ``lora.min_samples`` of them. With
``lora.auto_start`` a run starts by itself after a feedback submission (or an implicit capture) once the
user has ``min_samples`` samples new since their last feedback run of any outcome (so a failing
setup does not retrain on every feedback). Every state change and training step is published as a
``TrainingProgress`` signal (``value`` = the fraction done) and passed to :meth:`subscribe` listeners.
At start, runs a previous process left running are marked failed and their files deleted.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

from assistant.errors import ConflictError, NotFoundError, ServiceUnavailableError, ValidationFailed
from assistant.learning import implicit
from assistant.learning.evaluate import Scorer, SmokeCheck, split
from assistant.learning.feedback import Feedback, FeedbackStore, LabelledSample, sample_key
from assistant.learning.pipeline import Job, execute, prune, run_dir
from assistant.learning.runs import Run, RunStore
from assistant.learning.types import AdapterRecord, AdapterTrainer, RunState, TrainingSample
from assistant.observability.signals import Signal, SignalBus, SignalKind

log = logging.getLogger("assistant.learning")

DISABLED = "LoRA training is disabled (lora.enabled = false)"
Converter = Callable[[Path, Path, Path], Path]  # (peft dir, base GGUF, out path) -> the GGUF adapter
Listener = Callable[[Run], None]
STOP = object()


class TrainingService:
    def __init__(self, settings: Any, feedback: FeedbackStore, runs: RunStore, *, adapters_dir: Path,
                 base_model: Path | None, base_model_name: str, trainer: AdapterTrainer, scorer: Scorer,
                 converter: Converter, smoke_check: SmokeCheck | None = None, signals: SignalBus | None = None,
                 embedder: Any = None):
        self.settings = settings  # LoraSettings
        self.feedback_store = feedback
        self.runs = runs
        self.adapters_dir = Path(adapters_dir)
        self.base_model = Path(base_model) if base_model is not None else None
        self.base_model_name = base_model_name
        self.trainer = trainer
        self.scorer = scorer
        self.converter = converter
        self.smoke_check = smoke_check
        self.signals = signals
        self.embedder = embedder
        self._lock = threading.Lock()
        self._running: dict[str, Run] = {}  # user -> their run under way (the live copy)
        self._cancel: dict[str, threading.Event] = {}  # run id -> its cancel flag
        self._queue: queue.Queue[Any] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._listeners: list[Listener] = []
        self._gguf: dict[str, Path | None] = {}  # user -> active GGUF (read per chat request)
        self._unsubscribe: Callable[[], None] | None = None
        self._closed = False

    @property
    def enabled(self) -> bool:
        return bool(self.settings.enabled)

    def _require_enabled(self) -> None:
        if not self.enabled:
            raise ServiceUnavailableError(DISABLED)

    # --- feedback ------------------------------------------------------------------------------------

    def feedback(self, user_id: UUID | str, message_id: UUID | str, rating: int, *, correction: str | None = None,
                 preferred_answer: str | None = None, useful_memory_ids: Iterable[str] = ()) -> tuple[Feedback, Run | None]:
        """Store the user's feedback on one of their answers (always, enabled or not), then start a run
        when ``lora.auto_start`` finds enough new samples; ``(feedback, the run started or None)``."""
        stored = self.feedback_store.submit(str(user_id), str(message_id), rating, correction=correction,
                                            preferred_answer=preferred_answer, useful_memory_ids=useful_memory_ids)
        return stored, self.maybe_start(str(user_id))

    def capture_implicit(self, user_id: str) -> int:
        """Implicit feedback (re-asks, corrections) of the user's conversations (:mod:`assistant.learning.implicit`)."""
        return implicit.capture(self.feedback_store, str(user_id), self.embedder)

    def on_signal(self, signal: Signal) -> None:
        """The signal-bus listener: after sanitation's ``QualityScore`` for a user, capture their implicit feedback."""
        if signal.kind is SignalKind.QUALITY_SCORE and signal.user_id and not self._closed:
            try:
                if self.capture_implicit(signal.user_id):
                    self.maybe_start(signal.user_id)
            except Exception:
                log.exception("implicit feedback capture failed for user %s", signal.user_id)

    def listen(self, signals: SignalBus) -> None:
        self._unsubscribe = signals.subscribe(self.on_signal)

    def new_samples(self, user_id: str, *, settled_only: bool = True) -> int:
        """Samples created or changed since the user's last feedback run (evaluated ones only, or any end)."""
        if settled_only:
            last = self.runs.last_settled(str(user_id), "feedback")
        else:
            last = next((r for r in self.runs.list(str(user_id), limit=50) if r.source == "feedback"
                         and not r.running), None)
        return self.feedback_store.counts(str(user_id), last.watermark if last else None).new_samples

    def maybe_start(self, user_id: str) -> Run | None:
        """Start a feedback run when auto-start is on and the user has enough new samples (see the module docstring)."""
        if not (self.enabled and self.settings.auto_start) or self.base_model is None or not self.base_model.is_file():
            return None
        with self._lock:
            if str(user_id) in self._running:
                return None
        if self.new_samples(user_id, settled_only=False) < self.settings.min_samples:
            return None
        try:
            return self.start(user_id)
        except (ConflictError, ServiceUnavailableError) as exc:
            log.info("no automatic training run for user %s: %s", user_id, exc.message)
            return None

    # --- runs ----------------------------------------------------------------------------------------

    def _require_base(self) -> Path:
        if self.base_model is None or not self.base_model.is_file():
            raise ServiceUnavailableError(
                f"LoRA training needs the base model as a local GGUF file ({self.base_model or 'none configured'} "
                "is missing): install the model (`assistant models install`), or set lora.base_model_path or "
                "inference.model_path")
        return self.base_model

    def _begin(self, user_id: str, source: str, job: Job) -> Run:
        with self._lock:
            if self._closed:
                raise ServiceUnavailableError("the training service is closed")
            running = self._running.get(user_id)
            if running is not None:
                raise ConflictError(f"training run {running.id} is still running ({running.state.value})",
                                    {"run_id": running.id, "state": running.state.value})
            run = job.run
            self._running[user_id] = run
            self._cancel[run.id] = job.cancel = threading.Event()
        try:
            self.runs.save(run)
        except Exception:
            with self._lock:
                self._running.pop(user_id, None)
                self._cancel.pop(run.id, None)
            raise
        self._publish(run)
        self._ensure_worker()
        self._queue.put(job)
        return run.copy()

    def _new_run(self, user_id: str, source: str) -> Run:
        return Run(id=str(uuid4()), user_id=user_id, source=source, base_model=self.base_model_name)

    def start(self, user_id: UUID | str, samples: list[TrainingSample] | None = None, source: str = "feedback") -> Run:
        """Queue a training run for the user (module docstring); the run as queued (``preparing``, phase
        ``queued``). ConflictError while one of theirs runs (``details.run_id``) or with too few samples."""
        self._require_enabled()
        self._require_base()
        user = str(user_id)
        minimum = self.settings.min_samples
        run = self._new_run(user, source)
        if samples is None:
            self.capture_implicit(user)
            labelled = self.feedback_store.labelled_samples(user)
            new = self.new_samples(user)
            if new < minimum:
                raise ConflictError(
                    f"not enough new training samples: {new} since the last training run, lora.min_samples is "
                    f"{minimum} (rate answers or send corrections with POST /api/training/feedback)",
                    {"reason": "not_enough_samples", "new_samples": new, "samples": len(labelled),
                     "min_samples": minimum})
            run.watermark = self.feedback_store.latest_update(user)
        else:
            labelled = [LabelledSample(sample_key(s), s) for s in samples]
            if len(labelled) < minimum:
                raise ConflictError(f"not enough training samples: {len(labelled)} given, lora.min_samples is {minimum}",
                                    {"reason": "not_enough_samples", "samples": len(labelled), "min_samples": minimum})
        run.samples = len(labelled)
        return self._begin(user, source, Job(run, labelled))

    def submit_adapter(self, user_id: UUID | str, peft_dir: Path, samples: int, source: str) -> Run:
        """Convert, evaluate and maybe activate an adapter trained elsewhere (federated averaging) for the
        user: the same evaluation and activation rule, on the user's held-back feedback."""
        self._require_enabled()
        self._require_base()
        peft_dir = Path(peft_dir)
        if not (peft_dir / "adapter_config.json").is_file():
            error = f"{peft_dir} is not a peft adapter directory (no adapter_config.json)"
            raise ValidationFailed(f"peft_dir {error}", [{"field": "peft_dir", "error": error}])
        user = str(user_id)
        run = self._new_run(user, source)
        run.samples = int(samples)
        held = split(self.feedback_store.labelled_samples(user), self.settings.held_out_fraction)[1]
        return self._begin(user, source, Job(run, held_back=held, adapter=peft_dir))

    def cancel(self, user_id: UUID | str, run_id: UUID | str) -> Run:
        """Ask the user's run to stop (between two steps or phases); the run as it is. A run that is over
        is ConflictError; another user's or an unknown run NotFoundError."""
        self._require_enabled()
        run = self.get_run(user_id, run_id)
        with self._lock:
            flag = self._cancel.get(run.id)
        if flag is None or not run.running:
            raise ConflictError(f"training run {run.id} is not running ({run.state.value})",
                                {"run_id": run.id, "state": run.state.value})
        flag.set()
        return run

    def _live(self, user_id: str) -> Run | None:
        """A copy of the worker's run of ``user_id`` until :meth:`finish` has stored it and let it go. Once
        the worker has given the run its final state, the stored row stands in for it (still the last
        state stored, until finish() stores the final one): a caller that sees a run over can start the
        next one, and finds the runs list agreeing."""
        with self._lock:
            live = self._running.get(str(user_id))
            if live is None:
                return None
            if live.running and live.finished_at is None:
                return live.copy()
        return self.runs.get(str(user_id), live.id) or live.copy()

    def get_run(self, user_id: UUID | str, run_id: UUID | str) -> Run:
        live = self._live(str(user_id))
        if live is not None and live.id == str(run_id):
            return live
        found = self.runs.get(str(user_id), str(run_id))
        if found is None:
            raise NotFoundError(f"training run {run_id} not found")
        return found

    def current(self, user_id: str) -> Run | None:
        return self._live(str(user_id))

    def active_adapter(self, user_id: UUID | str) -> AdapterRecord | None:
        return self.runs.active_adapter(str(user_id))

    def active_gguf(self, user_id: UUID | str) -> Path | None:
        """The GGUF of the user's active adapter for this base model, or None (the chat service asks per request)."""
        user = str(user_id)
        if user not in self._gguf:
            record = self.runs.active_adapter(user)
            usable = record is not None and record.base_model == self.base_model_name
            self._gguf[user] = Path(record.gguf_path) if usable and record is not None else None
        path = self._gguf[user]
        return path if path is not None and path.is_file() else None

    def status(self, user_id: UUID | str) -> dict[str, Any]:
        """The user's pipeline: state, sample counts, the current (or latest) run with progress and loss
        curve, recent runs, the active adapter."""
        self._require_enabled()
        user = str(user_id)
        runs = self.runs.list(user, limit=20)
        live = self.current(user)
        if live is not None:
            runs = [live] + [r for r in runs if r.id != live.id]
        run = runs[0] if runs else None
        last = self.runs.last_settled(user, "feedback")
        counts = self.feedback_store.counts(user, last.watermark if last else None)
        active = self.active_adapter(user)
        return {"enabled": self.enabled, "state": run.state.value if run else RunState.IDLE.value,
                "samples": {**counts.as_dict(), "min_samples": self.settings.min_samples},
                "run": run, "runs": runs, "active_adapter": active, "base_model": self.base_model_name}

    # --- the worker ------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """``listener(run)`` on every state change and training step (a notebook's progress bar)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _ensure_worker(self) -> None:
        with self._lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="training", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if job is STOP:
                    return
                execute(self, job)
            finally:
                self._queue.task_done()

    def update(self, run: Run, **changes: Any) -> None:
        """Record a step of ``run`` (the worker's live copy): stored, published, passed to listeners."""
        for key, value in changes.items():
            setattr(run, key, value)
        try:
            self.runs.save(run)
        except Exception:
            log.exception("training run %s: progress not stored", run.id)
        self._publish(run)

    def _publish(self, run: Run) -> None:
        if self.signals is not None:
            self.signals.publish(SignalKind.TRAINING_PROGRESS,
                                 {"run_id": run.id, "source": run.source, "state": run.state.value, **run.progress()},
                                 user_id=run.user_id, value=run.fraction)
        for listener in list(self._listeners):
            try:
                listener(run.copy())
            except Exception:
                log.exception("a training listener failed")

    def activate(self, record: AdapterRecord) -> None:
        self.runs.activate(record)
        self._gguf.pop(record.user_id, None)
        prune(self.runs.adapters(record.user_id), self.runs.forget_adapter)

    def finish(self, run: Run) -> None:
        self.update(run)
        with self._lock:
            if self._running.get(run.user_id) is run:
                del self._running[run.user_id]
            self._cancel.pop(run.id, None)

    def wait(self, timeout: float | None = None) -> None:
        """Wait until every queued run is over (tests, notebooks)."""
        done = threading.Event()

        def waiter() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=waiter, daemon=True).start()
        done.wait(timeout)

    # --- lifecycle -------------------------------------------------------------------------------------

    def recover(self) -> int:
        """Runs a previous process left running: marked failed, their files deleted."""
        found = self.runs.unfinished()
        for run in found:
            shutil.rmtree(run_dir(self.adapters_dir, run.user_id, run.id), ignore_errors=True)
            self.runs.save(replace(run, state=RunState.FAILED, phase=RunState.FAILED.value,
                                   error="the process stopped during the run", finished_at=run.updated_at))
        return len(found)

    def close(self, timeout: float = 30.0) -> None:
        """Cancel the runs under way (between two steps) and stop the worker."""
        with self._lock:
            self._closed = True
            for flag in self._cancel.values():
                flag.set()
            worker = self._worker
        if self._unsubscribe is not None:
            self._unsubscribe()
        if worker is not None and worker.is_alive():
            self._queue.put(STOP)
            worker.join(timeout)
