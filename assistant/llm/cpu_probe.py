"""The self-test of one llama.cpp CPU variant, run as a child process by :mod:`assistant.llm.cpu_backend`.

    python -m assistant.llm.cpu_probe --library .../libggml-cpu-zen4.so --model model.gguf [--threads 2]

Loads the variant, loads the model (small context), generates a few greedy tokens and prints one
JSON line: ``{"ok": true, "tokens_per_second": ..., "text": ...}``. A variant whose code the CPU
cannot run dies here (SIGILL, SIGSEGV), and only this process dies.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

PROMPT = "Q: What is the capital of France?\nA:"


def run(library: Path, model: Path, threads: int, tokens: int) -> dict:
    from assistant.llm import cpu_backend

    directory = cpu_backend.lib_dir()
    if cpu_backend.registered_backends(directory) == 0 and not cpu_backend.load_library(directory, library):
        return {"ok": False, "reason": f"ggml_backend_load refused {library.name}"}
    from llama_cpp import Llama

    llm = Llama(model_path=str(model), n_ctx=256, n_threads=threads, n_threads_batch=threads, verbose=False)
    started = time.perf_counter()
    out = llm.create_completion(PROMPT, max_tokens=tokens, temperature=0.0, top_k=1)
    elapsed = time.perf_counter() - started
    text = out["choices"][0]["text"]
    generated = int(out["usage"]["completion_tokens"])
    if generated == 0 or not text.strip():
        return {"ok": False, "reason": "generated no text"}
    logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),))
    if not np.isfinite(logits).all():
        return {"ok": False, "reason": "non-finite logits"}
    return {"ok": True, "tokens": generated, "tokens_per_second": round(generated / elapsed, 2), "text": text,
            "features": cpu_backend.system_features()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=16)
    args = parser.parse_args(argv)
    try:
        report = run(args.library, args.model, args.threads, args.tokens)
    except Exception as exc:  # noqa: BLE001 - any failure is this variant's verdict, reported as JSON
        report = {"ok": False, "reason": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(report), flush=True)
    return 0 if report["ok"] else 3


if __name__ == "__main__":
    sys.exit(main())
