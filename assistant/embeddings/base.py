"""The Embedder protocol and its registry.

``embed`` returns L2-normalised float32 rows, so a dot product is the cosine similarity.
``hashing`` is a test double: it resolves only where ``ASSISTANT_TESTING`` is set
(:mod:`assistant.testing.guard`), so a production config cannot select it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Protocol, runtime_checkable

import numpy as np

from assistant.config import MemorySettings
from assistant.errors import ConfigError
from assistant.testing.guard import require_testing


@runtime_checkable
class Embedder(Protocol):
    id: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


_BACKENDS: dict[str, str] = {
    "sentence-transformers": "assistant.embeddings.sentence_transformers:create",
    "ollama": "assistant.embeddings.ollama:create",
    "hashing": "assistant.embeddings.hashing:create",
}
TEST_ONLY = frozenset({"hashing"})


def register_embedder(backend_id: str, target: str) -> None:
    _BACKENDS[backend_id] = target


def create_embedder(settings: MemorySettings, base_url: str | None = None) -> Embedder:
    try:
        target = _BACKENDS[settings.embedding_backend]
    except KeyError:
        raise ConfigError(
            f"unknown embedding backend {settings.embedding_backend!r}; known: {', '.join(sorted(_BACKENDS))}"
        ) from None
    if settings.embedding_backend in TEST_ONLY:
        require_testing("embedding backend", settings.embedding_backend)
    module, _, name = target.partition(":")
    factory: Callable[..., Embedder] = getattr(import_module(module), name)
    embedder = factory(settings, base_url)
    if embedder.dimension != settings.embedding_dimension:
        raise ConfigError(
            f"memory.embedding_dimension is {settings.embedding_dimension} but {settings.embedding_model} "
            f"gives {embedder.dimension}-dimensional vectors"
        )
    return embedder
