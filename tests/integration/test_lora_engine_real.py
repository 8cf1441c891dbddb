"""A real peft LoRA adapter of SmolLM2-135M, converted by llama.cpp's converter and switched per
request in the embedded engine: the adapter changes the greedy answer, going back to the base model
drops the adapter's KV cache (the base answer comes back, computed from the first token), and a damaged
adapter file is a clear ServiceUnavailableError that leaves the engine answering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assistant.errors import ServiceUnavailableError
from assistant.learning.convert import convert_to_gguf
from assistant.llm.base import ChatMessage, ChatResult, GenerationOptions, collect
from assistant.llm.catalog import SMALL_MODEL
from assistant.llm.llama_cpp import LlamaCppChatModel

pytestmark = pytest.mark.integration

QUESTION = [ChatMessage("user", "Name three colours.")]


@pytest.fixture(scope="module")
def adapter(small_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rank-8 q/v adapter with random, non-zero B (no training needed to change the answers)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    work = tmp_path_factory.mktemp("lora")
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(small_model_path.parent, gguf_file=small_model_path.name)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(work / "peft")
    out = convert_to_gguf(work / "peft", small_model_path, work / "adapter.gguf", cache_dir=work / "base")
    assert out == work / "adapter.gguf"
    assert out.read_bytes()[:4] == b"GGUF"
    config = json.loads(next((work / "base").glob("*/config.json")).read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    return out


def ask(engine: LlamaCppChatModel, adapter: Path | str | None = None) -> ChatResult:
    options = GenerationOptions(temperature=0.0, max_tokens=20, adapter=str(adapter) if adapter else None)
    return collect(engine.stream(QUESTION, options))


def test_adapters_switch_per_request_without_leaking_the_kv_cache(adapter: Path, small_model_path: Path,
                                                                  tmp_path: Path) -> None:
    engine = LlamaCppChatModel(SMALL_MODEL, tmp_path, model_path=small_model_path, threads=2,
                               context_length=1024)
    base = ask(engine)
    tuned = ask(engine, adapter)
    assert tuned.content != base.content
    assert tuned.usage.cached_prompt == 0  # the base model's cache was dropped, not reused

    again = ask(engine)  # back to the base model: computed from the first token, the same answer
    assert again.usage.cached_prompt == 0
    assert again.content == base.content
    assert ask(engine, adapter).content == tuned.content  # the cached adapter, loaded once
    assert engine.adapters.loaded() == [(SMALL_MODEL, str(adapter.resolve()))]

    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(adapter.read_bytes()[: adapter.stat().st_size // 3])
    with pytest.raises(ServiceUnavailableError, match="could not be loaded for model"):
        ask(engine, damaged)
    with pytest.raises(ServiceUnavailableError, match="does not exist"):
        ask(engine, tmp_path / "gone.gguf")
    assert ask(engine).content == base.content  # the engine still answers
