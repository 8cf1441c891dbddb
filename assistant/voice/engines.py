"""What every voice engine module shares: the engine failure error and a lazy engine registry.

Engines (wake word, voice activity, speech-to-text, speech, speaker) are chosen by an id in the settings.
A :class:`Registry` maps each id to ``"package.module:factory"`` and imports the module only when the id is
asked for, so ``import assistant.voice.X`` stays fast and a missing heavy library only hurts its own engine.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Generic, TypeVar

from assistant.errors import AssistantError, ConfigError

T = TypeVar("T")


class EngineError(AssistantError):
    """An engine failed or timed out while processing (a crashed model, an unreachable companion service)."""

    code = "ENGINE_ERROR"


class Registry(Generic[T]):
    """Engine id -> factory, resolved lazily from ``"package.module:function"`` targets."""

    def __init__(self, kind: str, targets: dict[str, str]):
        """``kind`` names the engines in messages, e.g. ``"wake word engine"``."""
        self.kind = kind
        self._targets = dict(targets)

    def ids(self) -> list[str]:
        return sorted(self._targets)

    def register(self, engine_id: str, target: str) -> None:
        """Add or replace an engine: ``target`` is ``"package.module:factory"``."""
        self._targets[engine_id] = target

    def get(self, engine_id: str) -> Callable[..., T]:
        """The factory of ``engine_id``; ConfigError naming the known ids if there is none."""
        try:
            target = self._targets[engine_id]
        except KeyError:
            raise ConfigError(f"unknown {self.kind} {engine_id!r}; known: {', '.join(self.ids())}") from None
        module, _, name = target.partition(":")
        return getattr(import_module(module), name)
