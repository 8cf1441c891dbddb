"""Backend ids resolve to factories; an unknown id is a configuration error naming the known ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.config import InferenceSettings
from assistant.errors import ConfigError
from assistant.llm import registry
from assistant.llm.base import ChatModel
from assistant.llm.llama_cpp import LlamaCppChatModel
from assistant.llm.ollama import OllamaChatModel
from assistant.llm.openai_compat import OpenAIChatModel
from assistant.llm.registry import backend_ids, create_chat_model, get_factory, register_backend
from assistant.llm.scripted import ScriptedChatModel


def test_unknown_backend_names_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        get_factory("gpt-cloud")
    message = info.value.message
    assert "gpt-cloud" in message
    for known in ("llama-cpp", "ollama", "openai", "scripted"):
        assert known in message


def test_unknown_backend_in_settings_fails_on_create(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="known backends"):
        create_chat_model(InferenceSettings(backend="nope"), tmp_path)


def test_scripted_resolves(tmp_path: Path) -> None:
    model = create_chat_model(InferenceSettings(backend="scripted", model="my-model"), tmp_path)
    assert isinstance(model, ScriptedChatModel)
    assert model.health().model == "my-model"


@pytest.mark.parametrize(
    ("backend", "cls"), [("llama-cpp", LlamaCppChatModel), ("ollama", OllamaChatModel), ("openai", OpenAIChatModel)]
)
def test_other_backends_construct_without_connecting(backend: str, cls: type, tmp_path: Path) -> None:
    model = create_chat_model(InferenceSettings(backend=backend, base_url="http://127.0.0.1:9"), tmp_path)
    assert isinstance(model, cls)
    assert isinstance(model, ChatModel)
    assert model.id == backend


def test_backend_ids_are_sorted() -> None:
    assert backend_ids() == sorted(["llama-cpp", "ollama", "openai", "scripted"])


def test_register_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(registry, "_BACKENDS", dict(registry._BACKENDS))
    register_backend("echo", "assistant.llm.scripted:create")
    assert "echo" in backend_ids()
    assert isinstance(create_chat_model(InferenceSettings(backend="echo"), tmp_path), ScriptedChatModel)
