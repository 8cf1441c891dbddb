"""transformers helpers shared by the trainer and the evaluation: load the packaged GGUF, encode a sample.

``transformers`` dequantises a GGUF of the Qwen2 and Llama architectures to float32 when given
``gguf_file=`` (both packaged models: Qwen2ForCausalLM and LlamaForCausalLM). torch and transformers
are imported here, inside the functions, never with the package.

A sample is encoded with the model's own chat template (from the GGUF): the prompt messages with the
generation prompt, then the answer and the template's end-of-turn. Only the answer's tokens carry a
label (the prompt's are -100, so the loss is the answer's alone). Too long a sample loses the oldest
prompt tokens first, then the end of the answer, to fit ``max_tokens``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assistant.learning.types import TrainingSample

IGNORE = -100  # the label of a token that carries no loss (the prompt's)


def load_base(base_model: Path) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a GGUF file, dequantised to float32, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base_model = Path(base_model)
    tokenizer = AutoTokenizer.from_pretrained(str(base_model.parent), gguf_file=base_model.name)
    model = AutoModelForCausalLM.from_pretrained(str(base_model.parent), gguf_file=base_model.name,
                                                 dtype=torch.float32)
    model.eval()
    return model, tokenizer


def _render(tokenizer: Any, messages: list[dict[str, str]], generation_prompt: bool) -> str:
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)  # a model without a template
    return text + ("assistant: " if generation_prompt else "")


def encode(tokenizer: Any, sample: TrainingSample, max_tokens: int) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of one sample (see the module docstring)."""
    messages = [dict(m) for m in sample.messages]
    prompt_text = _render(tokenizer, messages, True)
    full_text = _render(tokenizer, [*messages, {"role": "assistant", "content": sample.answer}], False)
    if not full_text.startswith(prompt_text):  # a template that renders the last turn differently
        full_text = prompt_text + sample.answer + (tokenizer.eos_token or "")
    prompt = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    answer = tokenizer(full_text[len(prompt_text):], add_special_tokens=False)["input_ids"]
    if not answer:
        answer = [tokenizer.eos_token_id]
    answer = answer[:max(1, max_tokens // 2)] if len(answer) > max_tokens - 1 else answer
    prompt = prompt[-(max_tokens - len(answer)):] if len(prompt) + len(answer) > max_tokens else prompt
    return prompt + answer, [IGNORE] * len(prompt) + list(answer)


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Limit torch's CPU threads inside the block (a process-wide setting: restored after)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(1, int(threads)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def answer_nll(model: Any, input_ids: list[int], labels: list[int]) -> float:
    """The mean negative log-likelihood (nats per token) of the labelled tokens."""
    import torch

    with torch.no_grad():
        ids = torch.tensor([input_ids])
        out = model(input_ids=ids, labels=torch.tensor([labels]))
    return float(out.loss)
