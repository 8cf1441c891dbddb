"""Engine speed of one llama.cpp CPU variant: prompt processing, generation, time to first token.

A CPU variant is process-wide, so each measurement runs in a child process
(``python -m assistant.llm.speed --variant haswell ...``) that prints one JSON line.
``benchmarks/engine.py`` and notebook 11 compare variants with it.

Prompt processing: tokens/s over a fixed prompt (KV cache cleared before each repetition).
Generation: tokens/s over greedy tokens with end-of-sequence banned, so every run makes the same
number. Time to first token: prompt evaluation plus the first token's choice.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TEXT = ("A personal assistant that runs at home keeps its memories on the owner's own disk. It answers "
        "questions about the calendar, the weather and the news, turns lights on and off, and remembers what "
        "it was told last week. Every part of it runs on the same small computer, without any cloud service. ")


@dataclass(frozen=True)
class Speed:
    variant: str  # what actually ran ("static" for a build without dispatch)
    threads: int
    prompt_tokens_per_second: float
    generation_tokens_per_second: float
    time_to_first_token_ms: float


def _measure(variant: str, model: Path, threads: int, prompt_tokens: int, gen_tokens: int, reps: int) -> dict:
    import numpy as np

    from assistant.llm.cpu_backend import ensure_cpu_backend

    if variant == "static":  # a build without dispatch, e.g. through LLAMA_CPP_LIB_PATH
        info = ensure_cpu_backend()
    else:
        info = ensure_cpu_backend(requested=variant, model=model if variant == "auto" else None, threads=threads)
    from llama_cpp import Llama

    llm = Llama(model_path=str(model), n_ctx=prompt_tokens + gen_tokens + 8, n_threads=threads,
                n_threads_batch=threads, n_batch=512, n_ubatch=512, verbose=False)
    tokens = llm.tokenize((TEXT * 40).encode())[:prompt_tokens]
    eos = llm.token_eos()

    def next_token() -> int:
        logits = np.array(llm.scores[llm.n_tokens - 1], copy=True)
        logits[eos] = -np.inf
        return int(np.argmax(logits))

    runs = []
    for _ in range(reps):
        llm.reset()
        started = time.perf_counter()
        llm.eval(tokens)
        prompt_done = time.perf_counter()
        token = next_token()
        first = time.perf_counter()
        for _ in range(gen_tokens - 1):
            llm.eval([token])
            token = next_token()
        done = time.perf_counter()
        runs.append((len(tokens) / (prompt_done - started), (gen_tokens - 1) / (done - first),
                     (first - started) * 1000))
    prompt, gen, ttft = (statistics.median(r[i] for r in runs) for i in range(3))
    return {"variant": info.variant or "static", "threads": threads, "prompt_tokens_per_second": prompt,
            "generation_tokens_per_second": gen, "time_to_first_token_ms": ttft}


def bytes_per_token(model: Path) -> int:
    """Bytes of weights one generated token reads: every tensor of the GGUF but the token-embedding
    table, of which a step reads one row (a model whose output head is tied to that table has no
    ``output.weight``; then the head reads the table whole, so it counts)."""
    from gguf import GGUFReader  # the llama.cpp project's reader, already a dependency (pyproject)

    sizes = {t.name: int(t.n_bytes) for t in GGUFReader(model).tensors}
    total = sum(sizes.values())
    return total - sizes.get("token_embd.weight", 0) if "output.weight" in sizes else total


def read_bandwidth(threads: int, *, mib: int = 512, reps: int = 5) -> float:
    """Bytes per second that ``threads`` threads read from memory: each sums its own slice of a
    buffer far larger than the caches (numpy releases the GIL in the sum); best of ``reps``.
    Each generated token reads all the weights once, so ``read_bandwidth / bytes_per_token`` bounds
    generation from above, whatever the instruction set."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    data = np.ones(mib * 2**20 // 8, dtype=np.float64)
    parts = np.array_split(data, threads)
    best = 0.0
    with ThreadPoolExecutor(threads) as pool:
        for _ in range(reps):
            started = time.perf_counter()
            list(pool.map(np.sum, parts))
            best = max(best, data.nbytes / (time.perf_counter() - started))
    return best


def measure(variant: str, model: Path, *, threads: int = 1, prompt_tokens: int = 256, gen_tokens: int = 64,
            reps: int = 2, lib_path: Path | None = None, timeout: float = 900) -> Speed:
    """Measure in a child process; ``variant`` is a variant name, ``auto`` (what the engine would
    pick) or ``static`` with ``lib_path`` (a separate build without dispatch)."""
    cmd = [sys.executable, "-m", "assistant.llm.speed", "--variant", variant, "--model", str(model),
           "--threads", str(threads), "--prompt-tokens", str(prompt_tokens), "--gen-tokens", str(gen_tokens),
           "--reps", str(reps)]
    env = {**os.environ, **({"LLAMA_CPP_LIB_PATH": str(lib_path)} if lib_path else {})}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"measuring {variant} with {threads} thread(s) failed (exit {out.returncode}): "
                           f"{out.stderr.strip()[-1500:]}")
    return Speed(**json.loads(lines[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="auto")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args(argv)
    report = _measure(args.variant, args.model, args.threads, args.prompt_tokens, args.gen_tokens, args.reps)
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
