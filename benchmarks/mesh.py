"""The overhead of a mesh-forwarded request against the same request answered locally, on loopback.

Setup (not measured): two `assistant serve` processes on loopback, each with the same engine (the
packaged SmolLM2-135M by default, `--engine default` for Qwen2.5-Coder-0.5B, `--engine scripted` for
no model at all: the mesh's own cost alone), one thread each, temperature 0, memory off. The *peer* is a
plain instance; the *node* has `[mesh]` on with the peer as its one peer (its key made with the CLI).
One warm-up request of each kind loads the models and fills their prompt caches.

Measured, ``--rounds`` times, alternating, the same prompt and `max_tokens` (client-side wall time):

* local: `POST node/api/v1/mesh/inference` with `local_only: true` (the node's engine answers);
* forwarded: `POST node/api/v1/mesh/inference` (the node forwards to the peer, which answers);
* direct: `POST peer/v1/chat/completions` with the memory extension off, what the forward sends: the
  difference forwarded - direct is what the mesh adds (one more loopback HTTP hop, the choice of the
  peer, JSON in and out).

Every forwarded answer is checked to be served by the peer, every local one by `local`; the completion
tokens of the three kinds are printed (the same work). Printed: p50 and p90 of each, the ratios of the
p50s forwarded / local and forwarded / direct, and the added milliseconds. Nothing here is a test.

    .venv/bin/python benchmarks/mesh.py [--engine small|default|scripted] [--rounds 20] [--max-tokens 16]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import Settings  # noqa: E402
from assistant.llm.catalog import DEFAULT_MODEL, SMALL_MODEL, install_model  # noqa: E402
from benchmarks._served import ServedApp  # noqa: E402

PROMPT = "Name three planets of the solar system, separated by commas."


def engine(kind: str) -> dict[str, Any]:
    if kind == "scripted":
        return {"backend": "scripted"}
    name = SMALL_MODEL if kind == "small" else DEFAULT_MODEL
    path = install_model(name, Settings().data_dir)
    return {"backend": "llama-cpp", "model": name, "model_path": str(path), "threads": 1, "temperature": 0.0}


def timed(client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[float, dict]:
    start = time.perf_counter()
    response = client.post(url, json=body, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
    return elapsed, response.json()


def p(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=["small", "default", "scripted"], default="small")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    inference = engine(args.engine)
    common = {"inference": inference, "memory": {"enabled": False}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("peer", "node"):
            (Path(tmp) / name).mkdir()
        peer = ServedApp(Path(tmp) / "peer", common, start_timeout_secs=300)
        node = ServedApp(Path(tmp) / "node", {**common, "mesh": {"enabled": True, "timeout_secs": 300,
                                                                 "health_timeout_secs": 300}},
                         start_timeout_secs=300)
        with open(node.config, "a") as config:  # an array of tables: appended after [mesh]
            config.write(f'\n[[mesh.peers]]\nname = "peer"\nurl = "{peer.base_url}"\napi_key = "{peer.key}"\n')
        try:
            peer.start()
            node.start()
            messages = [{"role": "user", "content": PROMPT}]
            mesh_body = {"messages": messages, "max_tokens": args.max_tokens, "temperature": 0.0}
            direct_body = {**mesh_body, "memory": {"retrieve": False, "learn": False}}
            kinds = {
                "local": (node.url("/api/v1/mesh/inference"), {**mesh_body, "local_only": True}, node.headers),
                "forwarded": (node.url("/api/v1/mesh/inference"), {**mesh_body, "allow_fallback": False},
                              node.headers),
                "direct": (peer.url("/v1/chat/completions"), direct_body, peer.headers),
            }
            times: dict[str, list[float]] = {k: [] for k in kinds}
            tokens: dict[str, set[int]] = {k: set() for k in kinds}
            with httpx.Client(timeout=600) as client:
                for url, body, headers in kinds.values():  # warm-up: models loaded, prompt caches filled
                    timed(client, url, body, headers)
                for _ in range(args.rounds):
                    for kind, (url, body, headers) in kinds.items():
                        elapsed, answer = timed(client, url, body, headers)
                        times[kind].append(elapsed)
                        if kind == "direct":
                            tokens[kind].add(answer["usage"]["completion_tokens"])
                        else:
                            assert answer["served_by"] == ("local" if kind == "local" else "peer"), answer
                            tokens[kind].add(answer["usage"]["completion_tokens"])
            print(f"engine {args.engine} ({inference.get('model', 'scripted')}), rounds {args.rounds}, "
                  f"max_tokens {args.max_tokens}, loopback, one engine thread per process")
            for kind in kinds:
                print(f"{kind:>9}: p50 {p(times[kind], 50):8.1f} ms, p90 {p(times[kind], 90):8.1f} ms, "
                      f"completion tokens {sorted(tokens[kind])}")
            local, forwarded, direct = (p(times[k], 50) for k in ("local", "forwarded", "direct"))
            print(f"forwarded / local (p50): {forwarded / local:.2f}x ({forwarded - local:+.1f} ms)")
            print(f"forwarded / direct to the peer (p50): {forwarded / direct:.2f}x "
                  f"(the mesh adds {forwarded - direct:+.1f} ms)")
        finally:
            node.stop()
            peer.stop()


if __name__ == "__main__":
    main()
