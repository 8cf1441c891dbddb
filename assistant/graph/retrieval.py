"""Graph-aware retrieval (``memory.retrieval = "hybrid+graph"``): hybrid hits expanded and re-ranked
through the entities of the query.

:class:`GraphExpander` is the memory store's :class:`~assistant.memory.hooks.Expander`. For a query:

1. **Seeds**: the query's entities, i.e. the nodes named by its words (1- to 3-word spans matched
   on normalised names and aliases, :meth:`GraphStore.find_by_name`), and, optionally, the nodes
   whose name embedding is close to the query (cosine >= ``similar``) and the nodes mentioned by
   the best ``seed_hits`` hybrid hits.
2. **Spread** over valid edges for ``hops`` hops (:meth:`KnowledgeGraph.neighbours`: score x edge
   weight x edge retention).
3. **Hub damping**: a node is worth its IDF over the user's memories,
   ``log((N + 1) / (mentions + 1)) / log(N + 1)`` in [0, 1]: the speakers of a chat, mentioned by
   half the memories, count little; a rare name counts fully.
4. **Memory score** ``g(m)`` = sum over the nodes ``m`` mentions of activation x IDF, divided by the
   best ``g`` of the candidates (so in [0, 1]). Candidates are the hybrid hits and the memories
   that mention the ``expand_nodes`` most activated nodes; a memory that was not a hit starts from
   its dense score (``HybridWeights.dense`` x cosine).
5. **Fusion**: ``score = hybrid score + graph x g(m)``; relevance is recomputed from it.

6. **Speaker**: ``+ speaker`` when the memory was said by an entity the query names.

The parameters (:class:`GraphRetrievalWeights`) were chosen with leave-conversations-out
cross-validation on LoCoMo (``benchmarks/locomo_recall.py --cv --methods hybrid+graph,temporal+graph``;
graph built per conversation with the ``rules`` extractor; tuned on 3 conversations, R@5 on the other
2, 10 splits). Held out, categories 1-4: hybrid .660 (multi-hop .318), hybrid+graph .684 (multi-hop
.364, temporal .802, open-domain .325, single-hop .780), with temporal grounding .691 (multi-hop .367,
temporal .826); ~28 ms a query on the LoCoMo conversations (~600 memories) against ~5 ms for hybrid.
What carries it is the speaker term (0.3-0.5 chosen on every split; alone, 0.3: .680 on all five)
and the IDF-damped spread from the query's entities and the best 3 hits (graph 0.1-0.3). Seeding by
name-embedding similarity, 0 hops, and the share of query entities a memory mentions (``entity``)
were never chosen; memories brought in by the expansion alone (not hybrid hits) rarely reach the
top 5, since they lack the keyword half of the score.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from assistant.graph.service import passage_of
from assistant.graph.store import normalise_name
from assistant.memory.scoring import ARCHIVED_FACTOR, RelevanceWeights, freshness, hours_between, relevance
from assistant.memory.types import Memory, MemoryType, ScoredMemory

if TYPE_CHECKING:
    from assistant.graph.service import KnowledgeGraph
    from assistant.graph.types import Extractor
    from assistant.memory.store import MemoryStore

_WORD = re.compile(r"[\w'’-]+")
MAX_SPAN = 3  # words in a query span looked up as a name


@dataclass(frozen=True)
class GraphRetrievalWeights:
    """The expander's parameters; the defaults are those chosen by leave-conversations-out
    cross-validation on LoCoMo (see the module docstring for the figures)."""

    graph: float = 0.2  # weight of the graph score g(m) added to the hybrid score
    # added when the memory was said by one of the query's named entities (a chat log's "On <day>,
    # <Name> said: ..." as :func:`~assistant.graph.service.passage_of` reads it): a question about
    # Melanie is mostly answered by what Melanie said, although her node is a hub the IDF silences
    speaker: float = 0.4
    # weight of the share of the query's named entities the memory mentions, hubs included (never
    # chosen under CV once ``speaker`` is on: 0)
    entity: float = 0.0
    hops: int = 1  # spread over edges (0: the seeds alone); at most [knowledge_graph] max_hops
    seed_hits: int = 3  # nodes of the best hybrid hits seed too (0: only the query's entities)
    similar: float = 0.0  # nodes whose name embedding has this cosine with the query seed (0: off)
    expand_nodes: int = 20  # memories of the most activated nodes join the candidates
    expand: int = 50  # at most this many new memories


def query_spans(query: str, longest: int = MAX_SPAN) -> list[str]:
    """Every 1- to ``longest``-word span of the query, e.g. the entity names it may contain."""
    words = _WORD.findall(query)
    return [" ".join(words[i:i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)]


class GraphExpander:
    """The :class:`~assistant.memory.hooks.Expander` over a :class:`KnowledgeGraph` (see the module)."""

    def __init__(self, graph: KnowledgeGraph, weights: GraphRetrievalWeights | None = None, *,
                 max_hops: int | None = None):
        self.graph = graph
        self.weights = weights or GraphRetrievalWeights()
        self.max_hops = max_hops
        self._idf: dict[str, tuple[tuple[int, int], dict[str, float]]] = {}  # user -> (graph version, N), idf

    # --- seeds and node worth ----------------------------------------------------------------------

    def query_entities(self, user_id: str, query: str, query_vector: np.ndarray | None = None) -> dict[str, float]:
        """Node id -> seed score for the query's entities (names it contains: 1.0; names close in
        meaning: their cosine, with ``similar`` > 0)."""
        found = self.graph.store.find_by_name(user_id, query_spans(query))
        seeds = dict.fromkeys(found.values(), 1.0)
        w = self.weights
        if w.similar > 0 and query_vector is not None:
            ids, matrix = self.graph.views.embeddings(user_id)
            if matrix is not None and len(ids):
                sims = matrix @ np.asarray(query_vector, dtype=np.float32)
                for pos in np.flatnonzero(sims >= w.similar):
                    seeds[ids[pos]] = max(seeds.get(ids[pos], 0.0), float(sims[pos]))
        return seeds

    def idf(self, user_id: str) -> dict[str, float]:
        """Node id -> IDF over the user's memories, in [0, 1] (hubs such as the speakers near 0)."""
        total = self.graph.memory.count(user_id)
        key = (self.graph.views.version(user_id), total)
        cached = self._idf.get(user_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        snap = self.graph.views.snapshot(user_id)
        scale = math.log(total + 1) or 1.0
        idf = {node: max(math.log((total + 1) / (int(m) + 1)), 0.0) / scale
               for node, m in zip(snap.ids, snap.mentions, strict=True)}
        self._idf[user_id] = (key, idf)
        return idf

    # --- the expander ------------------------------------------------------------------------------

    def expand(self, user_id: str, query: str, query_vector: np.ndarray, hits: list[ScoredMemory],
               limit: int) -> list[ScoredMemory]:
        w = self.weights
        user = str(user_id)
        if w.graph <= 0 and w.entity <= 0 and w.speaker <= 0:
            return hits[:limit]
        idf = self.idf(user)
        named = self.query_entities(user, query, query_vector)
        speakers = {normalise_name(n) for n in self.graph.views.names(user, list(named)).values()} if (
            w.speaker > 0) else set()
        seeds = {n: s * idf.get(n, 0.0) for n, s in named.items()}
        if w.seed_hits > 0 and hits:
            top = hits[: w.seed_hits]
            best = max(h.score for h in top) or 1.0
            for memory_id, nodes in self.graph.nodes_of_memories(user, [h.memory.id for h in top]).items():
                score = next(h.score for h in top if h.memory.id == memory_id) / best
                for node in nodes:
                    seeds[node] = max(seeds.get(node, 0.0), score * idf.get(node, 0.0))
        seeds = {n: s for n, s in seeds.items() if s > 0}
        if not seeds and not named:
            return hits[:limit]
        hops = min(w.hops, self.max_hops) if self.max_hops is not None else w.hops
        active = (self.graph.neighbours(user, seeds, hops=hops) if hops > 0 else seeds) if w.graph > 0 else {}
        worth = {n: a * idf.get(n, 0.0) for n, a in active.items()}
        by_id = {h.memory.id: h for h in hits}
        strongest = sorted((n for n in worth if worth[n] > 0), key=lambda n: -worth[n])[: w.expand_nodes]
        linked = self.graph.memories_of_nodes(user, strongest) if w.expand > 0 else {}
        new_ids = list(dict.fromkeys(m for n in strongest for m in linked.get(n, ()) if m not in by_id))
        candidates = list(by_id) + new_ids
        mentions = self.graph.nodes_of_memories(user, candidates)
        g = {m: sum(worth.get(n, 0.0) for n in mentions.get(m, ())) for m in candidates}
        if new_ids:  # the best-linked new memories, at most ``expand``
            new_ids = sorted(new_ids, key=lambda m: -g[m])[: w.expand]
        top_g = max(g.values(), default=0.0) or 1.0
        total = sum(named.values()) or 1.0
        for m in candidates:  # the graph term, then the share of the query's entities
            g[m] = w.graph * g[m] / top_g + w.entity * sum(named.get(n, 0.0) for n in mentions.get(m, ())) / total
        dense = self._cosines(user, new_ids, query_vector)
        params = self.graph.memory.params_for(user)  # the user's tuned weights, if any
        hybrid_dense = params.hybrid.dense
        now = self.graph.memory.clock()
        out: list[ScoredMemory] = []
        def said(memory: Memory) -> float:
            speaker = passage_of(memory).speaker if speakers else None
            return w.speaker if speaker and normalise_name(speaker) in speakers else 0.0

        for hit in hits:
            score = hit.score + g.get(hit.memory.id, 0.0) + said(hit.memory)
            out.append(self._rescored(hit, score, now, params.weights))
        for memory_id, cosine in dense.items():
            try:
                memory = self.graph.memory.get(user, memory_id)
            except Exception:  # deleted meanwhile
                continue
            if memory.memory_type == MemoryType.QUARANTINED:
                continue
            base = hybrid_dense * cosine
            hit = ScoredMemory(memory, cosine, 0.0, 0.0, 0.0, base, base)
            out.append(self._rescored(hit, base + g[memory_id] + said(memory), now, params.weights))
        out.sort(key=lambda h: -h.score)
        return out[:limit]

    def _cosines(self, user: str, memory_ids: Sequence[str], query_vector: np.ndarray) -> dict[str, float]:
        if not memory_ids:
            return {}
        marks = ",".join("?" * len(memory_ids))
        rows = self.graph.db.query(f"SELECT id, embedding FROM memories WHERE user_id = ? AND id IN ({marks}) "
                                   f"AND memory_type != ?", (user, *memory_ids, MemoryType.QUARANTINED.value))
        q = np.asarray(query_vector, dtype=np.float32)
        return {r["id"]: float(np.frombuffer(r["embedding"], dtype=np.float32) @ q) for r in rows}

    def _rescored(self, hit: ScoredMemory, score: float, now: float, weights: RelevanceWeights) -> ScoredMemory:
        memory = hit.memory
        hours = hours_between(memory.accessed_at, now) if memory.accessed_at else 0.0
        fresh = float(freshness(hours))
        rel = float(relevance(score, memory.importance, hours, weights))
        if memory.memory_type == MemoryType.ARCHIVED:
            rel *= ARCHIVED_FACTOR
        return dataclasses.replace(hit, score=score, relevance=rel, freshness=fresh)


def attach_graph(store: MemoryStore, user_id: str, extractor: Extractor | None = None,
                 weights: GraphRetrievalWeights | None = None) -> KnowledgeGraph:
    """Build the knowledge graph of ``user_id``'s stored memories (``rules`` extractor unless given;
    default settings) and attach its expander to ``store`` (mode ``hybrid+graph``). For evaluation
    (benchmarks/locomo_recall.py, notebook 07): the graph is built once, not kept up to date."""
    from assistant.config import KnowledgeGraphSettings, KnowledgeVisualizationSettings, MemorySettings
    from assistant.graph.extract.rules import RulesExtractor
    from assistant.graph.service import KnowledgeGraph  # noqa: F811 - at run time, not only for typing

    graph = KnowledgeGraph(store.db, store.sealer, store, extractor or RulesExtractor(), KnowledgeGraphSettings(),
                           MemorySettings(), KnowledgeVisualizationSettings(), clock=store.clock)
    graph.backfill(user_id)
    store.expander = GraphExpander(graph, weights or GraphRetrievalWeights())
    return graph
