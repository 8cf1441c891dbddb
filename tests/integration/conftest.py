"""Fixtures that start real components: the embedded model and uvicorn on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.config import Settings
from assistant.llm.catalog import DEFAULT_MODEL, SMALL_MODEL, install_model
from assistant.services import Services
from tests.integration.support import serve


@pytest.fixture(scope="session")
def minilm():  # noqa: ANN201
    """One loaded MiniLM (the packaged embedder) shared by the tests that do not test its creation."""
    from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="session")
def default_model_path() -> Path:
    """The default packaged model, installed (sha256-checked) in the normal data directory."""
    return install_model(DEFAULT_MODEL, Settings().data_dir)


@pytest.fixture(scope="session")
def small_model_path() -> Path:
    return install_model(SMALL_MODEL, Settings().data_dir)


@pytest.fixture
def embedded_server(tmp_path: Path, default_model_path: Path) -> Iterator[tuple[str, dict[str, str], Services]]:
    live, key = serve(
        tmp_path,
        inference={"model_path": str(default_model_path), "temperature": 0.0, "max_tokens": 48},
        security={"rate_limit_enabled": False},
        # These messages need no tool. With every tool offered (the default, "all") the 0.5B model
        # calls list_reminders for "Count from one to five in words." and then answers "I'm sorry,
        # but I can't assist with that."; "auto" offers none of them here.
        tool_calling={"selection": "auto"},
    )
    with live:
        yield live.base_url, {"Authorization": f"Bearer {key}"}, live.services
