"""Build the detector from the settings (build_services): the layers in order, the shipped weights."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from assistant.defence.types import Detector, NoDefence, PatternProvider

if TYPE_CHECKING:
    from assistant.config import DefenceSettings
    from assistant.llm.queue import InferenceQueue

log = logging.getLogger(__name__)


def build_detector(settings: DefenceSettings, patterns: PatternProvider | None = None,
                   queue: InferenceQueue | None = None, embedder=None) -> Detector:
    """The layered detector (normalisation, static, dynamic from ``patterns``, classifier over
    ``embedder``'s vectors, the engine judge through ``queue`` when ``settings.judge``); a detector
    that flags nothing while ``[defence] enabled = false``. User messages are flagged from
    ``settings.threshold``; indirect content from :func:`indirect_threshold`."""
    if not settings.enabled:
        return NoDefence()
    from assistant.defence.detector import LayeredDetector
    from assistant.defence.dynamic import DynamicLayer
    from assistant.defence.static import StaticLayer

    layers: list = [StaticLayer(), DynamicLayer(patterns)]
    indirect = None
    if settings.classifier:
        from assistant.defence.classifier import ClassifierLayer

        try:
            classifier = ClassifierLayer(embedder)
            layers.append(classifier)
            indirect = indirect_threshold(settings, classifier.indirect_threshold)
        except (OSError, KeyError, ValueError):  # weights missing or damaged: the pattern layers still run
            log.exception("the defence classifier's weights could not be loaded; running without it")
    judge = None
    if settings.judge and queue is not None:
        from assistant.defence.judge import EngineJudge

        judge = EngineJudge(queue)
    return LayeredDetector(layers, settings.threshold, judge, (settings.judge_low, settings.judge_high), indirect)


def indirect_threshold(settings: DefenceSettings, cross_validated: float | None) -> float:
    """The threshold for indirect content: ``[defence] threshold`` when the configuration sets it
    (it then applies to every source), else the classifier's cross-validated value stored with its
    weights (else the settings' default)."""
    if "threshold" in settings.model_fields_set or cross_validated is None:
        return settings.threshold
    return cross_validated
