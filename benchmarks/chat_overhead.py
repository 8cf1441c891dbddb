"""Chat overhead and streaming efficiency, measured against baselines in the same run.

1. Overhead: p50/p95 latency of POST /v1/chat with the scripted model (generation ~ 0, so the
   figure is everything else: HTTP, auth, validation, rate limit, SQLite writes, metrics), and of
   a bare Starlette endpoint on the same uvicorn as the floor. Target: overhead p50 <= 5 ms.
   Measured with memory off (the chat pipeline itself), then with memory on, where each request
   also embeds the message with MiniLM (~7 ms on 2 cores), retrieves and learns.
2. Streaming: tokens/s of /v1/chat/stream (the served embedded model, parsed SSE) divided by the
   tokens/s of llama.cpp called directly with the same model file, thread count and CPU variant, both
   from the first token on. The served prompt is longer (the system prompt, the offered tools'
   schemas, memories: about 900 tokens here), and each generated token attends over all of it, so the
   baseline is llama.cpp on a prompt padded to the served prompt's length (read from the ``done``
   event); the ratio against the bare prompt (~40 tokens) is printed too. Runs alternate so machine
   noise hits both. Target: ratio >= 0.95 (against the same-length baseline).

Servers run as subprocesses on loopback, as a user would run them:
    .venv/bin/python benchmarks/chat_overhead.py [--requests 300] [--rounds 3] [--max-tokens 128]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
PROMPT = "Write a short paragraph about why local AI assistants respect privacy."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@contextmanager
def server(cmd: list[str], port: int, env: dict[str, str] | None = None):
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {proc.stdout.read()}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError("server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def write_config(data_dir: Path, backend: str, model_path: Path | None, threads: int | None,
                 memory: bool = True) -> Path:
    """``threads`` None leaves the engine's default (the machine's physical cores)."""
    lines = [
        "[server]", f'data_dir = "{data_dir}"', 'log_level = "warning"',
        "[security]", "rate_limit_enabled = false",
        "[memory]", f"enabled = {'true' if memory else 'false'}",
        "[inference]", f'backend = "{backend}"', "temperature = 0.0",
        *([f"threads = {threads}"] if threads is not None else []),
    ]
    if model_path is not None:
        lines.append(f'model_path = "{model_path}"')
    path = data_dir / "bench.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def create_key(config: Path) -> str:
    out = subprocess.run([sys.executable, "-m", "api.cli", "keys", "create", "--name", "bench", "--replace",
                          "--config", str(config)], capture_output=True, text=True, check=True, cwd=ROOT)
    return out.stdout.strip().splitlines()[-1]


def timed_posts(client: httpx.Client, url: str, body: dict, n: int, headers: dict | None = None) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        response = client.post(url, json=body, headers=headers)
        times.append((time.perf_counter() - start) * 1000)
        response.raise_for_status()
    return times


def overhead(n: int, memory: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        config = write_config(data, "scripted", None, 1, memory=memory)
        key = create_key(config)
        port, floor_port = free_port(), free_port()
        serve = [sys.executable, "-m", "api.cli", "serve", "--config", str(config), "--port", str(port)]
        floor = [sys.executable, "-m", "uvicorn", "benchmarks._floor_app:app", "--port", str(floor_port),
                 "--log-level", "warning"]
        testing = {"ASSISTANT_TESTING": "1"}  # the scripted model is a test double, refused otherwise
        with server(serve, port, testing) as base, server(floor, floor_port) as floor_base, \
                httpx.Client(timeout=60) as client:
            auth = {"Authorization": f"Bearer {key}"}
            body = {"message": "ping", "max_tokens": 1}
            timed_posts(client, f"{base}/v1/chat", body, 20, auth)  # warm-up
            timed_posts(client, f"{floor_base}/floor", body, 20)
            chat, base_times = [], []
            for _ in range(n // 50):  # interleave blocks so noise hits both
                chat += timed_posts(client, f"{base}/v1/chat", body, 50, auth)
                base_times += timed_posts(client, f"{floor_base}/floor", body, 50)
    return {
        "chat_p50_ms": percentile(chat, 50), "chat_p95_ms": percentile(chat, 95),
        "floor_p50_ms": percentile(base_times, 50), "floor_p95_ms": percentile(base_times, 95),
    }


def raw_llama_run(llm, messages: list[dict], max_tokens: int) -> tuple[int, float, float]:
    """(tokens, seconds in all, seconds from the first token on)."""
    start = time.perf_counter()
    tokens, first = 0, None
    for chunk in llm.create_chat_completion(messages=messages, temperature=0.0, max_tokens=max_tokens, stream=True):
        if chunk["choices"][0]["delta"].get("content"):
            tokens += 1
            first = first or time.perf_counter()
    end = time.perf_counter()
    return tokens, end - start, end - (first or end)


def api_stream_run(client: httpx.Client, base: str, key: str, max_tokens: int) -> tuple[int, float, float, int]:
    """(message events, seconds in all, seconds from the first one to the last, prompt tokens)."""
    start = time.perf_counter()
    event, tokens, first, last, prompt_tokens = None, 0, None, None, 0
    with client.stream("POST", f"{base}/v1/chat/stream", json={"message": PROMPT, "max_tokens": max_tokens},
                       headers={"Authorization": f"Bearer {key}"}, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "message":
                tokens += 1
                last = time.perf_counter()
                first = first or last
            elif line.startswith("data:") and event == "done":
                prompt_tokens = int(json.loads(line[5:])["tokens"]["prompt"])
    end = time.perf_counter()  # the last message event, not the storing and learning after it
    return tokens, end - start, (last or end) - (first or end), prompt_tokens


def padded(llm, messages: list[dict], prompt_tokens: int) -> list[dict]:  # noqa: ANN001
    """``messages`` with the system message lengthened by neutral notes to about ``prompt_tokens`` tokens
    in all (the served prompt's length: attention over it is part of every generated token's cost)."""
    def count(content: str) -> int:
        return sum(len(llm.tokenize(m["content"].encode(), add_bos=False)) for m in messages[1:]) + len(
            llm.tokenize(content.encode(), add_bos=False)) + 4 * len(messages)  # the template's role markers

    system, notes = messages[0]["content"], []
    while count(system + "\n" + " ".join(notes)) < prompt_tokens:
        notes.append(f"Note {len(notes) + 1}: keep answers plain and short.")
    return [{"role": "system", "content": system + "\n" + " ".join(notes)}, *messages[1:]]


def streaming(rounds: int, max_tokens: int, threads: int) -> dict[str, float]:
    from llama_cpp import Llama

    from assistant.config import Settings
    from assistant.llm.catalog import DEFAULT_MODEL, install_model
    from assistant.llm.cpu_backend import ensure_cpu_backend

    model_path = install_model(DEFAULT_MODEL, Settings().data_dir)
    system = Settings().inference.system_prompt
    messages = [{"role": "system", "content": system}, {"role": "user", "content": PROMPT}]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        config = write_config(data, "llama-cpp", model_path, threads)
        key = create_key(config)
        port = free_port()
        serve = [sys.executable, "-m", "api.cli", "serve", "--config", str(config), "--port", str(port)]
        ensure_cpu_backend(model=model_path, threads=threads)  # the same CPU variant the server loads
        llm = Llama(model_path=str(model_path), n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
        raw_rates, same_rates, api_rates = [], [], []
        with server(serve, port) as base, httpx.Client() as client:
            raw_llama_run(llm, messages, 8)  # warm-up both
            served_prompt = api_stream_run(client, base, key, 8)[3]
            same_length = padded(llm, messages, served_prompt)
            for i in range(rounds):
                # tokens/s from the first token on: a rate over the whole request would mix in prompt
                # time, and the served answer can end sooner
                n, secs, gen = raw_llama_run(llm, messages, max_tokens)
                raw_rates.append((n - 1) / gen)
                n1, _, gen1 = raw_llama_run(llm, same_length, max_tokens)
                same_rates.append((n1 - 1) / gen1)
                n2, secs2, gen2, _ = api_stream_run(client, base, key, max_tokens)
                api_rates.append((n2 - 1) / gen2)
                print(f"  round {i + 1}: raw {n} tok in {secs:.2f}s, {(n - 1) / gen:.1f} tok/s after the first; "
                      f"raw on a {served_prompt}-token prompt {(n1 - 1) / gen1:.1f} tok/s; "
                      f"api {n2} tok in {secs2:.2f}s, {(n2 - 1) / gen2:.1f} tok/s after the first", flush=True)
    raw, same, api = (statistics.median(r) for r in (raw_rates, same_rates, api_rates))
    return {"raw_tok_s": raw, "raw_same_length_tok_s": same, "api_tok_s": api, "served_prompt_tokens": served_prompt,
            "ratio": api / same, "ratio_to_bare_prompt": api / raw}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-streaming", action="store_true")
    args = parser.parse_args()

    o = overhead(args.requests)
    print(f"overhead: /v1/chat (scripted model, memory off) p50 {o['chat_p50_ms']:.2f} ms, "
          f"p95 {o['chat_p95_ms']:.2f} ms; floor (bare endpoint) p50 {o['floor_p50_ms']:.2f} ms, "
          f"p95 {o['floor_p95_ms']:.2f} ms; ratio p50 {o['chat_p50_ms'] / o['floor_p50_ms']:.2f}x; "
          f"target p50 <= 5 ms: {'MET' if o['chat_p50_ms'] <= 5 else 'MISSED'}")
    m = overhead(max(args.requests // 3, 50), memory=True)
    o["memory_on_p50_ms"], o["memory_on_p95_ms"] = m["chat_p50_ms"], m["chat_p95_ms"]
    print(f"with memory on (MiniLM query embedding, retrieval, learning per request): p50 "
          f"{m['chat_p50_ms']:.2f} ms, p95 {m['chat_p95_ms']:.2f} ms")
    if not args.skip_streaming:
        s = streaming(args.rounds, args.max_tokens, args.threads)
        print(f"streaming: /v1/chat/stream {s['api_tok_s']:.1f} tok/s; raw llama.cpp on a prompt of the served "
              f"length ({s['served_prompt_tokens']} tokens) {s['raw_same_length_tok_s']:.1f} tok/s, ratio "
              f"{s['ratio']:.3f}; target >= 0.95: {'MET' if s['ratio'] >= 0.95 else 'MISSED'}. Against raw "
              f"llama.cpp on the bare prompt ({s['raw_tok_s']:.1f} tok/s): {s['ratio_to_bare_prompt']:.3f}")
    print(json.dumps({"overhead": o, **({} if args.skip_streaming else {"streaming": s})}))


if __name__ == "__main__":
    main()
