"""The search space of retrieval-parameter optimisation, its bounds and how optuna samples it.

=====================  ===============  =====================================================================
parameter              bounds           what it is
=====================  ===============  =====================================================================
``rag_threshold``      0.0 .. 0.8       ``[memory] rag_threshold``: the least fused retrieval similarity a
                                        memory needs to enter a prompt (default 0.5)
``rag_limit``          1 .. 10          ``[memory] rag_limit``: at most this many memories in a prompt
                                        (default 5; integers)
``similarity_weight``  0.2 .. 1.0       relevance weights, sampled raw and normalised to sum 1 (the spec's
``importance_weight``  0.0 .. 0.6       0.5 / 0.2 / 0.3 sum to 1; only their ratios order memories)
``freshness_weight``   0.0 .. 0.6
``dense_weight``       0.3 .. 0.9       hybrid fusion ``dense x cosine + keyword x BM25``; ``keyword_weight``
                                        = 1 - ``dense_weight`` (default 0.6 / 0.4), so the fused score keeps
                                        its 0..1 scale that ``rag_threshold`` reads
``context_weight``     0.0 .. 0.5       ``HybridWeights.context``: the neighbouring memories' keyword match
                                        (default 0.3)
``decay_factor``       0.80 .. 0.999    ``[memory] decay_factor``: the decay base rate is -ln(decay_factor)
                                        per day (default 0.95, i.e. 0.0513 a day)
=====================  ===============  =====================================================================

The temporal-grounding weights, the candidate pool, BM25's k1/b and the graph expander's weights stay
as configured (they were chosen by cross-validation, see :mod:`assistant.memory.records` and
:mod:`assistant.graph.retrieval`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assistant.memory.tuning import RetrievalParams

BOUNDS: dict[str, tuple[float, float]] = {
    "rag_threshold": (0.0, 0.8),
    "rag_limit": (1, 10),
    "similarity_weight": (0.2, 1.0),
    "importance_weight": (0.0, 0.6),
    "freshness_weight": (0.0, 0.6),
    "dense_weight": (0.3, 0.9),
    "context_weight": (0.0, 0.5),
    "decay_factor": (0.80, 0.999),
}
MAX_RAG_LIMIT = int(BOUNDS["rag_limit"][1])
WEIGHTS = ("similarity_weight", "importance_weight", "freshness_weight")


def clamp(values: Mapping[str, float]) -> dict[str, float]:
    """``values`` (the raw sampled names of :data:`BOUNDS`) held inside the bounds."""
    out = {}
    for name, (low, high) in BOUNDS.items():
        if name in values:
            v = min(max(float(values[name]), low), high)
            out[name] = int(round(v)) if name == "rag_limit" else v
    return out


def to_values(raw: Mapping[str, float]) -> dict[str, float | int]:
    """The sampled raw values -> the parameter values a user's recall uses (weights normalised to sum 1,
    ``keyword_weight`` = 1 - ``dense_weight``)."""
    values: dict[str, float | int] = dict(raw)
    total = sum(float(raw[w]) for w in WEIGHTS)
    for w in WEIGHTS:
        values[w] = round(float(raw[w]) / total, 6) if total > 0 else 1.0 / len(WEIGHTS)
    values["keyword_weight"] = round(1.0 - float(raw["dense_weight"]), 6)
    values["rag_limit"] = int(raw["rag_limit"])
    return values


def raw_of(params: RetrievalParams) -> dict[str, float]:
    """The raw point of the space that stands for ``params`` (to enqueue the current parameters as the
    study's first trial), held inside the bounds."""
    flat = params.flat()
    return clamp({name: flat[name] for name in BOUNDS})


def suggest(trial: Any) -> dict[str, float]:
    """Sample one raw point with an optuna trial (``suggest_float``/``suggest_int`` over :data:`BOUNDS`)."""
    raw: dict[str, float] = {}
    for name, (low, high) in BOUNDS.items():
        if name == "rag_limit":
            raw[name] = trial.suggest_int(name, int(low), int(high))
        else:
            raw[name] = trial.suggest_float(name, float(low), float(high))
    return raw


def apply(base: RetrievalParams, values: Mapping[str, Any]) -> RetrievalParams:
    return base.with_values(values)
