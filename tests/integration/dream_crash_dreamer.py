"""The child process of test_dream_crash: stores near-duplicate pairs, then dreams until it is killed.

    python -m tests.integration.dream_crash_dreamer DATA_DIR PAIRS

Services are built the way the server builds them (encrypted SQLite, the scripted model, the
hashing embedder so that writes are fast). Each pair's second memory is the first with one word
more, in the same conversation, so NREM consolidates every pair. It prints ``ready`` once the
memories are stored, then one line ``op <n>`` per journaled operation, flushed, and sleeps a little
in each applier so the parent's SIGKILL can land between the journal and the commit.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from assistant.config import Settings
from assistant.dream.journal import APPLIERS
from assistant.dream.types import Operation
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import build_services

USER = "dreamer"


def pair_vectors(n: int, dim: int = 384) -> tuple[np.ndarray, np.ndarray]:
    """The n-th pair: two unit vectors at cosine ~0.95, orthogonal to every other pair's."""
    a = np.zeros(dim, dtype=np.float32)
    b = np.zeros(dim, dtype=np.float32)
    a[n % dim], b[n % dim], b[(n + 1) % dim] = 1.0, 0.95, 0.31
    return a, b / np.linalg.norm(b)


def settings_for(data_dir: Path) -> Settings:
    return Settings(server={"data_dir": str(data_dir)}, inference={"backend": "scripted"},
                    memory={"embedding_backend": "hashing"}, knowledge_graph={"enabled": False},
                    dream={"max_cycles": 1, "rem": {"enabled": False}})


def main(data_dir: Path, pairs: int) -> None:
    services = build_services(settings_for(data_dir), chat_model=ScriptedChatModel())
    memory = services.memory
    for n in range(min(pairs, 190)):  # orthogonal pairs: no pair is near another
        a, b = pair_vectors(2 * n)
        memory.add(USER, f"Note {n}: the parcel goes to the post office.", conversation_id=f"c{n}", embedding=a)
        memory.add(USER, f"Note {n}: the parcel goes to the post office today.", conversation_id=f"c{n}",
                   embedding=b)
    print("ready", flush=True)
    real = APPLIERS[Operation.MEMORY_CONSOLIDATED]

    def slow(deps, entry):
        time.sleep(0.02)  # between the pending entry's commit and the change's
        return real(deps, entry)

    APPLIERS[Operation.MEMORY_CONSOLIDATED] = slow
    count = 0

    def on_event(event) -> None:
        nonlocal count
        if event.kind == "operation":
            count += 1
            print(f"op {count}", flush=True)

    services.dream.subscribe(on_event)
    services.dream.trigger(USER, background=False)
    print("done", flush=True)
    time.sleep(60)  # the parent kills it before


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
