"""Ollama's ``/api/embed`` (for example a 1024-dimensional model)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from assistant.config import MemorySettings
from assistant.embeddings.base import normalise
from assistant.llm.http import EngineClient

DEFAULT_URL = "http://127.0.0.1:11434"


class OllamaEmbedder:
    id = "ollama"

    def __init__(self, model: str, dimension: int, base_url: str = DEFAULT_URL, timeout_secs: float = 30.0):
        self.model = model
        self.dimension = dimension
        self.client = EngineClient("ollama", base_url, timeout_secs=timeout_secs)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self.client.errors():
            response = self.client.check(self.client._client.post("/api/embed", json={"model": self.model,
                                                                                      "input": list(texts)}))
        return normalise(np.asarray(response.json()["embeddings"], dtype=np.float32))


def create(settings: MemorySettings, base_url: str | None = None) -> OllamaEmbedder:
    return OllamaEmbedder(settings.embedding_model, settings.embedding_dimension, base_url or DEFAULT_URL,
                          settings.embedding_timeout_ms / 1000)
