"""A deterministic bag-of-words embedder: no model, instant. For tests and notebooks' quick mode:
as a configured backend (``embedding_backend = "hashing"``) only where ``ASSISTANT_TESTING`` is set.

Each normalised word adds +1/-1 to a few hashed dimensions, so texts sharing words are similar.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from assistant.config import MemorySettings
from assistant.embeddings.base import normalise

WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedder:
    id = "hashing"

    def __init__(self, dimension: int = 384, hashes: int = 4):
        self.dimension = dimension
        self.hashes = hashes

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=2 * self.hashes).digest()
                for i in range(self.hashes):
                    value = int.from_bytes(digest[2 * i:2 * i + 2], "little")
                    out[row, value % self.dimension] += 1.0 if value & 0x8000 else -1.0
        return normalise(out)


def create(settings: MemorySettings, base_url: str | None = None) -> HashingEmbedder:
    return HashingEmbedder(settings.embedding_dimension)
