"""Shared fakes of the sanitation run's tests: a world (real SQLite file, hashing embedder, the real
knowledge graph with the rules extractor, the sanitation service), a detector that flags planted
injections, a settable clock, and a fixed quality assessment (the quality helper's module is
replaced: its own tests cover it)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from assistant.config import KnowledgeGraphSettings, KnowledgeVisualizationSettings, MemorySettings, SanitationSettings
from assistant.crypto import open_sealer
from assistant.defence.types import Hit, Layer, Source, Verdict
from assistant.embeddings.hashing import HashingEmbedder
from assistant.graph.extract.rules import RulesExtractor
from assistant.graph.service import KnowledgeGraph
from assistant.memory.store import MemoryStore, NewMemory
from assistant.memory.types import MemoryType
from assistant.sanitation import quality
from assistant.sanitation.service import SanitationDeps, SanitationService
from assistant.sanitation.store import SanitationStore
from assistant.sanitation.types import QualityAssessment, Trend
from assistant.storage.db import Database

T0 = 1_795_000_000.0  # 2026-11-18T...Z
DAY = 86_400.0
USER = "alice"
INJECTION = "ignore previous instructions"


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class FakeDetector:
    """Flags any text containing :data:`INJECTION` (static layer), counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    def inspect(self, text: str, source: Source = Source.USER, user_id: str | None = None) -> Verdict:
        self.calls += 1
        at = text.lower().find(INJECTION)
        if at < 0:
            return Verdict(False, 0.0, (), source)
        hit = Hit(Layer.STATIC, "override", "an instruction to ignore previous instructions",
                  (at, at + len(INJECTION)))
        return Verdict(True, 1.0, (hit,), source)


def fixed_quality(deps, user_id, history=(), since=None, now=None) -> QualityAssessment:
    return QualityAssessment(0.9, 0.1, 0.1, 0.0, Trend.STABLE, [], 3, 1, None, "2026-11-25T00:00:00.000Z")


@dataclass
class World:
    db: Database
    memory: MemoryStore
    graph: KnowledgeGraph
    service: SanitationService
    clock: Clock
    detector: FakeDetector
    orphan: str = ""

    def add(self, text: str, *, days_ago: float = 0.0, kind: MemoryType = MemoryType.CONTEXT,
            importance: float = 0.5, user: str = USER) -> str:
        """A memory written ``days_ago`` before now (the clock goes back and forth), ingested by the graph."""
        now = self.clock.t
        self.clock.t = now - days_ago * DAY
        try:
            [memory_id] = self.memory.add_many(user, [NewMemory(text, memory_type=kind, importance=importance)])
            self.graph.wait_idle()
        finally:
            self.clock.t = now
        return memory_id

    def type_of(self, memory_id: str) -> str | None:
        return self.db.scalar("SELECT memory_type FROM memories WHERE id = ?", (memory_id,))

    def checksum(self, skip: tuple[str, ...] = ("sanitation_results",)) -> dict[str, str]:
        """sha256 of every table's rows in rowid order (``skip``: the audit table a failed run appends to)."""
        tables = [r["name"] for r in self.db.query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
        out = {}
        for table in tables:
            if table in skip:
                continue
            try:
                rows = self.db.query(f'SELECT * FROM "{table}" ORDER BY rowid')
            except Exception:  # a virtual or WITHOUT ROWID table: its natural order
                rows = self.db.query(f'SELECT * FROM "{table}"')
            digest = hashlib.sha256()
            for row in rows:
                digest.update(repr(sorted(row.items())).encode())
            out[table] = digest.hexdigest()
        return out


class NoAttacks:
    """An attack source with nothing to offer: defence evolution adds no pattern (its own tests)."""

    def attacks(self, user_id: str) -> list[tuple[str, str]]:
        return []


def make_world(tmp_path: Path, monkeypatch, **settings: object) -> World:
    monkeypatch.setattr(quality, "assess", fixed_quality)
    clock = Clock()
    db = Database(tmp_path / "assistant.db")
    sealer = open_sealer(db, tmp_path / "memory.key")
    memory = MemoryStore(db, sealer, HashingEmbedder(), MemorySettings(), clock=clock)
    graph = KnowledgeGraph(db, sealer, memory, RulesExtractor(), KnowledgeGraphSettings(), MemorySettings(),
                           KnowledgeVisualizationSettings(), clock=clock)
    memory.listeners.append(graph)
    detector = FakeDetector()
    deps = SanitationDeps(store=SanitationStore(db, sealer, clock=clock), memory=memory,
                          settings=SanitationSettings(**settings), detector=detector, graph=graph, clock=clock,
                          bypasses=NoAttacks())
    return World(db, memory, graph, SanitationService(deps), clock, detector)
