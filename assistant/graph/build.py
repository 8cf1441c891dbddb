"""Wiring of the knowledge graph: the extractor the settings name, the service, the memory hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from assistant.errors import ConfigError
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


class NoExtraction:
    """The extractor of a read-only graph: it never ingests (the server does)."""

    id = "none"

    def extract(self, passages: list) -> list:
        raise RuntimeError("this knowledge graph is read-only: the server extracts")


def open_read_only_graph(settings: Settings) -> KnowledgeGraph:
    """The graph of a data directory another process (the server) writes, for a dashboard: only the
    SQLite database, the key and the embedder (for search) are opened, not every service (the
    server holds the analytics database's lock). It listens to no memory store; what the server
    writes arrives through the stored event log (``GraphEvents.history``)."""
    from assistant.embeddings.base import create_embedder
    from assistant.memory.store import MemoryStore
    from assistant.services import DB_FILE, key_path
    from assistant.storage.db import Database
    from assistant.storage.memory_key import open_store_sealer

    mem = settings.memory
    if not (mem.enabled and settings.knowledge_graph.enabled):
        raise ConfigError("the knowledge graph is disabled ([knowledge_graph] enabled = false, or memory off)")
    db = Database(settings.data_dir / DB_FILE)
    sealer = open_store_sealer(db, key_path(settings), enabled=mem.enable_encryption)
    base_url = settings.inference.base_url if mem.embedding_backend == "ollama" else None
    memory = MemoryStore(db, sealer, create_embedder(mem, base_url), mem)
    return KnowledgeGraph(db, sealer, memory, NoExtraction(), settings.knowledge_graph, mem,
                          settings.knowledge_visualization)
