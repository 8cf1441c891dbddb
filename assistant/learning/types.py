"""The values shared by training, distillation and federated sync.

Adapters are per user: a user's feedback trains that user's adapter, which is applied to that user's
answers only (llama.cpp switches LoRA adapters per request, ``GenerationOptions.adapter``). A run goes
through :class:`RunState`; only an adapter that beats the active one on held-back samples and is not worse
on the fixed regression set becomes ``active``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol

SampleSource = Literal["preferred", "correction", "implicit", "distillation", "file"]


class RunState(StrEnum):
    """States of a training (or distillation) run. ``idle`` is the status of a user with no run;
    ``cancelled`` is beyond the issue's list: a run stopped by its user (changes nothing, like rejected)."""

    IDLE = "idle"
    PREPARING = "preparing"
    TRAINING = "training"
    EVALUATING = "evaluating"
    ACTIVE = "active"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"


RUNNING_STATES = frozenset({RunState.PREPARING, RunState.TRAINING, RunState.EVALUATING})


@dataclass(frozen=True)
class TrainingSample:
    """One supervised example: the conversation up to the user's question (chat messages as
    ``{"role", "content"}``) and the answer the model should have given."""

    messages: tuple[dict[str, str], ...]
    answer: str
    source: SampleSource
    weight: float = 1.0


@dataclass(frozen=True)
class ProgressEvent:
    """What a trainer reports while it works (also published as a ``TrainingProgress`` signal)."""

    phase: str  # "preparing" | "training" | "evaluating" | ...
    step: int
    total_steps: int
    loss: float | None = None

    @property
    def fraction(self) -> float:
        return self.step / self.total_steps if self.total_steps else 0.0


@dataclass(frozen=True)
class TrainResult:
    peft_dir: Path  # peft's save_pretrained output (adapter_config.json + adapter_model.safetensors)
    losses: tuple[float, ...]  # one per optimiser step
    steps: int


class AdapterTrainer(Protocol):
    """Trains a LoRA adapter on samples for a base GGUF model (the real one: transformers + peft)."""

    def train(self, base_model: Path, samples: list[TrainingSample], out_dir: Path, *, rank: int,
              learning_rate: float, on_progress: Callable[[ProgressEvent], None],
              cancelled: Callable[[], bool], init_adapter: Path | None = None) -> TrainResult: ...


@dataclass(frozen=True)
class AdapterRecord:
    """An adapter on disk: peft's directory and its GGUF conversion, for one user and base model."""

    id: str
    user_id: str
    run_id: str
    base_model: str  # the engine's model name (e.g. "qwen2.5-coder-0.5b-instruct-q4")
    peft_dir: Path
    gguf_path: Path
    samples: int  # how many training samples made it (FedAvg weights by this)
    created_at: str
    metrics: dict[str, Any] = field(default_factory=dict)
