"""A scripted extractor for the knowledge graph's unit tests and notebooks' quick mode.

Passages whose text contains a scripted key get that key's :class:`Extraction`; any other passage
gets its capitalised words as entities (no facts). ``fail_next`` makes the next call raise, as an
unavailable engine would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from assistant.errors import ServiceUnavailableError
from assistant.graph.types import Entity, Extraction, NodeKind, Passage

_CAPITALISED = re.compile(r"\b[A-Z][a-z]+\b")


class ScriptedExtractor:
    id = "scripted"

    def __init__(self, scripts: dict[str, Extraction] | None = None):
        self.scripts = dict(scripts or {})
        self.calls = 0
        self.passages = 0
        self.failures = 0
        self.seconds = 0.0
        self.fail_next = 0
        self.seen: list[Passage] = []

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        self.calls += 1
        if self.fail_next:
            self.fail_next -= 1
            raise ServiceUnavailableError("the scripted engine is down")
        self.passages += len(passages)
        self.seen += passages
        return [self._one(p) for p in passages]

    def _one(self, passage: Passage) -> Extraction:
        for key, extraction in self.scripts.items():
            if key in passage.text:
                return extraction
        names = dict.fromkeys(w for w in _CAPITALISED.findall(passage.text) if w not in {"I", "On", "The"})
        return Extraction(tuple(Entity(n, NodeKind.THING) for n in names))
