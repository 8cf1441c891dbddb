"""What other parts may attach to the memory store: listeners of its changes, and a retrieval expander.

The knowledge graph (:mod:`assistant.graph`) is both: it extracts entities from each memory written,
drops a memory's contribution when it is deleted or quarantined, strengthens what a retrieved memory
mentions, and expands hybrid hits through the query's entities (``memory.retrieval =
"hybrid+graph"``). The memory package defines these protocols so that it never imports the graph.

Listeners are called after the change has committed, on the caller's thread: they must return
quickly (queue the work) and never raise into the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from assistant.memory.types import ScoredMemory


class MemoryListener(Protocol):
    def memories_written(self, user_id: str, memory_ids: Sequence[str]) -> None:
        """New memories, or memories whose content changed (a merge)."""

    def memories_removed(self, user_id: str, memory_ids: Sequence[str]) -> None:
        """Deleted or quarantined memories."""

    def memories_recalled(self, user_id: str, memory_ids: Sequence[str]) -> None:
        """Memories retrieved into a prompt."""


class Expander(Protocol):
    def expand(self, user_id: str, query: str, query_vector: np.ndarray, hits: list[ScoredMemory],
               limit: int) -> list[ScoredMemory]:
        """``hits`` (hybrid search, ranked by similarity) re-ranked with memories linked to them or to
        the query through the graph; at most ``limit``."""
