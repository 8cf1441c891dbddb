"""Relevance scoring and prompt assembly: pure functions researchers can call and plot.

relevance = similarity x 0.50 + importance x 0.20 + freshness x 0.30, where
freshness = e^(-0.01 x hours since last access). Archived memories stay searchable with their
relevance multiplied by ``ARCHIVED_FACTOR``; Quarantined ones never reach a prompt.

Which memories may enter a prompt (``[memory] rag_threshold``, ``rag_threshold_mode``): those whose
retrieval similarity is at least ``rag_threshold``. With ``rag_threshold_mode = "fused"`` (the
default) the similarity is the hybrid search's own score, dense cosine and BM25 fused
(``memory.store.HybridWeights``), and the candidates come from hybrid search; with ``"cosine"`` it
is the dense cosine alone, from dense search (the spec: "retrieved by cosine similarity"), and
relevance then uses that cosine too. :data:`RAG_SEARCH_MODE` maps one to the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from assistant.memory.types import MemoryType

FRESHNESS_RATE_PER_HOUR = 0.01
#: ``rag_threshold_mode`` -> the search mode whose ``ScoredMemory.fused`` the threshold reads.
RAG_SEARCH_MODE = {"fused": "hybrid", "cosine": "dense"}
ARCHIVED_FACTOR = 0.5
CONTEXT_BUDGET_CHARS = 2000
TYPE_PRIORITY = (
    MemoryType.CORRECTION,
    MemoryType.FACT,
    MemoryType.PREFERENCE,
    MemoryType.CONTEXT,
    MemoryType.TOOL_RESULT,
)
# What became of a memory in the running for a prompt (MemoryStore.retrieve_for_prompt's ``candidates``):
INJECTED, CUT_BUDGET, OVER_LIMIT, BELOW_THRESHOLD = "injected", "cut_budget", "over_limit", "below_threshold"
CANDIDATE_STATES = (INJECTED, CUT_BUDGET, OVER_LIMIT, BELOW_THRESHOLD)
NEAR_MISSES = 5  # at most this many over_limit and below_threshold candidates each are reported
PREAMBLE = (
    "Known facts about the user, from earlier conversations. Treat them as true and use them "
    "when they are relevant; do not mention that they come from memory:"
)


@dataclass(frozen=True)
class RelevanceWeights:
    similarity: float = 0.50
    importance: float = 0.20
    freshness: float = 0.30


DEFAULT_WEIGHTS = RelevanceWeights()


def freshness(hours_since_access: float | np.ndarray, rate: float = FRESHNESS_RATE_PER_HOUR):
    """e^(-rate x hours); 1.0 for a memory touched just now."""
    return np.exp(-rate * np.maximum(hours_since_access, 0.0))


def relevance(similarity, importance, hours_since_access, weights: RelevanceWeights = DEFAULT_WEIGHTS):
    """The spec's relevance; works on floats and numpy arrays alike."""
    return (
        weights.similarity * similarity
        + weights.importance * importance
        + weights.freshness * freshness(hours_since_access)
    )


@dataclass(frozen=True)
class RelevanceParts:
    """What each term of the relevance formula gave one hit: the three weighted terms and the archived
    factor, so that ``(similarity + importance + freshness) x factor`` is its relevance."""

    similarity: float  # weights.similarity x the retrieval similarity the ranking used
    importance: float  # weights.importance x importance
    freshness: float  # weights.freshness x e^(-0.01 x hours since last access)
    factor: float  # ARCHIVED_FACTOR for an Archived memory, else 1.0
    retrieval_similarity: float  # the similarity in the formula (hybrid: dense and BM25 fused, + context)

    def as_dict(self) -> dict[str, float]:
        return {k: round(float(v), 6) for k, v in self.__dict__.items()}


def relevance_parts(scored, weights: RelevanceWeights = DEFAULT_WEIGHTS) -> RelevanceParts:  # noqa: ANN001
    """The breakdown of a :class:`~assistant.memory.types.ScoredMemory` ranked by relevance (its
    ``score`` is the retrieval similarity, halved for an Archived memory like its relevance)."""
    factor = ARCHIVED_FACTOR if scored.memory.memory_type == MemoryType.ARCHIVED else 1.0
    similarity = scored.score / factor
    return RelevanceParts(weights.similarity * similarity, weights.importance * scored.memory.importance,
                          weights.freshness * scored.freshness, factor, similarity)


def type_rank(memory_type: MemoryType) -> int:
    """Position in the prompt order Correction, Fact, Preference, Context, ToolResult (others last)."""
    try:
        return TYPE_PRIORITY.index(memory_type)
    except ValueError:
        return len(TYPE_PRIORITY)


def order_for_prompt(items: Sequence, key_type=lambda m: m.memory_type, key_relevance=None) -> list:  # noqa: ANN001
    """Sort by type priority, then by relevance (highest first) within a type."""
    return sorted(items, key=lambda m: (type_rank(key_type(m)), -(key_relevance(m) if key_relevance else 0.0)))


def _line(text: str) -> str:
    return f"- {' '.join(text.split())}"


def fit_in_budget(contents: Sequence[str], budget: int = CONTEXT_BUDGET_CHARS) -> list[int]:
    """Indices of the whole memories that fit in ``budget`` characters, in the given order.

    A memory that would not fit whole is left out (the next, shorter one may still fit).
    """
    kept: list[int] = []
    used = 0
    for i, text in enumerate(contents):
        size = len(_line(text)) + 1
        if used + size <= budget:
            kept.append(i)
            used += size
    return kept


def build_context(contents: Sequence[str], budget: int = CONTEXT_BUDGET_CHARS) -> str:
    """The preamble and the memories :func:`fit_in_budget` keeps, one per line."""
    kept = fit_in_budget(contents, budget)
    return f"{PREAMBLE}\n" + "\n".join(_line(contents[i]) for i in kept) if kept else ""


def hours_between(earlier_iso: str, later_epoch: float) -> float:
    from datetime import datetime

    earlier = datetime.fromisoformat(earlier_iso.replace("Z", "+00:00")).timestamp()
    return max((later_epoch - earlier) / 3600.0, 0.0)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0


__all__ = [
    "ARCHIVED_FACTOR", "BELOW_THRESHOLD", "CANDIDATE_STATES", "CONTEXT_BUDGET_CHARS", "CUT_BUDGET", "DEFAULT_WEIGHTS",
    "INJECTED", "NEAR_MISSES", "OVER_LIMIT", "PREAMBLE", "RAG_SEARCH_MODE", "TYPE_PRIORITY",
    "RelevanceParts", "RelevanceWeights",
    "build_context", "cosine", "fit_in_budget", "freshness", "hours_between", "order_for_prompt", "relevance", "relevance_parts",
    "type_rank",
]
