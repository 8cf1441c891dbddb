"""The retrieval methods that ``benchmarks/locomo_recall.py --cv`` cross-validates, each with the
grid of free parameters chosen on the tuning conversations (:mod:`assistant.memory.crossval`).

A method that is not (yet) in the package is written here, over the store's public search, so it
can be measured before it is adopted: reciprocal-rank fusion of the dense and keyword rankings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from assistant.memory.crossval import Method, configure_store, grid, store_method
from assistant.memory.evaluation import Prepared
from assistant.memory.records import HybridWeights

POOL = 50  # the candidates a re-ranking method sees (the store's own pool for hybrid)


def _weighted(dense: Sequence[float]) -> list[dict]:
    """HybridWeights points with keyword = 1 - dense (only their ratio matters much)."""
    return [{"dense": d, "keyword": round(1 - d, 2)} for d in dense]


def hybrid_grid() -> list[dict]:
    """The free parameters of hybrid search: the dense/keyword ratio, the neighbour context, BM25 b."""
    return [{**w, **rest} for w in _weighted((0.5, 0.6, 0.7)) for rest in grid(context=(0.0, 0.2, 0.3, 0.4),
                                                                                 b=(0.5, 0.75))]


def rrf(prepared: Prepared, state, question, vector, params, k: int) -> list[str]:  # noqa: ANN001
    """Reciprocal-rank fusion of the dense and keyword rankings (pool ``POOL`` each)."""
    store = prepared.store
    configure_store(store, {})
    scores: dict[str, float] = {}
    for mode in ("dense", "keyword"):
        found = store.search(prepared.user, question.question, POOL, query_vector=vector, mode=mode,
                             rank_by="similarity")
        for rank, hit in enumerate(found):
            scores[hit.memory.id] = scores.get(hit.memory.id, 0.0) + 1.0 / (params["rrf_k"] + rank + 1)
    return sorted(scores, key=lambda m: -scores[m])[:k]


def attach_graph(prepared: Prepared) -> None:
    """``evaluate``'s setup for mode hybrid+graph: the conversation's graph, its expander attached."""
    prepared.store.expander = _graph_setup(prepared)


def _graph_setup(prepared: Prepared):  # noqa: ANN202
    """The knowledge graph of one stored conversation, built with the ``rules`` extractor (the
    default without an engine) over its memories, and its expander (not attached to the store)."""
    from assistant.graph.retrieval import attach_graph

    store = prepared.store
    previous = store.expander
    attach_graph(store, prepared.user)
    expander, store.expander = store.expander, previous  # the method attaches it when it ranks
    return expander


def _graph_rank(prepared: Prepared, expander, question, vector, params, k: int) -> list[str]:  # noqa: ANN001
    from assistant.graph.retrieval import GraphRetrievalWeights

    store = prepared.store
    configure_store(store, params)
    names = {f.name for f in dataclasses.fields(GraphRetrievalWeights)}
    expander.weights = GraphRetrievalWeights(**{n: v for n, v in params.items() if n in names})
    store.expander = expander
    try:
        found = store.search(prepared.user, question.question, k, query_vector=vector, mode="hybrid+graph",
                             rank_by="similarity")
    finally:
        store.expander = None
    return [s.memory.id for s in found]


def graph_grid() -> list[dict]:
    """The free parameters of the graph expander (assistant/graph/retrieval.py) on hybrid without
    temporal grounding. A first run (entity 0 / 0.1, speaker 0 to 0.4, graph 0 to 0.2) chose entity 0,
    speaker 0.3-0.4 and graph 0.1-0.2 on every split; this grid continues around those."""
    return grid(date=(0.0,), when=(0.0,), graph=(0.1, 0.2, 0.3), speaker=(0.3, 0.4, 0.5, 0.6), hops=(1,),
                seed_hits=(3,))


def temporal_graph_grid() -> list[dict]:
    """Temporal grounding and the graph expander together."""
    return grid(date=(0.0, 0.1, 0.2), when=(0.1,), speaker=(0.3, 0.4, 0.5, 0.6), graph=(0.1, 0.2), hops=(1,),
                seed_hits=(3,))


def methods() -> dict[str, Callable[[], Method]]:
    """Name -> a factory of the method (factories, so that only the chosen ones are built)."""
    defaults = HybridWeights()
    return {
        "dense": lambda: store_method("dense", "dense"),
        "keyword": lambda: store_method("keyword", "keyword", grid(k1=(0.9, 1.2, 1.6), b=(0.3, 0.5, 0.75))),
        "hybrid@defaults": lambda: store_method("hybrid@defaults", "hybrid",
                                                [{"dense": defaults.dense, "keyword": defaults.keyword,
                                                  "context": defaults.context}]),
        "hybrid": lambda: store_method("hybrid", "hybrid", hybrid_grid()),
        "rrf": lambda: Method("rrf", grid(rrf_k=(5, 10, 30, 60)), rrf),
        # temporal grounding (assistant/memory/temporal.py) on top of the default hybrid weights
        "temporal": lambda: store_method("temporal", "hybrid", grid(date=(0.0, 0.05, 0.1, 0.2, 0.3),
                                                                    when=(0.0, 0.05, 0.1, 0.2))),
        "hybrid+graph": lambda: Method("hybrid+graph", graph_grid(), _graph_rank, _graph_setup),
        "temporal+graph": lambda: Method("temporal+graph", temporal_graph_grid(), _graph_rank, _graph_setup),
        "diversity": lambda: store_method("diversity", "hybrid", grid(diversity=(0.0, 0.02, 0.05, 0.1, 0.15))),
    }


DEFAULT_METHODS = ("dense", "keyword", "hybrid@defaults", "hybrid")
