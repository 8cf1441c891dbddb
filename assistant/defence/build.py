"""Build the detector from the settings (build_services): the layers in order, the shipped weights.

Placeholder of the core commit: the defence helper replaces the body with the layered detector."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.defence.types import Detector, NoDefence, PatternProvider

if TYPE_CHECKING:
    from assistant.config import DefenceSettings
    from assistant.llm.queue import InferenceQueue


def build_detector(settings: DefenceSettings, patterns: PatternProvider | None = None,
                   queue: InferenceQueue | None = None, embedder=None) -> Detector:
    """The layered detector (normalisation, static, dynamic from ``patterns``, classifier over
    ``embedder``'s vectors, the engine judge through ``queue`` when ``settings.judge``); a detector
    that flags nothing while ``[defence] enabled = false``."""
    return NoDefence()
