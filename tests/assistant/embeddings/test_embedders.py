"""Embedder backends: Ollama's /api/embed (replayed on loopback), the hashing fake, the registry."""

from __future__ import annotations

import numpy as np
import pytest

from assistant.config import MemorySettings
from assistant.embeddings.base import create_embedder, normalise
from assistant.embeddings.hashing import HashingEmbedder
from assistant.embeddings.ollama import OllamaEmbedder
from assistant.errors import ConfigError, ServiceUnavailableError, UpstreamError


def test_ollama_embedder_posts_a_batch_and_normalises(engine) -> None:
    engine.json("POST", "/api/embed", {"model": "mxbai-embed-large", "embeddings": [[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]]})
    embedder = OllamaEmbedder("mxbai-embed-large", 3, engine.base_url)
    vectors = embedder.embed(["first", "second"])
    assert engine.requests[-1].body == {"model": "mxbai-embed-large", "input": ["first", "second"]}
    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]], atol=1e-6)
    assert vectors.dtype == np.float32


def test_ollama_embedder_errors(engine, closed_port_url) -> None:
    engine.json("POST", "/api/embed", {"error": "model not found"}, status=404)
    with pytest.raises(UpstreamError):
        OllamaEmbedder("missing", 3, engine.base_url).embed(["x"])
    with pytest.raises(ServiceUnavailableError):
        OllamaEmbedder("m", 3, closed_port_url).embed(["x"])


def test_empty_batches_give_empty_matrices(engine) -> None:
    assert OllamaEmbedder("m", 1024, engine.base_url).embed([]).shape == (0, 1024)
    assert HashingEmbedder(384).embed([]).shape == (0, 384)


def test_hashing_embedder_is_deterministic_and_word_based() -> None:
    embedder = HashingEmbedder(384)
    a, b, c = embedder.embed(["I like green tea", "green tea is what I like", "the train leaves at noon"])
    assert np.allclose(a, embedder.embed(["I like green tea"])[0])
    assert abs(np.linalg.norm(a) - 1.0) < 1e-6
    assert a @ b > 0.8 > a @ c


def test_normalise_leaves_zero_rows_alone() -> None:
    out = normalise(np.array([[0.0, 0.0], [1.0, 1.0]]))
    assert np.allclose(out[0], 0.0) and np.isclose(np.linalg.norm(out[1]), 1.0)


def test_registry_refuses_unknown_backends_and_wrong_dimensions() -> None:
    with pytest.raises(ConfigError, match="unknown embedding backend"):
        create_embedder(MemorySettings(embedding_backend="word2vec"))
    assert create_embedder(MemorySettings(embedding_backend="hashing", embedding_dimension=64)).dimension == 64
