"""Leave-conversations-out cross-validation of retrieval methods on LoCoMo.

Tuning retrieval on the five dev conversations and reporting on the same five overstates it: on
LoCoMo conversations the project had never seen, hybrid R@5 was .568 against .659 on dev. Here a
method's free parameters are chosen by grid search on 3 conversations and its recall is reported
on the other 2, for every one of the 10 ways to split 5 into 3 + 2; the held-out figures are
averaged over the splits (each conversation is held out in 4 of them).

It stays cheap because nothing is embedded twice: each conversation is stored once
(:func:`assistant.memory.evaluation.prepare`, one :class:`MemoryStore` and the question vectors),
each grid point ranks every question of every conversation once (:func:`score_grid`), and the
splits only choose among those per-question recalls (:func:`cross_validate`).

A :class:`Method` is a name, a grid of parameter points, and ``rank(prepared, state, question,
vector, params, k)`` returning ranked memory ids; ``setup(prepared)`` builds per-conversation
state once (a knowledge graph, say). :func:`store_method` makes one that sets the store's
``HybridWeights`` fields and BM25 ``k1``/``b`` from the point and calls ``MemoryStore.search``.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assistant.memory.evaluation import CATEGORIES, Prepared, recall_at
from assistant.memory.records import HybridWeights

Params = Mapping[str, Any]
HYBRID_FIELDS = frozenset(f.name for f in dataclasses.fields(HybridWeights))


@dataclass
class Method:
    name: str
    grid: Sequence[Params]
    rank: Callable[..., list[str]]  # (prepared, state, question, vector, params, k) -> memory ids
    setup: Callable[[Prepared], Any] = field(default=lambda prepared: None)


def grid(**axes: Iterable) -> list[dict[str, Any]]:
    """Every combination of the axes: ``grid(dense=[.5, .6], context=[.2, .3])`` -> 4 points."""
    names = list(axes)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(list(axes[n]) for n in names))]


def configure_store(store, params: Params) -> None:  # noqa: ANN001
    """Apply a grid point to a store: HybridWeights fields, BM25 ``k1``/``b``; other keys are the
    method's own. The store's original settings are kept on the store the first time."""
    if not hasattr(store, "_crossval_base"):
        store._crossval_base = (store.hybrid, store.keywords.k1, store.keywords.b)
    hybrid, k1, b = store._crossval_base
    store.hybrid = dataclasses.replace(hybrid, **{k: v for k, v in params.items() if k in HYBRID_FIELDS})
    store.keywords.k1 = params.get("k1", k1)
    store.keywords.b = params.get("b", b)


def store_method(name: str, mode: str, points: Sequence[Params] = ({},)) -> Method:
    """A method that is ``MemoryStore.search`` in ``mode`` with each point applied to the store."""

    def rank(prepared: Prepared, state, question, vector, params: Params, k: int) -> list[str]:  # noqa: ANN001
        configure_store(prepared.store, params)
        found = prepared.store.search(prepared.user, question.question, k, query_vector=vector, mode=mode,
                                      rank_by="similarity")
        return [s.memory.id for s in found]

    return Method(name, list(points), rank)


def score_grid(prepared: Sequence[Prepared], method: Method, *, k: int = 5,
               progress: Callable[[Iterable], Iterable] = lambda it: it) -> list[dict]:
    """One row per (grid point, question): ``point``, ``sample_id``, ``category``, ``recall``, and
    ``ms`` (the ranking's wall time, for the cost column; never asserted)."""
    rows = []
    states = {p.sample_id: method.setup(p) for p in prepared}
    jobs = [(i, p) for i, _ in enumerate(method.grid) for p in prepared]
    for i, p in progress(jobs):
        params = method.grid[i]
        for question, vector in zip(p.questions, p.vectors, strict=True):
            started = time.perf_counter()
            ids = method.rank(p, states[p.sample_id], question, vector, params, k)
            ms = (time.perf_counter() - started) * 1000
            ranked = [p.dia_of[m] for m in ids if m in p.dia_of]
            rows.append({"point": i, "sample_id": p.sample_id, "category": question.category,
                         "recall": recall_at(ranked, question.evidence, k), "ms": ms})
    if any(hasattr(p.store, "_crossval_base") for p in prepared):
        for p in prepared:
            configure_store(p.store, {})
    return rows


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


@dataclass(frozen=True)
class CrossValidation:
    method: str
    held_out: dict[str, float]  # category label (and "all") -> R@k averaged over the held-out sides
    tuned: dict[str, float]  # the same on the tuning sides (how much the choice overfits)
    chosen: list[Params]  # the point chosen on each split
    full: dict[str, float]  # the best point on all conversations (what "tuned on dev" would report)
    best_full: Params
    ms_per_query: float = float("nan")  # mean ranking time over every point and question
    conversations: int = 0


def _by_category(rows: Sequence[dict], categories: Sequence[int]) -> dict[str, float]:
    """Mean recall per category that has questions here, and over all of them."""
    out = {f"{c} {CATEGORIES[c]}": _mean(values) for c in categories
           if (values := [r["recall"] for r in rows if r["category"] == c])}
    out["all"] = _mean([r["recall"] for r in rows])
    return out


def _average(sides: Sequence[dict[str, float]]) -> dict[str, float]:
    """Per key, the mean over the splits whose side has it (a category may be missing from one)."""
    keys = list(dict.fromkeys(k for side in sides for k in side))
    keys = sorted(keys, key=lambda k: (k == "all", k))
    return {k: _mean([side[k] for side in sides if k in side]) for k in keys}


def cross_validate(rows: Sequence[dict], method: Method, *, tune: int = 3,
                   categories: Sequence[int] = (1, 2, 3, 4)) -> CrossValidation:
    """For every split of the conversations into ``tune`` and the rest, choose the grid point with
    the best overall recall on the tuning side (questions weighted equally; ties: the earlier
    point) and measure it on the held-out side; average the per-category figures over splits."""
    rows = [r for r in rows if r["category"] in categories]
    samples = sorted({r["sample_id"] for r in rows})
    points = sorted({r["point"] for r in rows})
    by: dict[tuple[int, str], list[dict]] = {(pt, s): [] for pt in points for s in samples}
    for r in rows:
        by[(r["point"], r["sample_id"])].append(r)

    def pooled(pt: int, group: Iterable[str]) -> list[dict]:
        return [r for s in group for r in by[(pt, s)]]

    held, tuned, chosen = [], [], []
    for tuning in itertools.combinations(samples, tune):
        others = [s for s in samples if s not in tuning]
        best = max(points, key=lambda pt: (_mean([r["recall"] for r in pooled(pt, tuning)]), -pt))
        chosen.append(method.grid[best])
        held.append(_by_category(pooled(best, others), categories))
        tuned.append(_by_category(pooled(best, tuning), categories))
    best_all = max(points, key=lambda pt: (_mean([r["recall"] for r in pooled(pt, samples)]), -pt))
    return CrossValidation(
        method.name,
        _average(held),
        _average(tuned),
        chosen,
        _by_category(pooled(best_all, samples), categories),
        method.grid[best_all],
        _mean([r["ms"] for r in rows if "ms" in r]),
        len(samples),
    )


def table(results: Sequence[CrossValidation]):
    """Held-out (cross-validated) and tuned-on-all figures per method, as a pandas DataFrame."""
    import pandas as pd

    records = []
    for res in results:
        records.append({"method": res.method, "side": "held-out (CV)", **res.held_out, "ms/query": res.ms_per_query})
        records.append({"method": res.method, "side": f"tuned on all {res.conversations}", **res.full, "ms/query": res.ms_per_query})
    return pd.DataFrame(records).set_index(["method", "side"])
