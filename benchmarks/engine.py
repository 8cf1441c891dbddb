"""Engine speed: the shipped llama.cpp CPU variant against the portable build, in the same run.

Arms, each in a child process of its own (a CPU variant is process-wide; :mod:`assistant.llm.speed`),
same model, same prompt:

- ``portable``: the ``haswell`` variant: AVX2/FMA/F16C/BMI2, exactly the instruction set of the
  single portable library the project shipped before runtime dispatch (``LLAMA_CPU=portable``);
- ``shipped``: what ``inference.cpu_variant = "auto"`` loads on this machine (self-tested; ``zen4``
  on an AVX-512 Zen 4);
- ``--portable-lib DIR`` adds ``portable-build``: a separately built portable library
  (``LLAMA_CPP_LIB_PATH``), to confirm that ``haswell`` is the portable build's speed.

For 1 and 2 threads each arm measures prompt processing (tokens/s over a fixed prompt of
``--prompt-tokens``, KV cache cleared), generation (tokens/s over ``--gen-tokens`` greedy tokens,
end-of-sequence banned so every run makes the same number) and time to first token (prompt
evaluation plus the first token's choice). Rounds alternate the arms' order so machine noise hits
both; medians are printed with the ratio shipped / portable.

Target: generation >= 1.6 x portable on a CPU with AVX-512, and no slower (>= 0.95, the noise
floor here) on one without.

    .venv/bin/python benchmarks/engine.py [--rounds 3] [--threads 1,2] [--model NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.llm.speed import Speed  # noqa: E402

FIELDS = {"prompt_tps": "prompt_tokens_per_second", "gen_tps": "generation_tokens_per_second",
          "ttft_ms": "time_to_first_token_ms"}


def served(model_path: Path, rounds: int) -> dict:
    """The same comparison as a user sees it: two `assistant serve` processes on the default settings
    (memory on, threads from the machine), one forced to the portable variant, one on `auto`; the same
    chat streamed from each in turn. Time to first token (the served prompt is long: system prompt,
    memories, history) and message events per second after it."""
    import tempfile

    import httpx

    from benchmarks.chat_overhead import api_stream_run, create_key, free_port, server, write_config

    results: dict[str, list[tuple[float, float]]] = {"portable": [], "shipped": []}
    with tempfile.TemporaryDirectory() as tmp, httpx.Client() as client:
        bases, keys = {}, {}
        with ExitStack() as stack:
            for arm, variant in (("portable", "haswell"), ("shipped", "auto")):
                data = Path(tmp) / arm
                data.mkdir()
                config = write_config(data, "llama-cpp", model_path, None)  # threads: the machine's default
                keys[arm] = create_key(config)
                port = free_port()
                cmd = [sys.executable, "-m", "api.cli", "serve", "--config", str(config), "--port", str(port)]
                bases[arm] = stack.enter_context(server(cmd, port, {"ASSISTANT_INFERENCE__CPU_VARIANT": variant}))
            for arm in bases:  # warm-up
                api_stream_run(client, bases[arm], keys[arm], 8)
            for round_no in range(rounds):
                for arm in (("portable", "shipped") if round_no % 2 == 0 else ("shipped", "portable")):
                    n, total, after = api_stream_run(client, bases[arm], keys[arm], 128)
                    results[arm].append(((total - after) * 1000, (n - 1) / after if after else 0.0))
    out = {}
    for arm, runs in results.items():
        out[arm] = {"ttft_ms": statistics.median(r[0] for r in runs), "events_per_s": statistics.median(r[1] for r in runs)}
    p, s = out["portable"], out["shipped"]
    print(f"served /v1/chat/stream ({rounds} chats each): TTFT portable {p['ttft_ms']:.0f} ms, shipped "
          f"{s['ttft_ms']:.0f} ms ({p['ttft_ms'] / s['ttft_ms']:.2f}x faster); message events/s after the first "
          f"{p['events_per_s']:.1f} vs {s['events_per_s']:.1f} ({s['events_per_s'] / p['events_per_s']:.2f}x)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--data-dir", type=Path, default=Path("~/.local/share/assistant").expanduser())
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=2, help="measurements per child (median)")
    parser.add_argument("--portable-lib", type=Path, help="lib directory of a separate portable build")
    parser.add_argument("--json", type=Path, help="also write the medians here")
    parser.add_argument("--served-rounds", type=int, default=3,
                        help="chats through `assistant serve` per arm (0: skip the served comparison)")
    args = parser.parse_args()

    from assistant.llm.catalog import PACKAGED_MODELS
    from assistant.llm.cpu_variants import parse_cpu_flags, read_cpuinfo
    from assistant.llm.speed import bytes_per_token, measure, read_bandwidth

    model_path = PACKAGED_MODELS[args.model].path(args.data_dir)
    if not model_path.is_file():
        raise SystemExit(f"{args.model} is not installed: assistant models install {args.model}")
    arms: dict[str, tuple[str, Path | None]] = {"portable": ("haswell", None), "shipped": ("auto", None)}
    if args.portable_lib:
        arms["portable-build"] = ("static", args.portable_lib)
    thread_counts = [int(t) for t in args.threads.split(",")]
    results: dict[tuple[str, int], list[Speed]] = {}
    names = list(arms)
    try:
        from tqdm import tqdm

        bar = tqdm(total=args.rounds * len(thread_counts) * len(names), desc="engine arms", file=sys.stderr)
    except ImportError:  # pragma: no cover
        bar = None
    for round_no in range(args.rounds):
        order = names if round_no % 2 == 0 else names[::-1]
        for threads in thread_counts:
            for arm in order:
                variant, lib_path = arms[arm]
                speed = measure(variant, model_path, threads=threads, prompt_tokens=args.prompt_tokens,
                                gen_tokens=args.gen_tokens, reps=args.reps, lib_path=lib_path)
                results.setdefault((arm, threads), []).append(speed)
                if bar:
                    bar.update()
    if bar:
        bar.close()

    flags = parse_cpu_flags(read_cpuinfo())
    avx512 = "avx512f" in flags
    print(f"\nmodel {args.model}, prompt {args.prompt_tokens} tokens, {args.gen_tokens} generated, "
          f"{args.rounds} rounds x {args.reps} reps; CPU has AVX-512: {avx512}")
    print(f"{'arm':<15}{'variant':<11}{'threads':>7}{'prompt tok/s':>14}{'gen tok/s':>11}{'TTFT ms':>9}")
    medians: dict[str, dict] = {}
    for (arm, threads), runs in results.items():
        m: dict = {k: statistics.median(getattr(r, field) for r in runs) for k, field in FIELDS.items()}
        m["variant"] = runs[-1].variant
        medians[f"{arm}@{threads}"] = m
        print(f"{arm:<15}{m['variant']:<11}{threads:>7}{m['prompt_tps']:>14.1f}{m['gen_tps']:>11.1f}{m['ttft_ms']:>9.0f}")
    target = 1.6 if avx512 else 0.95
    per_token = bytes_per_token(model_path)
    ok = True
    for threads in thread_counts:
        base, shipped = medians[f"portable@{threads}"], medians[f"shipped@{threads}"]
        gen = shipped["gen_tps"] / base["gen_tps"]
        prompt = shipped["prompt_tps"] / base["prompt_tps"]
        ttft = base["ttft_ms"] / shipped["ttft_ms"]
        ok &= gen >= target
        print(f"{threads} thread(s): shipped/portable generation {gen:.2f}x, prompt {prompt:.2f}x, "
              f"TTFT {ttft:.2f}x faster (target generation >= {target}x: {'met' if gen >= target else 'NOT met'})")
        # how far generation is from the memory wall: each token reads every weight once
        ceiling = read_bandwidth(threads) / per_token
        print(f"  memory-bandwidth ceiling {ceiling:.0f} tok/s ({per_token / 2**20:.0f} MiB of weights per token): "
              f"portable at {base['gen_tps'] / ceiling:.0%} of it, shipped at {shipped['gen_tps'] / ceiling:.0%}")
        medians[f"ceiling@{threads}"] = {"gen_tps": ceiling}
        if f"portable-build@{threads}" in medians:
            other = medians[f"portable-build@{threads}"]
            print(f"  haswell variant / separate portable build, generation: {base['gen_tps'] / other['gen_tps']:.2f}x")
    if args.served_rounds:
        medians["served"] = served(model_path, args.served_rounds)
    if args.json:
        args.json.write_text(json.dumps(medians, indent=1))
    print("target met" if ok else "target NOT met")


if __name__ == "__main__":
    main()
