"""What dream operations work with: the stores, the engine, the settings (one value, passed around)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from assistant.config import DreamSettings, MemorySettings, SanitationSettings

if TYPE_CHECKING:
    from assistant.dream.session import PhaseContext
    from assistant.dream.store import DreamStore
    from assistant.graph.service import KnowledgeGraph
    from assistant.llm.queue import InferenceQueue
    from assistant.memory.store import MemoryStore


class Sanitation(Protocol):
    """The seam between NREM and REM where sanitation runs (spec "Dream mode flow" 4; issue 15).

    Called once per cycle after NREM with the cycle's context (``ctx.phase`` is still NREM; its
    ``checkpoint()`` pauses and stops like any step's). It must not raise: a failure it cannot
    roll back is its own to report."""

    def run(self, ctx: PhaseContext) -> None: ...


@dataclass
class DreamDeps:
    store: DreamStore
    memory: MemoryStore
    settings: DreamSettings = field(default_factory=DreamSettings)
    memory_settings: MemorySettings = field(default_factory=MemorySettings)
    sanitation_settings: SanitationSettings = field(default_factory=SanitationSettings)
    graph: KnowledgeGraph | None = None
    queue: InferenceQueue | None = None  # REM's hypotheses and suggestions; None: statistical insights only
    sanitation: Sanitation | None = None
    clock: Callable[[], float] = time.time
