"""Federated sync: what a round costs on loopback, and what the privacy noise does to an update.

Setup (not measured): two synthetic peft adapters with SmolLM2-135M's LoRA shapes (rank 8 on q_proj and
v_proj of 30 layers: 460,800 float32 values, normal with std 1/sqrt(576)), two instances of the service
(scripted engine, hashing embedder: no model is involved in a round) with separate data directories.

Measured:

* baseline: a round between two :class:`FederatedSync` objects in one process (the in-process transport:
  JSON encoding, Ed25519 signing and verifying, the privacy release, FedAvg, writing the averaged adapter
  on both sides, no HTTP);
* loopback: the same round through ``POST /api/v1/federated/sync`` of two uvicorn servers on 127.0.0.1;
* the signed body's size against the adapter's safetensors file;
* utility: the cosine similarity between the released update and the clipped adapter, and the relative
  error of the averaged adapter against the noiseless FedAvg, per epsilon (clip_norm 16, delta 1e-5).

Printed: p50 of each, their ratio (the HTTP overhead), the sizes, the utility table. Nothing here is a test.

    .venv/bin/python benchmarks/federated.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ASSISTANT_TESTING", "1")  # the scripted engine and hashing embedder: no model in a round

from api.federated_loopback import loopback_pair  # noqa: E402
from assistant.config import FederatedSettings, PrivacySettings  # noqa: E402
from assistant.extended.privacy import PrivacyBudget  # noqa: E402
from assistant.learning.federated import FederatedSync  # noqa: E402
from assistant.learning.federated_identity import load_identity  # noqa: E402
from assistant.learning.federated_payload import fedavg, read_adapter  # noqa: E402
from assistant.storage.db import Database  # noqa: E402
from assistant.testing.federated import InProcessTransport, StaticAdapters, write_peft_adapter  # noqa: E402

SMOL = {"layers": 30, "hidden": 576, "kv_out": 192, "r": 8, "alpha": 16.0}
QUICK = {"inference": {"backend": "scripted"}, "memory": {"embedding_backend": "hashing"},
         "privacy": {"epsilon": 100.0}}


def in_process(work: Path, adapters: dict[str, Path], rounds: int) -> list[float]:
    transport = InProcessTransport()
    ids = {n: load_identity(work / f"{n}.key") for n in "ab"}
    users = {"a": "00000000-0000-0000-0000-00000000000a", "b": "00000000-0000-0000-0000-00000000000b"}
    syncs, dbs = {}, []
    for name, other in (("a", "b"), ("b", "a")):
        settings = FederatedSettings(enabled=True, key_path=work / f"{name}.key", peers=[{
            "name": other, "url": f"http://{other}", "api_key": other, "public_key": ids[other].public_key_b64,
            "user_id": users[name]}])
        db = Database(work / f"{name}.db")
        dbs.append(db)
        store = StaticAdapters()
        store.set_active(users[name], adapters[name], 10)
        syncs[name] = FederatedSync(settings, work / name, db, PrivacyBudget(PrivacySettings(epsilon=100.0), db),
                                    store, transport=transport)
        transport.register(f"http://{name}", syncs[name], {name: users[name]})
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        syncs["a"].start_round(users["a"])
        times.append(time.perf_counter() - start)
    body = len(transport.sent[-1][1])
    for db in dbs:
        db.close()
    return times + [body]


def loopback(work: Path, adapters: dict[str, Path], rounds: int) -> list[float]:
    times = []
    with loopback_pair(work, {"a": (adapters["a"], 10), "b": (adapters["b"], 10)}, **QUICK) as pair:
        pair.sync("a")  # warm up (first requests, imports)
        for _ in range(rounds):
            start = time.perf_counter()
            response = pair.sync("a")
            times.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text
    return times


def utility(adapters: dict[str, Path]) -> list[tuple[float, float, float, float]]:
    from dp_accounting import gaussian_mechanism

    a, b = read_adapter(adapters["a"]).values, read_adapter(adapters["b"]).values
    clip = 16.0
    rows, rng = [], np.random.default_rng(0)
    for epsilon in (0.5, 1.0, 10.0, 100.0):
        sigma = gaussian_mechanism.get_sigma_gaussian(epsilon, 1e-5)
        clipped = b * min(1.0, clip / np.linalg.norm(b))
        released = clipped + rng.normal(0, sigma * clip, b.size)
        cosine = float(released @ clipped / np.linalg.norm(released) / np.linalg.norm(clipped))
        exact = fedavg([(a, 10), (b, 10)])
        noisy = fedavg([(a, 10), (released, 10)])
        rows.append((epsilon, sigma, cosine, float(np.linalg.norm(noisy - exact) / np.linalg.norm(exact))))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-federated-") as tmp:
        work = Path(tmp)
        adapters = {n: write_peft_adapter(work / f"adapter-{n}", seed=s, **SMOL) for n, s in (("a", 1), ("b", 2))}
        size = (adapters["a"] / "adapter_model.safetensors").stat().st_size
        values = read_adapter(adapters["a"]).size
        *base, body = in_process(work / "inproc", adapters, args.rounds)
        http = loopback(work / "loopback", adapters, args.rounds)
        b50, h50 = statistics.median(base), statistics.median(http)
        print(f"adapter: {values:,} float32 values, safetensors {size / 1e6:.2f} MB; signed body {body / 1e6:.2f} MB "
              f"({body / size:.2f}x: base64 + JSON)")
        print(f"round, in-process (baseline): p50 {b50 * 1000:.0f} ms over {len(base)} rounds")
        print(f"round, two uvicorn instances on loopback: p50 {h50 * 1000:.0f} ms over {len(http)} rounds")
        print(f"ratio loopback / in-process: {h50 / b50:.2f}x (HTTP, body reading, JSON response)")
        print("utility of one release (clip_norm 16, delta 1e-5):")
        print("  epsilon  noise multiplier  cosine(released, clipped)  rel. error of the average")
        for epsilon, sigma, cosine, error in utility(adapters):
            print(f"  {epsilon:7g}  {sigma:16.3f}  {cosine:25.4f}  {error:25.2f}")


if __name__ == "__main__":
    main()
