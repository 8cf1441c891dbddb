"""The real pipeline on SmolLM2-135M: feedback -> PeftTrainer (transformers + peft, a few steps on CPU) ->
llama.cpp's converter -> the GGUF adapter loaded by llama-cpp with the base model -> evaluation.

Kept short for 2 cores: 6 samples, 4 steps, sequences of at most 128 tokens, 1 torch thread."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

import pytest

from assistant.learning.convert import converter_script
from assistant.learning.types import RunState
from assistant.services import Services

ALICE = str(uuid4())
FACTS = [("What colour is the sky on a clear day?", "The sky is blue on a clear day."),
         ("What is the capital of France?", "The capital of France is Paris."),
         ("How many legs does a spider have?", "A spider has eight legs."),
         ("What do bees make?", "Bees make honey."),
         ("What is frozen water called?", "Frozen water is called ice."),
         ("Which animal says moo?", "A cow says moo.")]


@pytest.fixture
def converter_installed() -> None:
    converter_script()  # `make setup` installs it (.venv/share/llama.cpp-convert): missing is a failure, not a skip


def test_a_real_adapter_is_trained_converted_loaded_and_evaluated(
        make_services: Callable[..., Services], make_settings: Callable[..., object], small_model_path: Path,
        converter_installed: None) -> None:
    services = make_services(make_settings(
        inference={"model": "smollm2-135m-instruct", "model_path": str(small_model_path)},
        lora={"enabled": True, "min_samples": len(FACTS), "auto_start": False, "epochs": 1, "max_steps": 4,
              "max_seq_tokens": 128, "threads": 1, "learning_rate": 1e-3, "held_out_fraction": 0.3}))
    training = services.training
    assert training is not None and training.base_model == small_model_path
    for question, answer in FACTS:
        _, reply, _ = services.conversations.record_exchange(
            user_id=ALICE, conversation_id=None, user_message=question, reply="I don't know.", model="m",
            prompt_tokens=1, completion_tokens=1)
        training.feedback(ALICE, reply, -1, preferred_answer=answer)
    events: list[tuple[str, str, int]] = []
    training.subscribe(lambda run: events.append((run.state.value, run.phase, run.step)))
    run = training.start(ALICE)
    deadline = time.monotonic() + 900  # a bound against hangs on a loaded machine, not a timing assertion
    while training.current(ALICE) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    done = training.get_run(ALICE, run.id)
    assert done.state in (RunState.ACTIVE, RunState.REJECTED), done.error
    # trained: a loss per step, every one finite
    assert len(done.losses) == done.metrics["steps"] == min(4, done.samples)
    assert all(0 < loss < 50 for loss in done.losses)
    assert [p for p in dict.fromkeys(p for _, p, _ in events)][:4] == ["queued", "preparing", "training",
                                                                                "converting"]
    # converted and loaded by llama-cpp with the base model (the smoke check answered)
    assert done.metrics["smoke_answer"]
    # evaluated: base and candidate on the held-back feedback and on the regression set
    assert set(done.metrics["held_out"]) == {"base", "candidate"}
    assert set(done.metrics["regression"]) == {"base", "candidate"}
    assert done.metrics["adapter_bytes"] > 0
    if done.state is RunState.ACTIVE:
        gguf = training.active_gguf(ALICE)
        assert gguf is not None and gguf.read_bytes()[:4] == b"GGUF"
        peft = training.active_adapter(ALICE).peft_dir  # type: ignore[union-attr]
        assert json.loads((peft / "adapter_config.json").read_text())["r"] == 8
        assert sorted(json.loads((peft / "adapter_config.json").read_text())["target_modules"]) == ["q_proj", "v_proj"]
    else:  # rejected: nothing kept, nothing active
        assert training.active_adapter(ALICE) is None
        assert not (services.data_dir / "adapters" / ALICE / run.id).exists()
