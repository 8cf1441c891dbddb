"""Per-user retrieval parameters: what a user's recall reads instead of the configured ones.

The configured parameters (``[memory] rag_threshold``, ``rag_limit``, ``decay_factor``, the store's
:class:`~assistant.memory.scoring.RelevanceWeights` and :class:`~assistant.memory.records.HybridWeights`)
apply to every user until something tunes them for one user: retrieval-parameter optimisation
(:mod:`assistant.learning.optimize`) stores the parameters a user's study applied, and the memory store
asks its :class:`RetrievalTuning` (``MemoryStore.tuning``) for them on every search, prompt retrieval and
decay run (:meth:`assistant.memory.store.MemoryStore.params_for`). The memory package defines the
protocol so that it never imports the learning package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from assistant.memory.records import HybridWeights
from assistant.memory.scoring import RelevanceWeights


@dataclass(frozen=True)
class RetrievalParams:
    """The retrieval parameters one user's recall runs with."""

    rag_threshold: float
    rag_limit: int
    weights: RelevanceWeights
    hybrid: HybridWeights
    decay_factor: float

    def flat(self) -> dict[str, float | int]:
        """The tunable values by name (the optimisation's parameter names)."""
        return {"rag_threshold": self.rag_threshold, "rag_limit": self.rag_limit,
                "similarity_weight": self.weights.similarity, "importance_weight": self.weights.importance,
                "freshness_weight": self.weights.freshness, "dense_weight": self.hybrid.dense,
                "keyword_weight": self.hybrid.keyword, "context_weight": self.hybrid.context,
                "decay_factor": self.decay_factor}

    def with_values(self, values: Mapping[str, Any]) -> RetrievalParams:
        """These parameters with the named values of :meth:`flat` replaced (other names are ignored)."""
        get = values.get
        weights = RelevanceWeights(float(get("similarity_weight", self.weights.similarity)),
                                   float(get("importance_weight", self.weights.importance)),
                                   float(get("freshness_weight", self.weights.freshness)))
        hybrid = dataclasses.replace(self.hybrid, dense=float(get("dense_weight", self.hybrid.dense)),
                                     keyword=float(get("keyword_weight", self.hybrid.keyword)),
                                     context=float(get("context_weight", self.hybrid.context)))
        return RetrievalParams(float(get("rag_threshold", self.rag_threshold)), int(get("rag_limit", self.rag_limit)),
                               weights, hybrid, float(get("decay_factor", self.decay_factor)))


class RetrievalTuning(Protocol):
    def tuned(self, user_id: str) -> Mapping[str, float | int] | None:
        """The parameter values applied for ``user_id`` (names of :meth:`RetrievalParams.flat`), or None."""

    def tuned_decay_factors(self) -> Mapping[str, float]:
        """user id -> ``decay_factor`` of every user with tuned parameters (the decay run's per-user rates)."""
