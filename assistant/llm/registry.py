"""Backend id -> factory. Heavy libraries are imported inside each backend module.

``scripted`` is a test double: it resolves only where ``ASSISTANT_TESTING`` is set
(:mod:`assistant.testing.guard`), so a production config cannot select it.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path

from assistant.config import InferenceSettings
from assistant.errors import ConfigError
from assistant.llm.base import ChatModel
from assistant.testing.guard import require_testing

Factory = Callable[[InferenceSettings, Path], ChatModel]

# id -> "module:function"; resolved lazily so `import assistant` stays fast.
_BACKENDS: dict[str, str] = {
    "llama-cpp": "assistant.llm.llama_cpp:create",
    "ollama": "assistant.llm.ollama:create",
    "openai": "assistant.llm.openai_compat:create",
    "scripted": "assistant.llm.scripted:create",
}
TEST_ONLY = frozenset({"scripted"})


def register_backend(backend_id: str, target: str) -> None:
    """Add a backend: ``target`` is ``"package.module:factory"``."""
    _BACKENDS[backend_id] = target


def backend_ids() -> list[str]:
    return sorted(_BACKENDS)


def get_factory(backend_id: str) -> Factory:
    try:
        target = _BACKENDS[backend_id]
    except KeyError:
        raise ConfigError(
            f"unknown inference backend {backend_id!r}; known backends: {', '.join(backend_ids())}"
        ) from None
    if backend_id in TEST_ONLY:
        require_testing("inference backend", backend_id)
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def create_chat_model(settings: InferenceSettings, data_dir: Path) -> ChatModel:
    return get_factory(settings.backend)(settings, data_dir)
