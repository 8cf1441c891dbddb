"""PROVISIONAL (replaced by the extractors' branch): the extractor registry."""

from __future__ import annotations

from typing import Any

from assistant.graph.types import Extractor


def create_extractor(settings: Any, queue: Any) -> tuple[Extractor, Extractor | None]:
    from assistant.testing.graph import ScriptedExtractor

    return ScriptedExtractor(), None
