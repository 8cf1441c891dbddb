"""Concurrent embed calls are combined into one encode (a fake model stands in for MiniLM)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from assistant.embeddings import sentence_transformers as module
from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder


class FakeModel:
    def __init__(self, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.fail_on = fail_on

    def encode(self, texts, **kwargs):  # noqa: ANN001, ANN003, ANN201
        self.batches.append(list(texts))
        time.sleep(0.05)  # long enough for the other callers to queue up behind this batch
        if self.fail_on in texts:
            raise RuntimeError("encode failed")
        return np.array([[float(len(t)), 1.0, 0.0] for t in texts], dtype=np.float32)


def embedder_with(model: FakeModel) -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder(dimension=3)
    embedder._model = model  # loaded
    return embedder


def run_concurrently(embedder: SentenceTransformerEmbedder, texts: list[list[str]]) -> list[object]:
    results: list[object] = [None] * len(texts)

    def call(i: int) -> None:
        try:
            results[i] = embedder.embed(texts[i])
        except Exception as exc:  # noqa: BLE001
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_concurrent_calls_share_batches_and_each_gets_its_own_rows() -> None:
    model = FakeModel()
    embedder = embedder_with(model)
    texts = [["x" * (i + 1)] * (1 + i % 3) for i in range(12)]
    results = run_concurrently(embedder, texts)
    assert len(model.batches) < 12  # combined
    assert sum(len(b) for b in model.batches) == sum(len(t) for t in texts)  # nothing encoded twice
    for call_texts, vectors in zip(texts, results, strict=True):
        assert isinstance(vectors, np.ndarray) and vectors.shape == (len(call_texts), 3)
        expected = np.array([len(call_texts[0]), 1.0, 0.0]) / np.linalg.norm([len(call_texts[0]), 1.0, 0.0])
        assert np.allclose(vectors, expected, atol=1e-6)


def test_a_batch_never_exceeds_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "MAX_COMBINED", 4)
    model = FakeModel()
    results = run_concurrently(embedder_with(model), [["a", "b", "c"]] * 6)
    assert all(isinstance(r, np.ndarray) and r.shape == (3, 3) for r in results)
    assert max(len(b) for b in model.batches) <= 4


def test_a_failing_encode_fails_every_call_of_its_batch_and_not_the_next() -> None:
    model = FakeModel(fail_on="bad")
    embedder = embedder_with(model)
    with pytest.raises(RuntimeError, match="encode failed"):
        embedder.embed(["bad"])
    assert embedder.embed(["good"]).shape == (1, 3)
