"""Distillation's collecting phase against a plain loop over the same teacher, on loopback.

Setup (not measured): a teacher, `assistant serve` in a subprocess with the packaged SmolLM2-135M by default
(`--engine default` for Qwen2.5-Coder-0.5B), one thread, temperature 0, memory off; a student (in-process
services: scripted engine, never asked; the real MiniLM defence) with ``[distillation]`` pointing at the teacher's ``/v1`` and ``--prompts`` of the
LoCoMo-dev questions (``../shared/benchmarks/locomo/locomo_dev5.json``, the first distinct ones) stored as one
user's past questions (sealed chat messages). Its training pipeline is a recorder: the run ends when the dataset
is handed over (training is measured by benchmarks/lora_adapter.py). One warm-up request loads the model.

Measured, each once per round (``--rounds``), alternating:

* direct: a loop of `POST /v1/chat/completions` (stream, the same system prompt, `max_tokens`, temperature)
  over the prompts with one httpx client, what a hand-written script would do;
* distillation, concurrency 1: `Distillation.start(user)` until the dataset is handed over (prompt selection
  from the sealed history, the engine client, the defence's pattern check, the run's record and a
  `TrainingProgress` signal per prompt);
* distillation, concurrency 2 (`distillation.concurrency = 2`): two requests in flight (the teacher's
  engine still runs one generation at a time).

Printed: the wall time of each, per prompt, the answers kept and the completion tokens, and the ratios
distillation / direct (the pipeline's overhead) and concurrency 2 / 1. Nothing here is a test.

    .venv/bin/python benchmarks/distillation.py [--engine small|default] [--prompts 20] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import Settings  # noqa: E402
from assistant.learning.distill_store import DistillPhase  # noqa: E402
from assistant.learning.types import RunState, TrainingSample  # noqa: E402
from assistant.llm.catalog import DEFAULT_MODEL, SMALL_MODEL, install_model  # noqa: E402
from assistant.services import build_services  # noqa: E402
from benchmarks._served import ServedApp  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "benchmarks" / "locomo" / "locomo_dev5.json"


class Recorder:
    """The training pipeline as a recorder: the dataset handed over ends the measured part."""

    def __init__(self) -> None:
        self.samples: list[TrainingSample] = []
        self.handed = threading.Event()

    def start(self, user_id: str, samples: list[TrainingSample]) -> Any:
        self.samples = list(samples)
        self.handed.set()
        return _Ended(str(uuid4()))

    def get(self, user_id: str, run_id: str) -> Any:
        return _Ended(run_id)

    def running(self, user_id: str) -> None:
        return None

    def cancel(self, user_id: str, run_id: str) -> None:
        return None


class _Ended:
    def __init__(self, run_id: str):
        self.id, self.state, self.fraction, self.error = run_id, RunState.REJECTED.value, 1.0, None


def questions(n: int) -> list[str]:
    seen: dict[str, None] = {}
    for conversation in json.loads(LOCOMO.read_text()):
        for qa in conversation["qa"]:
            seen.setdefault(qa["question"].strip(), None)
    return list(seen)[:n]


def direct(base: str, key: str, model: str, system: str, prompts: list[str], max_tokens: int) -> tuple[float, int]:
    start, tokens = time.perf_counter(), 0
    with httpx.Client(timeout=600, headers={"Authorization": f"Bearer {key}"}) as client:
        for prompt in prompts:
            body = {"model": model, "messages": [{"role": "system", "content": system},
                                                 {"role": "user", "content": prompt}],
                    "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
                    "stream_options": {"include_usage": True}}
            with client.stream("POST", f"{base}/v1/chat/completions", json=body) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                        usage = json.loads(line[5:]).get("usage")
                        tokens += usage["completion_tokens"] if usage else 0
    return time.perf_counter() - start, tokens


def distil(services: Any, user: str, recorder: Recorder, concurrency: int) -> tuple[float, int, int]:
    distillation = services.distillation
    distillation.settings = distillation.settings.model_copy(update={"concurrency": concurrency})
    recorder.handed.clear()
    start = time.perf_counter()
    run = distillation.start(user)
    if not recorder.handed.wait(3600):
        raise RuntimeError("the dataset was never handed over")
    elapsed = time.perf_counter() - start
    final = distillation.wait(user, 60)
    if final is None or final.phase is DistillPhase.FAILED:
        raise RuntimeError(f"run {run.id} failed: {final.error if final else '?'}")
    return elapsed, final.answered, final.failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["small", "default"], default="small")
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("ASSISTANT_TESTING", "1")  # the student's scripted engine (never asked here) is a test double
    name = SMALL_MODEL if args.engine == "small" else DEFAULT_MODEL
    path = install_model(name, Settings().data_dir)
    prompts = questions(args.prompts)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "teacher").mkdir()
        teacher = ServedApp(Path(tmp) / "teacher", {
            "inference": {"backend": "llama-cpp", "model": name, "model_path": str(path), "threads": 1,
                          "temperature": 0.0},
            "memory": {"enabled": False}}).start()
        try:
            model = httpx.get(teacher.url("/v1/models"), headers=teacher.headers, timeout=120).json()["data"][0]["id"]
            settings = Settings.load(
                server={"data_dir": str(Path(tmp) / "student")}, inference={"backend": "scripted"},
                lora={"enabled": True, "min_samples": 1},
                distillation={"enabled": True, "teacher_engine": "openai_compatible",
                              "teacher_base_url": teacher.url("/v1"), "teacher_model": model,
                              "teacher_api_key": teacher.key, "max_prompts": len(prompts),
                              "max_tokens": args.max_tokens, "temperature": 0.0, "timeout_secs": 600})
            services = build_services(settings)
            try:
                recorder = Recorder()
                services.distillation.training = recorder
                user = str(uuid4())
                for i, q in enumerate(reversed(prompts)):  # the first question the newest: asked in this order
                    services.conversations.record_exchange(user_id=user, conversation_id=None, user_message=q,
                                                           reply="ok", model="s", prompt_tokens=1, completion_tokens=1,
                                                           at=f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}Z")
                system = settings.inference.system_prompt
                direct(teacher.base_url, teacher.key, model, system, prompts[:1], args.max_tokens)  # warm-up
                times: dict[str, list[float]] = {"direct": [], "distil1": [], "distil2": []}
                tokens, kept = 0, (0, 0)
                for _ in range(args.rounds):
                    elapsed, tokens = direct(teacher.base_url, teacher.key, model, system, prompts, args.max_tokens)
                    times["direct"].append(elapsed)
                    elapsed, answered, failed = distil(services, user, recorder, 1)
                    times["distil1"].append(elapsed)
                    kept = (answered, failed)
                    times["distil2"].append(distil(services, user, recorder, 2)[0])
            finally:
                services.close()
        finally:
            teacher.stop()
    best = {k: min(v) for k, v in times.items()}
    n = len(prompts)
    print(f"teacher {name} (llama.cpp, 1 thread) on loopback; {n} LoCoMo-dev questions; max_tokens {args.max_tokens}; "
          f"best of {args.rounds}")
    print(f"direct loop:                {best['direct']:.2f} s ({best['direct'] / n * 1000:.0f} ms a prompt), "
          f"{tokens} completion tokens")
    print(f"distillation, concurrency 1: {best['distil1']:.2f} s ({best['distil1'] / n * 1000:.0f} ms a prompt), "
          f"{kept[0]} answers kept, {kept[1]} failed, dataset {len(recorder.samples)} samples")
    print(f"distillation, concurrency 2: {best['distil2']:.2f} s ({best['distil2'] / n * 1000:.0f} ms a prompt)")
    print(f"ratio distillation / direct: {best['distil1'] / best['direct']:.3f}x; "
          f"concurrency 2 / 1: {best['distil2'] / best['distil1']:.3f}x")


if __name__ == "__main__":
    main()
