"""Fakes of the training pipeline's backends (trainer, scorer, converter, smoke check) and helpers that
make answered conversations; shared by the unit and API tests of training."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from assistant.learning.types import ProgressEvent, TrainingSample, TrainResult
from assistant.services import Services


class FakeTrainer:
    """Writes a peft-shaped directory after ``steps`` steps with a falling loss. ``gate``: each step
    waits for it (a run that stays under way until the test lets it go); ``fail``: raises at the start."""

    def __init__(self, steps: int = 3, gate: threading.Event | None = None, fail: str | None = None):
        self.steps = steps
        self.gate = gate
        self.fail = fail
        self.calls: list[dict[str, Any]] = []
        self.started = threading.Event()

    def train(self, base_model: Path, samples: list[TrainingSample], out_dir: Path, *, rank: int,
              learning_rate: float, on_progress: Callable[[ProgressEvent], None],
              cancelled: Callable[[], bool], init_adapter: Path | None = None) -> TrainResult:
        self.calls.append({"base_model": base_model, "samples": list(samples), "rank": rank,
                           "learning_rate": learning_rate})
        self.started.set()
        if self.fail:
            raise RuntimeError(self.fail)
        on_progress(ProgressEvent("preparing", 0, 0))
        losses = []
        for step in range(1, self.steps + 1):
            while self.gate is not None and not self.gate.wait(0.01):
                if cancelled():
                    break
            if cancelled():
                from assistant.learning.trainer import TrainingCancelled

                raise TrainingCancelled("cancelled")
            losses.append(2.0 / step)
            on_progress(ProgressEvent("training", step, self.steps, losses[-1]))
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "adapter_config.json").write_text(json.dumps({"r": rank}))
        (out_dir / "adapter_model.safetensors").write_bytes(b"weights")
        return TrainResult(out_dir, tuple(losses), self.steps)


class FakeScorer:
    """Mean NLLs by adapter name: ``held`` for the held-back samples, ``regression`` for the packaged set."""

    def __init__(self, held: Mapping[str, float] | None = None, regression: Mapping[str, float] | None = None):
        self.held = dict(held or {"base": 2.0, "active": 1.8, "candidate": 1.5})
        self.regression = dict(regression or {"base": 1.0, "active": 1.01, "candidate": 1.02})
        self.calls: list[tuple[int, dict[str, Path | None]]] = []

    def nll(self, base_model: Path, sets: Mapping[str, Sequence[TrainingSample]],
            adapters: Mapping[str, Path | None]) -> dict[str, dict[str, float]]:
        self.calls.append((len(sets.get("held_out", ())), dict(adapters)))
        tables = {"held_out": self.held, "regression": self.regression}
        return {name: {a: tables[name][a] for a in adapters} for name, samples in sets.items() if samples}


def fake_converter(peft_dir: Path, base_model: Path, out_path: Path) -> Path:
    assert (peft_dir / "adapter_config.json").is_file()
    out_path.write_bytes(b"GGUF fake adapter")
    return out_path


def use_fakes(services: Services, trainer: FakeTrainer | None = None, scorer: FakeScorer | None = None,
              converter: Callable[[Path, Path, Path], Path] = fake_converter) -> tuple[FakeTrainer, FakeScorer]:
    assert services.training is not None
    trainer, scorer = trainer or FakeTrainer(), scorer or FakeScorer()
    services.training.trainer, services.training.scorer = trainer, scorer
    services.training.converter = converter
    services.training.smoke_check = lambda base, adapter: "Hello!"
    return trainer, scorer


def base_file(tmp_path: Path) -> Path:
    path = tmp_path / "base.gguf"
    path.write_bytes(b"GGUF fake base")
    return path


def answered(services: Services, user: str, question: str, answer: str,
             conversation_id: str | None = None) -> tuple[str, str]:
    """One exchange stored for ``user``: ``(conversation_id, the answer's message id)``."""
    conversation, reply, _ = services.conversations.record_exchange(
        user_id=user, conversation_id=conversation_id, user_message=question, reply=answer, model="m",
        prompt_tokens=1, completion_tokens=1)
    return conversation, reply


def rate_many(services: Services, user: str, count: int, start: int = 0) -> list[str]:
    """``count`` answers of ``user`` each given a preferred answer: their feedback ids."""
    assert services.training is not None
    ids = []
    for i in range(start, start + count):
        _, reply = answered(services, user, f"Question number {i}?", f"Wrong answer {i}")
        stored, _ = services.training.feedback(user, reply, -1, preferred_answer=f"Right answer {i}")
        ids.append(stored.id)
    return ids
