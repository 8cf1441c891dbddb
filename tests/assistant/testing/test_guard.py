"""Test doubles are refused outside a test run: the scripted chat model and the hashing embedder,
named in settings, are a ConfigError naming the backend, the reason and the variable unless
ASSISTANT_TESTING is set; the real backends never ask."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.config import InferenceSettings, MemorySettings
from assistant.embeddings.base import create_embedder
from assistant.embeddings.hashing import HashingEmbedder
from assistant.errors import ConfigError
from assistant.llm.registry import create_chat_model
from assistant.llm.scripted import ScriptedChatModel
from assistant.testing import guard
from assistant.testing.guard import TESTING_ENV


@pytest.mark.parametrize(("value", "enabled"), [
    (None, False), ("", False), ("0", False), ("false", False), ("No", False), ("1", True), ("yes", True),
])
def test_what_counts_as_a_test_run(value: str | None, enabled: bool) -> None:
    assert guard.testing_enabled({} if value is None else {TESTING_ENV: value}) is enabled


def test_the_suite_itself_runs_with_the_variable() -> None:
    assert guard.testing_enabled()  # tests/conftest.py sets it before anything is built


def test_production_refuses_the_scripted_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(TESTING_ENV)
    with pytest.raises(ConfigError) as caught:
        create_chat_model(InferenceSettings(backend="scripted"), tmp_path)
    message = caught.value.message
    assert "inference backend 'scripted' is a test double" in message and "ASSISTANT_TESTING=1" in message
    assert caught.value.details == {"backend": "scripted", "environment_variable": TESTING_ENV}
    monkeypatch.setenv(TESTING_ENV, "1")
    assert isinstance(create_chat_model(InferenceSettings(backend="scripted"), tmp_path), ScriptedChatModel)


def test_production_refuses_the_hashing_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TESTING_ENV, "0")
    with pytest.raises(ConfigError, match="embedding backend 'hashing' is a test double"):
        create_embedder(MemorySettings(embedding_backend="hashing"))
    monkeypatch.setenv(TESTING_ENV, "1")
    assert isinstance(create_embedder(MemorySettings(embedding_backend="hashing")), HashingEmbedder)


def test_real_backends_never_ask(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(TESTING_ENV)
    assert create_chat_model(InferenceSettings(backend="ollama", base_url="http://127.0.0.1:9"), tmp_path).id == "ollama"
    guard.require_testing("x", "y", {TESTING_ENV: "1"})  # no error in a test run
