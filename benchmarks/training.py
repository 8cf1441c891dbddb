"""LoRA training on CPU: time per 50 samples for both packaged models, and the adapter's size on disk.

For each model (``--models``, default both: SmolLM2-135M and Qwen2.5-Coder-0.5B, installed in the
normal data directory): ``--samples`` (50) short supervised samples (generated question/answer facts,
about 60 tokens each with the chat template), one epoch, one sample per step (so 50 steps), rank
``--rank`` (8) on q_proj/v_proj, learning rate 1e-4, ``--threads`` torch threads, through the real
:class:`assistant.learning.trainer.PeftTrainer`. Measured: loading the GGUF into transformers, the
training steps (per step and per 50 samples), the peft directory's and the converted GGUF adapter's
sizes (llama.cpp's converter, :func:`assistant.learning.convert.convert_to_gguf`). Printed with the
ratio of each model's time per 50 samples to SmolLM2's, measured in the same run. Nothing here is a test.

    .venv/bin/python benchmarks/training.py [--models smollm2-135m-instruct qwen2.5-coder-0.5b-instruct]
                                           [--samples 50] [--threads 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import Settings  # noqa: E402
from assistant.learning.types import ProgressEvent, TrainingSample  # noqa: E402
from assistant.llm.catalog import DEFAULT_MODEL, SMALL_MODEL, get_packaged_model  # noqa: E402

PLACES = ["Berlin", "Lisbon", "Oslo", "Porto", "Vienna", "Kyoto", "Quito", "Lagos", "Perth", "Tromsø"]
PEOPLE = ["Anna", "Bilal", "Chen", "Dora", "Emeka", "Farah", "Goran", "Hana", "Ines", "Jonas"]
SYSTEM = "You are a helpful, concise personal assistant running locally."


def samples(n: int) -> list[TrainingSample]:
    out = []
    for i in range(n):
        person, place = PEOPLE[i % len(PEOPLE)], PLACES[(i * 3) % len(PLACES)]
        question = f"Where does my friend {person} live now, and since when?"
        answer = f"{person} lives in {place} and has been there since {2010 + i % 15}."
        out.append(TrainingSample(({"role": "system", "content": SYSTEM}, {"role": "user", "content": question}),
                                  answer, "preferred"))
    return out


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def measure(name: str, n: int, rank: int, threads: int, work: Path) -> dict[str, float]:
    from assistant.learning.convert import convert_to_gguf
    from assistant.learning.hf import load_base, torch_threads
    from assistant.learning.trainer import PeftTrainer

    base = get_packaged_model(name).path(Settings().data_dir)
    if not base.is_file():
        raise SystemExit(f"{name} is not installed ({base}): `assistant models install {name}`")
    with torch_threads(threads):
        t0 = time.perf_counter()
        load_base(base)
        load_s = time.perf_counter() - t0
    stamps: list[float] = []

    def progress(event: ProgressEvent) -> None:
        if event.phase == "training":
            stamps.append(time.perf_counter())
            print(f"\r  {name}: step {event.step}/{event.total_steps} loss {event.loss:.3f}", end="", flush=True)

    trainer = PeftTrainer(epochs=1, max_steps=n, max_seq_tokens=256, threads=threads)
    peft = work / name / "peft"
    t0 = time.perf_counter()
    result = trainer.train(base, samples(n), peft, rank=rank, learning_rate=1e-4, on_progress=progress,
                           cancelled=lambda: False)
    total_s = time.perf_counter() - t0
    print()
    train_s = stamps[-1] - stamps[0] if len(stamps) > 1 else total_s
    per_step = train_s / max(1, len(stamps) - 1)
    t0 = time.perf_counter()
    gguf = convert_to_gguf(peft, base, work / name / "adapter.gguf", cache_dir=work / "base-config")
    convert_s = time.perf_counter() - t0
    return {"load_s": load_s, "run_s": total_s, "per_step_s": per_step, "per_50_s": per_step * 50,
            "first_loss": result.losses[0], "last_loss": result.losses[-1], "peft_bytes": size(peft),
            "gguf_bytes": size(gguf), "convert_s": convert_s, "steps": result.steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=[SMALL_MODEL, DEFAULT_MODEL])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            figures[name] = measure(name, args.samples, args.rank, args.threads, Path(tmp))
    baseline = figures.get(SMALL_MODEL) or next(iter(figures.values()))
    print(f"\nLoRA rank {args.rank} on q_proj/v_proj, {args.samples} samples, 1 epoch (one sample per step), "
          f"{args.threads} torch threads")
    print(f"{'model':32} {'load s':>7} {'s/step':>7} {'s/50 samples':>13} {'x small':>8} {'loss first->last':>17} "
          f"{'peft KiB':>9} {'gguf KiB':>9} {'convert s':>10}")
    for name, f in figures.items():
        print(f"{name:32} {f['load_s']:7.1f} {f['per_step_s']:7.2f} {f['per_50_s']:13.1f} "
              f"{f['per_50_s'] / baseline['per_50_s']:8.2f} {f['first_loss']:8.3f}->{f['last_loss']:<8.3f} "
              f"{f['peft_bytes'] / 1024:9.0f} {f['gguf_bytes'] / 1024:9.0f} {f['convert_s']:10.1f}")


if __name__ == "__main__":
    main()
