"""One training run, start to end: train (or take a given adapter), convert, smoke-check, evaluate, activate.

:func:`execute` is what the training service's worker thread runs for each queued :class:`Job`:

1. ``preparing`` (phase ``preparing``): the samples split into training and held-back parts
   (:func:`assistant.learning.evaluate.split`); the run's directory ``<data>/adapters/<user>/<run>/``.
2. ``training``: the trainer (:class:`~assistant.learning.types.AdapterTrainer`) writes peft's directory
   ``peft/``, reporting every step (the state moves to ``training`` with its first step). A submitted
   adapter (federated sync) is copied there instead, with no training.
3. ``evaluating``: phase ``converting`` (``peft/`` -> ``adapter.gguf``, llama.cpp's converter), phase
   ``smoke_check`` (the base model with the GGUF adapter in llama-cpp generates a few tokens), phase
   ``evaluating`` (mean answer NLL on the held-back samples and on the regression set:
   :func:`assistant.learning.evaluate.decide`).
4. ``active`` (the adapter row written, the user's previous adapter kept as the one to fall back to,
   older ones deleted) or ``rejected``. Any exception: ``failed`` with its message; a cancel:
   ``cancelled``. A run that does not end ``active`` deletes its directory and changes nothing else.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import uuid4

from assistant.clock import iso
from assistant.learning.evaluate import ACTIVE, BASE, CANDIDATE, decide, regression_set, split
from assistant.learning.feedback import LabelledSample
from assistant.learning.runs import Run
from assistant.learning.trainer import TrainingCancelled
from assistant.learning.types import AdapterRecord, ProgressEvent, RunState

log = logging.getLogger("assistant.learning")

PEFT_DIR, GGUF_FILE = "peft", "adapter.gguf"
KEEP_ADAPTERS = 2  # the active adapter and the one before it (a request may still hold its path)
SMOKE_CHARS = 80
HELD, REGRESSION = "held_out", "regression"


class Cancelled(Exception):
    """The run's cancel flag was seen between two steps or phases."""


@dataclass
class Job:
    run: Run
    samples: list[LabelledSample] = field(default_factory=list)  # to train on (and hold back)
    held_back: list[LabelledSample] | None = None  # a submitted adapter: the user's held-back feedback
    adapter: Path | None = None  # a submitted adapter: its peft directory (no training)
    cancel: Any = None  # a threading.Event


def run_dir(adapters_dir: Path, user_id: str, run_id: str) -> Path:
    return Path(adapters_dir) / str(user_id) / str(run_id)


def execute(service: Any, job: Job) -> Run:
    """Run ``job`` for ``service`` (a :class:`~assistant.learning.service.TrainingService`); never raises."""
    run, lora = job.run, service.settings
    directory = run_dir(service.adapters_dir, run.user_id, run.id)
    started = time.perf_counter()

    def check() -> None:
        if job.cancel is not None and job.cancel.is_set():
            raise Cancelled

    def progress(event: ProgressEvent) -> None:
        if event.phase == "training" and run.state is RunState.PREPARING:
            run.state = RunState.TRAINING
        run.phase, run.step, run.total_steps = event.phase, event.step, event.total_steps
        if event.phase == "training" and event.loss is not None:
            run.loss = round(float(event.loss), 6)
            run.losses.append(run.loss)
        service.update(run)

    try:
        service.update(run, phase="preparing")
        peft_dir, gguf = directory / PEFT_DIR, directory / GGUF_FILE
        if job.adapter is None:
            train, held = split(job.samples, lora.held_out_fraction)
            run.samples, run.held_out = len(train), len(held)
            check()
            result = service.trainer.train(service.base_model, [s.sample for s in train], peft_dir, rank=lora.rank,
                                           learning_rate=lora.learning_rate, on_progress=progress,
                                           cancelled=lambda: job.cancel is not None and job.cancel.is_set())
            run.metrics["steps"] = result.steps
            peft_dir = Path(result.peft_dir)
        else:
            held = list(job.held_back or [])
            run.held_out = len(held)
            shutil.copytree(job.adapter, peft_dir, dirs_exist_ok=True)
        check()
        run.state = RunState.EVALUATING
        service.update(run, phase="converting")  # the training steps stay: they are done
        service.converter(peft_dir, service.base_model, gguf)
        check()
        if service.smoke_check is not None:
            service.update(run, phase="smoke_check")
            run.metrics["smoke_answer"] = str(service.smoke_check(service.base_model, gguf))[:SMOKE_CHARS]
            check()
        service.update(run, phase="evaluating")
        decision = evaluate(service, run, peft_dir, held)
        run.metrics.update(decision.metrics, decision=decision.reason,
                           adapter_bytes=sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()))
        check()
        if decision.activate:
            record = AdapterRecord(id=str(uuid4()), user_id=run.user_id, run_id=run.id, base_model=run.base_model,
                                   peft_dir=peft_dir, gguf_path=gguf, samples=run.samples, created_at=iso(),
                                   metrics={k: run.metrics.get(k) for k in ("held_out", "regression", "decision")})
            service.activate(record)
            run.adapter_id, run.state = record.id, RunState.ACTIVE
        else:
            run.state, run.error = RunState.REJECTED, f"rejected: {decision.reason}"
    except (Cancelled, TrainingCancelled):
        run.state, run.error = RunState.CANCELLED, "cancelled by the user"
    except Exception as exc:  # the run fails; the service and the previous adapter are untouched
        log.exception("training run %s failed", run.id)
        run.state, run.error = RunState.FAILED, f"{type(exc).__name__}: {exc}"[:2000]
    finally:
        if run.state is not RunState.ACTIVE:
            shutil.rmtree(directory, ignore_errors=True)
        run.metrics["duration_s"] = round(time.perf_counter() - started, 3)
        run.finished_at = iso()
        run.phase = run.state.value
        service.finish(run)
    return run


def evaluate(service: Any, run: Run, peft_dir: Path, held: list[LabelledSample]) -> Any:
    """The held-back and regression NLLs of base, active (if any) and candidate, and the decision."""
    lora = service.settings
    adapters: dict[str, Path | None] = {BASE: None}
    active = service.runs.active_adapter(run.user_id)
    if active is not None and active.base_model == run.base_model and Path(active.peft_dir).is_dir():
        adapters[ACTIVE] = Path(active.peft_dir)
    adapters[CANDIDATE] = peft_dir
    sets = {HELD: [s.sample for s in held[:lora.eval_max_samples]], REGRESSION: regression_set()}
    scores = service.scorer.nll(service.base_model, sets, adapters)
    return decide(scores.get(HELD), scores[REGRESSION], lora.regression_tolerance)


def prune(adapters: list[AdapterRecord], forget: Callable[[str], None]) -> int:
    """Delete the files of a user's adapters beyond the newest :data:`KEEP_ADAPTERS` (never the active one)."""
    removed = 0
    for record in adapters[KEEP_ADAPTERS:]:
        shutil.rmtree(Path(record.gguf_path).parent, ignore_errors=True)
        forget(record.id)
        removed += 1
    return removed
