"""The child process of test_memory_crash: writes memories until it is killed.

    python -m tests.integration.memory_crash_writer DATA_DIR USER_ID

It opens the store the way build_services lays it out (``assistant.db`` and ``memory.key`` in the
data directory), with the hashing embedder so that writes are fast, and prints one line
``<id> <n>`` per memory, flushed, only after the call that stored it has returned.
"""

from __future__ import annotations

import sys
from pathlib import Path

from assistant.config import MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.memory.store import MemoryStore, NewMemory
from assistant.services import DB_FILE
from assistant.storage.db import Database


def content_of(n: int) -> str:
    return f"crash test memory number {n}: the quick brown fox {n * 7919 % 1000} jumps"


def main(data_dir: Path, user_id: str) -> None:
    db = Database(data_dir / DB_FILE)
    sealer = open_sealer(db, data_dir / "memory.key")
    store = MemoryStore(db, sealer, HashingEmbedder(384), MemorySettings(embedding_backend="hashing"))
    print("ready", flush=True)
    n = 0
    while True:
        if n % 4 == 3:  # every fourth write is a batch of three in one transaction
            items = [NewMemory(content_of(n + i), f"summary {n + i}", tags=[f"n{n + i}"]) for i in range(3)]
            ids = store.add_many(user_id, items)
            for i, memory_id in enumerate(ids):
                print(f"{memory_id} {n + i}", flush=True)
            n += 3
        else:
            memory = store.add(user_id, content_of(n), f"summary {n}", tags=[f"n{n}"])
            print(f"{memory.id} {n}", flush=True)
            n += 1


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
