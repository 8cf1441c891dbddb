"""Build dream mode from the settings (build_services), and wire it into chat."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.dream.activity import ActivityTracker, seed_from_database
from assistant.dream.deps import DreamDeps
from assistant.dream.service import DreamService
from assistant.dream.store import DreamStore
from assistant.sanitation.service import DreamSanitation

if TYPE_CHECKING:
    from assistant.chat.service import ChatService
    from assistant.config import Settings
    from assistant.crypto import Sealer
    from assistant.graph.service import KnowledgeGraph
    from assistant.llm.queue import InferenceQueue
    from assistant.memory.store import MemoryStore
    from assistant.sanitation.service import SanitationService
    from assistant.storage.db import Database


def build_dream(settings: Settings, db: Database, sealer: Sealer, memory: MemoryStore | None,
                graph: KnowledgeGraph | None, queue: InferenceQueue | None,
                chat: ChatService | None = None, sanitation: SanitationService | None = None) -> DreamService | None:
    """Dream mode, or None while ``[dream] enabled = false`` or the memory store is off. With ``chat``,
    chat messages count as activity and confirmed insights are surfaced in its prompts; with
    ``sanitation``, it runs between NREM and REM in every cycle."""
    if memory is None or not settings.dream.enabled:
        return None
    deps = DreamDeps(store=DreamStore(db, sealer), memory=memory, settings=settings.dream,
                     memory_settings=settings.memory, sanitation_settings=settings.sanitation, graph=graph,
                     queue=queue, sanitation=DreamSanitation(sanitation) if sanitation is not None else None)
    service = DreamService(deps, ActivityTracker(seed=seed_from_database(db)))
    if chat is not None:
        chat.activity = service.activity.touch
        if settings.dream.rem.proactive_surfacing:
            chat.surfacing = service.insights.surface
    return service
