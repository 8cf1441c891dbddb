"""The real :class:`~assistant.learning.types.AdapterTrainer`: transformers + peft LoRA on CPU.

:class:`PeftTrainer` loads the base GGUF with ``transformers`` (dequantised to float32,
:func:`assistant.learning.hf.load_base`), wraps it in a peft LoRA of rank ``lora.rank`` on the attention
**query and value projections** (``q_proj``, ``v_proj``: the LoRA paper's choice, which adapted W_q and
W_v for the best result at a given number of trainable parameters; both packaged architectures, Qwen2
and Llama, name them so; 0.27 % of SmolLM2-135M's parameters at rank 8), alpha ``lora.alpha`` (16: the
update is scaled by alpha / rank = 2) and dropout ``lora.dropout``, and trains it with AdamW at
``lora.learning_rate``: one sample per optimiser step (no padding, no batching: CPU, short runs),
``lora.epochs`` passes in a seeded shuffled order, at most ``lora.max_steps`` steps. The loss is the
answer's alone (the prompt's tokens are masked, :func:`assistant.learning.hf.encode`). torch uses
``lora.threads`` CPU threads (1 by default: the engine and the embedder share the machine).

Between two steps it reports a :class:`ProgressEvent` (phase ``training``, the step's loss) and checks
``cancelled()``: a cancelled run raises :class:`TrainingCancelled` and saves nothing. At the end it saves
peft's directory (``adapter_config.json`` + ``adapter_model.safetensors``), which
``assistant.learning.convert.convert_to_gguf`` turns into a GGUF LoRA for llama.cpp.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from assistant.learning.hf import encode, load_base, torch_threads
from assistant.learning.types import ProgressEvent, TrainingSample, TrainResult

TARGET_MODULES = ("q_proj", "v_proj")
SEED = 1234


class TrainingCancelled(Exception):
    """The run was cancelled between two steps: nothing was saved."""


class PeftTrainer:
    """LoRA training with peft (see the module docstring); the knobs come from ``[lora]``."""

    id = "peft"

    def __init__(self, *, epochs: int = 2, max_steps: int = 200, max_seq_tokens: int = 512, alpha: float = 16.0,
                 dropout: float = 0.05, threads: int = 1, seed: int = SEED):
        self.epochs = epochs
        self.max_steps = max_steps
        self.max_seq_tokens = max_seq_tokens
        self.alpha = alpha
        self.dropout = dropout
        self.threads = threads
        self.seed = seed

    @classmethod
    def from_settings(cls, lora: object) -> PeftTrainer:
        return cls(epochs=lora.epochs, max_steps=lora.max_steps, max_seq_tokens=lora.max_seq_tokens,  # type: ignore[attr-defined]
                   alpha=lora.alpha, dropout=lora.dropout, threads=lora.threads)  # type: ignore[attr-defined]

    def steps_for(self, samples: int) -> int:
        return min(self.max_steps, self.epochs * samples)

    def train(self, base_model: Path, samples: list[TrainingSample], out_dir: Path, *, rank: int,
              learning_rate: float, on_progress: Callable[[ProgressEvent], None],
              cancelled: Callable[[], bool], init_adapter: Path | None = None) -> TrainResult:
        if not samples:
            raise ValueError("no samples to train on")
        with torch_threads(self.threads):
            return self._train(Path(base_model), samples, Path(out_dir), rank, learning_rate, on_progress, cancelled,
                               init_adapter)

    def _train(self, base_model: Path, samples: list[TrainingSample], out_dir: Path, rank: int, learning_rate: float,
               on_progress: Callable[[ProgressEvent], None], cancelled: Callable[[], bool],
               init_adapter: Path | None) -> TrainResult:
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model

        torch.manual_seed(self.seed)
        on_progress(ProgressEvent("preparing", 0, 0))
        model, tokenizer = load_base(base_model)
        if init_adapter is not None:
            model = PeftModel.from_pretrained(model, str(init_adapter), is_trainable=True)
        else:
            config = LoraConfig(r=rank, lora_alpha=self.alpha, lora_dropout=self.dropout,
                                target_modules=list(TARGET_MODULES), bias="none", task_type="CAUSAL_LM")
            model = get_peft_model(model, config)
        encoded = [encode(tokenizer, s, self.max_seq_tokens) for s in samples]
        weights = [max(0.0, float(s.weight)) for s in samples]
        total = self.steps_for(len(encoded))
        order: list[int] = []
        rng = random.Random(self.seed)
        while len(order) < total:
            epoch = list(range(len(encoded)))
            rng.shuffle(epoch)
            order.extend(epoch)
        optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=learning_rate)
        model.train()
        losses: list[float] = []
        for step, index in enumerate(order[:total], start=1):
            if cancelled():
                raise TrainingCancelled(f"cancelled before step {step} of {total}")
            ids, labels = encoded[index]
            out = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels]))
            (out.loss * weights[index]).backward()
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            losses.append(float(out.loss.detach()))
            on_progress(ProgressEvent("training", step, total, losses[-1]))
        if cancelled():
            raise TrainingCancelled(f"cancelled after step {total} of {total}")
        out_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(out_dir))
        return TrainResult(out_dir, tuple(losses), total)
