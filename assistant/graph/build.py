"""Wiring of the knowledge graph: the extractor the settings name, the service, the memory hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.graph.service import KnowledgeGraph

if TYPE_CHECKING:
    from assistant.config import Settings
    from assistant.crypto import Sealer
    from assistant.graph.types import Extractor
    from assistant.llm.queue import InferenceQueue
    from assistant.memory.store import MemoryStore
    from assistant.storage.db import Database


def build_graph(settings: Settings, db: Database, sealer: Sealer, memory: MemoryStore | None,
                queue: InferenceQueue, *, extractor: Extractor | None = None) -> KnowledgeGraph | None:
    """The knowledge graph, listening to the memory store and (with ``memory.retrieval =
    "hybrid+graph"``) expanding its retrieval; None while
    ``[knowledge_graph] enabled = false`` or the memory store is off."""
    if memory is None or not settings.knowledge_graph.enabled:
        return None
    from assistant.graph.extract import create_extractor

    fallback = None
    if extractor is None:
        extractor, fallback = create_extractor(settings, queue)
    graph = KnowledgeGraph(db, sealer, memory, extractor, settings.knowledge_graph, settings.memory,
                           settings.knowledge_visualization, fallback=fallback)
    memory.listeners.append(graph)
    if settings.memory.retrieval == "hybrid+graph":  # graph-aware retrieval (assistant/graph/retrieval.py)
        from assistant.graph.retrieval import GraphExpander

        memory.expander = GraphExpander(graph, max_hops=settings.knowledge_graph.max_hops)
    return graph
