"""Build the defence and sanitation from the settings (build_services), and wire them in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from assistant.defence.build import build_detector
from assistant.defence.types import Detector
from assistant.sanitation.service import SanitationDeps, SanitationService
from assistant.sanitation.store import SanitationStore

if TYPE_CHECKING:
    from assistant.config import Settings
    from assistant.crypto import Sealer
    from assistant.graph.service import KnowledgeGraph
    from assistant.llm.queue import InferenceQueue
    from assistant.memory.store import MemoryStore
    from assistant.storage.db import Database


def build_sanitation(settings: Settings, db: Database, sealer: Sealer, memory: MemoryStore | None,
                     graph: KnowledgeGraph | None, queue: InferenceQueue | None,
                     conversations: Any = None) -> tuple[Detector, SanitationService | None]:
    """The detector (always: chat and the tool loop use it; its dynamic patterns come from the
    sanitation store) and the sanitation service (None while ``[sanitation] enabled = false`` or the
    memory store is off)."""
    store = SanitationStore(db, sealer)
    detector = build_detector(settings.defence, store, queue, memory.embedder if memory is not None else None)
    if memory is None or not settings.sanitation.enabled:
        return detector, None
    deps = SanitationDeps(store=store, memory=memory, settings=settings.sanitation, detector=detector, graph=graph,
                          queue=queue, conversations=conversations)
    return detector, SanitationService(deps)
