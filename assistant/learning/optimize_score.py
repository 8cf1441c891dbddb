"""The objective of retrieval-parameter optimisation: what a prompt would carry under a set of
parameters, re-scored from features gathered once (no search, no embedding per trial).

A :class:`Case` is one question with its candidates' weight-free features
(:func:`assistant.memory.candidates.features`) and what should reach the prompt: ``positives`` (the
memories a later answer used, or that feedback marked useful; on LoCoMo, the evidence turns) and
``negatives`` (memories injected into an answer that was re-asked or corrected and that the answer did
not use). For a parameter set, :class:`Batch` recomputes, for every case at once (padded numpy arrays),
exactly what :meth:`MemoryStore.retrieve_for_prompt` does:

    fused      = dense x cosine + keyword x BM25/best          (the rag_threshold reads this)
    score      = min(1, fused + context x near) (+ date, when) (the ranking similarity)
    importance = clip(importance_now x e^(-(r - r_ref) x modifier / (1 + ln(1 + accesses)) x age_days),
                      type floor, 1)                          (r = -ln(decay_factor))
    relevance  = w_sim x score + w_imp x importance + w_fresh x e^(-0.01 x hours since access)
    (Archived: relevance, score and fused x 0.5)
    prompt     = of the best max(10 x rag_limit, 50) by score, those with fused >= rag_threshold, the
                 rag_limit most relevant, whole within the 2,000-character budget (type order)

``r_ref`` is the base rate the stored importance has already decayed at (the configured decay factor
for a user's own memories; 0 for LoCoMo, whose memories start at 0.5 and are aged here from their
session dates). For a user's memories this re-decay is an approximation: it ignores reinforcement and
a floor reached earlier. Then, over the cases:

    R = mean over cases with positives of |positives in the first k memories of the prompt| / |positives|
    Q = mean over cases of 1 - (1 - quality) x |negatives still in the prompt| / |negatives|
        (quality: 1 - (re-asked x 0.4 + corrected x 0.4), sanitation's weights; a case without
        negatives keeps its quality)
    objective = (1 - a) x R + a x Q - 0.01 x mean prompt size / 10

``k`` is ``optimization.recall_at`` (5: the spec's default rag_limit, so injecting more memories does not
raise R), ``a`` is ``optimization.quality_weight`` (0.3) when some case carries a quality signal, else 0
(LoCoMo: the objective is R@k). The last term, worth 0.001 per memory, makes the study prefer the
smaller prompt between equal recalls.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from assistant.learning.optimize_space import MAX_RAG_LIMIT
from assistant.memory.candidates import Features
from assistant.memory.decay import DECAY_PARAMS, NOT_DECAYED, TYPE_CODES, TYPE_ORDER
from assistant.memory.scoring import ARCHIVED_FACTOR, CONTEXT_BUDGET_CHARS, FRESHNESS_RATE_PER_HOUR
from assistant.memory.tuning import RetrievalParams
from assistant.memory.types import MemoryType

PARSIMONY = 0.01  # objective lost when the mean prompt carries MAX_RAG_LIMIT memories instead of none
LINE_OVERHEAD = 3  # "- " and the newline of a memory's line in the prompt (scoring.fit_in_budget)
_CONTEXT = DECAY_PARAMS[MemoryType.CONTEXT]
_MODIFIERS = np.array([0.0 if t in NOT_DECAYED else DECAY_PARAMS.get(t, _CONTEXT).modifier for t in TYPE_ORDER])
_FLOORS = np.array([0.0 if t in NOT_DECAYED else DECAY_PARAMS.get(t, _CONTEXT).floor for t in TYPE_ORDER])


@dataclass(frozen=True)
class Case:
    id: str
    group: str  # the validation split keeps a group together (a conversation)
    features: Features
    positives: frozenset[str]
    negatives: frozenset[str] = frozenset()
    quality: float = 1.0  # the answer's observed quality, 0..1
    reference_rate: float = 0.0  # the decay base rate the features' importance already decayed at


@dataclass(frozen=True)
class Score:
    value: float  # the objective
    recall: float  # R (recall@k of the positives)
    quality: float  # Q
    injected: float  # mean memories per prompt
    cases: int

    def as_dict(self) -> dict[str, float]:
        return {"value": round(self.value, 6), "recall": round(self.recall, 6), "quality": round(self.quality, 6),
                "injected": round(self.injected, 3), "cases": self.cases}


class Batch:
    """Cases padded into arrays, scored for any parameter set by :meth:`score` (see the module)."""

    def __init__(self, cases: Sequence[Case], *, k: int = 5, quality_weight: float = 0.3):
        if not cases:
            raise ValueError("a batch needs at least one case")
        self.cases = list(cases)
        self.k = k
        n, c = len(cases), max(1, max(len(case.features) for case in cases))
        self.valid = np.zeros((n, c), dtype=bool)

        def pad(attr: str, dtype: type, fill: float = 0) -> np.ndarray:
            out = np.full((n, c), fill, dtype=dtype)
            for i, case in enumerate(cases):
                values = getattr(case.features, attr)
                out[i, : len(values)] = values
            return out

        for i, case in enumerate(cases):
            self.valid[i, : len(case.features)] = True
        self.cosine, self.keyword, self.near = pad("cosine", float), pad("keyword", float), pad("near", float)
        self.in_window, self.mentions = pad("in_window", bool), pad("mentions_time", bool)
        self.importance, self.age = pad("importance", float), pad("age_days", float)
        codes = pad("type_code", np.int64, TYPE_CODES[MemoryType.CONTEXT])
        self.rate_scale = _MODIFIERS[codes] / (1.0 + np.log1p(pad("access_count", float)))
        self.floor = _FLOORS[codes]
        self.fresh = np.exp(-FRESHNESS_RATE_PER_HOUR * np.maximum(pad("hours", float), 0.0))
        self.archived = pad("archived", bool)
        self.size = pad("chars", np.int64) + LINE_OVERHEAD
        self.prompt_rank = pad("prompt_rank", np.int64, 99)
        self.pos = np.zeros((n, c), dtype=bool)
        self.neg = np.zeros((n, c), dtype=bool)
        for i, case in enumerate(cases):
            ids = case.features.ids
            self.pos[i, : len(ids)] = [m in case.positives for m in ids]
            self.neg[i, : len(ids)] = [m in case.negatives for m in ids]
        self.n_pos = np.array([len(case.positives) for case in cases], dtype=float)
        self.n_neg = np.array([len(case.negatives) for case in cases], dtype=float)
        self.quality = np.array([case.quality for case in cases], dtype=float)
        self.r_ref = np.array([case.reference_rate for case in cases], dtype=float)[:, None]
        signal = bool(np.any(self.quality < 1.0) or np.any(self.n_neg > 0))
        self.quality_weight = quality_weight if signal else 0.0

    def __len__(self) -> int:
        return len(self.cases)

    def prompts(self, params: RetrievalParams) -> tuple[np.ndarray, np.ndarray]:
        """``(top, kept)``: per case the column indices of the ``rag_limit`` most relevant eligible
        candidates (relevance order) and whether each reaches the prompt (eligible and within budget)."""
        h, w = params.hybrid, params.weights
        fused = h.dense * self.cosine + h.keyword * self.keyword
        score = np.where(self.near > 0, np.minimum(1.0, fused + h.context * self.near), fused)
        score = score + h.date * self.in_window + h.when * self.mentions
        rate = -math.log(params.decay_factor)
        importance = np.clip(self.importance * np.exp(-(rate - self.r_ref) * self.rate_scale * self.age),
                             self.floor, 1.0)
        relevance = w.similarity * score + w.importance * importance + w.freshness * self.fresh
        factor = np.where(self.archived, ARCHIVED_FACTOR, 1.0)
        relevance, score, fused = relevance * factor, score * factor, fused * factor
        score = np.where(self.valid, score, -np.inf)
        n, c = score.shape
        pool = max(params.rag_limit * 10, 50)
        in_pool = self.valid
        if pool < c:
            order = np.argsort(-score, axis=1, kind="stable")
            ranks = np.empty_like(order)
            np.put_along_axis(ranks, order, np.broadcast_to(np.arange(c), (n, c)), axis=1)
            in_pool = self.valid & (ranks < pool)
        eligible = in_pool & (fused >= params.rag_threshold)
        limit = min(params.rag_limit, c)
        top = np.argsort(-np.where(eligible, relevance, -np.inf), axis=1, kind="stable")[:, :limit]
        chosen = np.take_along_axis(eligible, top, axis=1)
        sizes = np.take_along_axis(self.size, top, axis=1) * chosen
        kept = chosen.copy()
        for i in np.flatnonzero(sizes.sum(axis=1) > CONTEXT_BUDGET_CHARS):  # rare: greedy, in prompt order
            cols = [j for j in range(limit) if chosen[i, j]]
            cols.sort(key=lambda j: (self.prompt_rank[i, top[i, j]], -relevance[i, top[i, j]]))
            used = 0
            for j in cols:
                if used + sizes[i, j] <= CONTEXT_BUDGET_CHARS:
                    used += sizes[i, j]
                else:
                    kept[i, j] = False
        return top, kept

    def score(self, params: RetrievalParams) -> Score:
        top, kept = self.prompts(params)
        first_k = kept & (np.cumsum(kept, axis=1) <= self.k)
        hits = (np.take_along_axis(self.pos, top, axis=1) & first_k).sum(axis=1)
        with_pos = self.n_pos > 0
        recall = float(np.mean(hits[with_pos] / self.n_pos[with_pos])) if with_pos.any() else 0.0
        noise = (np.take_along_axis(self.neg, top, axis=1) & kept).sum(axis=1)
        fraction = np.divide(noise, self.n_neg, out=np.zeros_like(self.n_neg), where=self.n_neg > 0)
        quality = float(np.mean(1.0 - (1.0 - self.quality) * np.where(self.n_neg > 0, fraction, 1.0)))
        injected = float(kept.sum(axis=1).mean())
        a = self.quality_weight
        value = (1 - a) * recall + a * quality - PARSIMONY * injected / MAX_RAG_LIMIT
        return Score(value, recall, quality, injected, len(self))


def split(cases: Sequence[Case], fraction: float) -> tuple[list[Case], list[Case]]:
    """``(tuning, validation)``: every case of a group on the same side; groups sorted by name, every
    ``1/fraction``-th to validation (at least one group each side when there are two or more). One group
    only: its cases are split by position the same way."""
    groups = sorted({c.group for c in cases})
    if len(groups) >= 2:
        held = max(1, min(len(groups) - 1, round(len(groups) * fraction)))
        step = len(groups) / held
        chosen = {groups[min(len(groups) - 1, int(i * step + step / 2))] for i in range(held)}
        return [c for c in cases if c.group not in chosen], [c for c in cases if c.group in chosen]
    if len(cases) < 2:
        return list(cases), list(cases)
    held = max(1, min(len(cases) - 1, round(len(cases) * fraction)))
    step = len(cases) / held
    chosen = {min(len(cases) - 1, int(i * step + step / 2)) for i in range(held)}
    return [c for i, c in enumerate(cases) if i not in chosen], [c for i, c in enumerate(cases) if i in chosen]
