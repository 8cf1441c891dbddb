"""A LoRA adapter on the embedded engine: its size, its conversion time, and tokens/s with and without it.

For each packaged model (the small SmolLM2-135M and the default Qwen2.5-Coder-0.5B, installed in the usual
data directory):

1. Setup: the GGUF is loaded into transformers (dequantised) and given a peft LoRA adapter of rank
   ``--rank`` on q_proj and v_proj, with ``init_lora_weights=False`` (random non-zero B: the size and
   the compute of a trained adapter, without training). peft's ``save_pretrained`` writes it.
2. Conversion: :func:`assistant.learning.convert.convert_to_gguf` (llama.cpp's converter, f32), timed
   twice: cold (the base model's Hugging Face config and tokenizer are derived from the GGUF first)
   and warm (that directory cached, what every later training run pays).
3. Sizes: peft's safetensors and the GGUF adapter on disk.
4. Speed, in one :class:`LlamaCppChatModel` with the same prompt: rounds alternate base and adapter
   (``LoraAdapters.apply``, what ``GenerationOptions.adapter`` does), each from an empty KV cache:
   prompt tokens/s (evaluating the prompt) and generation tokens/s (``--tokens`` greedy tokens, EOS
   ignored so each run has the same length). Medians over ``--rounds``; the ratio adapter / base is
   the adapter's cost (llama.cpp adds B(Ax) to q and v at compute time, the base weights untouched).

Nothing here is a test: tests never assert times.

    .venv/bin/python benchmarks/lora_adapter.py [--models smollm2-135m-instruct,qwen2.5-coder-0.5b-instruct]
        [--rank 8] [--tokens 64] [--rounds 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import Settings  # noqa: E402
from assistant.learning.convert import convert_to_gguf  # noqa: E402
from assistant.llm.catalog import DEFAULT_MODEL, SMALL_MODEL, install_model  # noqa: E402
from assistant.llm.llama_cpp import LlamaCppChatModel  # noqa: E402

PROMPT = (
    "You are a careful assistant that keeps notes for a household. Summarise the following notes in three "
    "short sentences and say which task is due first.\n"
    "Notes: the boiler service is booked for the fourteenth of next month; the car insurance renews on the "
    "second; the library books are due back on Friday; the dentist asked to move the appointment from "
    "Tuesday morning to Thursday afternoon; the garden needs watering every evening while the weather stays "
    "dry; the school trip form must be signed and returned before Wednesday; the electricity meter reading "
    "is requested by the end of the week; the neighbours are away and asked us to collect their post; the "
    "bakery order for the birthday cake has to be confirmed by phone before noon tomorrow.\n"
    "Summary:"
)


def make_peft(model_path: Path, out: Path, rank: int) -> float:
    """peft adapter of ``model_path`` (GGUF, loaded by transformers) in ``out``; returns seconds taken."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    start = time.perf_counter()
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, config)
    peft_model.save_pretrained(out)
    del peft_model, base
    gc.collect()
    return time.perf_counter() - start


def timed_run(engine: LlamaCppChatModel, name: str, adapter: Path | None, tokens: list[int],
              n: int) -> tuple[float, float]:
    """(prompt tokens/s, generation tokens/s) of one run from an empty KV cache."""
    llm = engine.load(name)
    engine.adapters.apply(name, llm, str(adapter) if adapter else None)
    llm.reset()
    start = time.perf_counter()
    stream = llm.generate(tokens, temp=0.0)
    next(stream)  # the prompt evaluated, the first token sampled
    first = time.perf_counter()
    for _ in range(n - 1):
        next(stream)
    end = time.perf_counter()
    stream.close()
    return len(tokens) / (first - start), (n - 1) / (end - first)


def bench_model(name: str, args: argparse.Namespace, work: Path) -> dict[str, float]:
    model_path = install_model(name, Settings().data_dir)
    peft_dir, gguf = work / name / "peft", work / name / "adapter.gguf"
    setup = make_peft(model_path, peft_dir, args.rank)
    start = time.perf_counter()
    convert_to_gguf(peft_dir, model_path, gguf, cache_dir=work / "base-config")
    cold = time.perf_counter() - start
    start = time.perf_counter()
    convert_to_gguf(peft_dir, model_path, gguf, cache_dir=work / "base-config")
    warm = time.perf_counter() - start

    engine = LlamaCppChatModel(name, work, model_path=model_path, threads=args.threads, context_length=2048)
    llm = engine.load(name)
    tokens = llm.tokenize(PROMPT.encode(), add_bos=True)
    timed_run(engine, name, None, tokens, 4)  # warm-up: page the weights in, load the adapter once
    timed_run(engine, name, gguf, tokens, 4)
    runs: dict[str, list[tuple[float, float]]] = {"base": [], "adapter": []}
    for _ in range(args.rounds):
        runs["base"].append(timed_run(engine, name, None, tokens, args.tokens))
        runs["adapter"].append(timed_run(engine, name, gguf, tokens, args.tokens))
    engine.adapters.release_model(name, llm)
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in runs.items()}
    peft_size = (peft_dir / "adapter_model.safetensors").stat().st_size
    print(f"\n{name} ({model_path.name}, {model_path.stat().st_size / 2**20:.0f} MiB), rank {args.rank} on q/v, "
          f"{args.threads} thread(s), prompt {len(tokens)} tokens, {args.tokens} generated, {args.rounds} rounds")
    print(f"  adapter size: peft safetensors {peft_size / 2**20:.2f} MiB, GGUF f32 {gguf.stat().st_size / 2**20:.2f} MiB")
    print(f"  peft adapter made in {setup:.1f} s (transformers load of the GGUF + peft)")
    print(f"  conversion: cold {cold:.1f} s (base config derived from the GGUF), warm {warm:.1f} s (cached)")
    for label, (prompt_tps, gen_tps) in med.items():
        print(f"  {label:8s} prompt {prompt_tps:7.1f} tok/s   generation {gen_tps:6.1f} tok/s")
    ratio_prompt = med["adapter"][0] / med["base"][0]
    ratio_gen = med["adapter"][1] / med["base"][1]
    print(f"  ratio adapter / base: prompt {ratio_prompt:.2f}, generation {ratio_gen:.2f}")
    del engine, llm
    gc.collect()
    return {"prompt_ratio": ratio_prompt, "generation_ratio": ratio_gen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=f"{SMALL_MODEL},{DEFAULT_MODEL}")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lora-bench-") as tmp:
        for name in args.models.split(","):
            bench_model(name.strip(), args, Path(tmp))


if __name__ == "__main__":
    main()
