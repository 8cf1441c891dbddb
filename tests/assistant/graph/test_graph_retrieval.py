"""Graph-aware retrieval (assistant/graph/retrieval.py): the GraphExpander on a real SQLite file with the
hashing embedder and the scripted extractor (capitalised words become entities)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from assistant.config import KnowledgeGraphSettings, KnowledgeVisualizationSettings, MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.graph.retrieval import GraphExpander, GraphRetrievalWeights, query_spans
from assistant.graph.service import KnowledgeGraph
from assistant.memory.records import HybridWeights
from assistant.memory.store import MemoryStore, NewMemory
from assistant.storage.db import Database
from assistant.testing.graph import ScriptedExtractor

USER = "alice"
MEMORIES = [
    "On 8 May 2023, Ada said: Pixel the kitten loves the Harbour garden.",  # 0
    "On 8 May 2023, Ben said: Ada, the Harbour clinic is very kind.",  # 1
    "On 2 June 2023, Ada said: I took Pixel to the vet yesterday.",  # 2
    "On 2 June 2023, Ben said: I ran the Riverside marathon.",  # 3
    "On 3 June 2023, Ben said: Quiet day at home.",  # 4
]


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[MemoryStore, KnowledgeGraph, list[str]]]:
    db = Database(tmp_path / "assistant.db")
    sealer = open_sealer(db, tmp_path / "memory.key")
    memory = MemoryStore(db, sealer, HashingEmbedder(), MemorySettings(embedding_backend="hashing"),
                         hybrid=HybridWeights(context=0.0))
    graph = KnowledgeGraph(db, sealer, memory, ScriptedExtractor(), KnowledgeGraphSettings(), MemorySettings(),
                           KnowledgeVisualizationSettings())
    memory.listeners.append(graph)
    ids = memory.add_many(USER, [NewMemory(t) for t in MEMORIES])
    assert graph.wait_idle()
    yield memory, graph, ids
    graph.close()
    db.close()


def node(graph: KnowledgeGraph, name: str) -> str:
    (found,) = graph.store.find_by_name(USER, [name]).values()
    return found


def test_query_spans() -> None:
    assert query_spans("Where is Ada's kitten?", longest=2) == [
        "Where", "is", "Ada's", "kitten", "Where is", "is Ada's", "Ada's kitten"]
    assert query_spans("") == []


def test_query_entities_are_the_nodes_the_query_names(setup) -> None:  # noqa: ANN001
    _, graph, _ = setup
    expander = GraphExpander(graph)
    seeds = expander.query_entities(USER, "what does pixel like, and who is ADA?")
    assert seeds == {node(graph, "Pixel"): 1.0, node(graph, "Ada"): 1.0}
    assert expander.query_entities(USER, "nothing known here") == {}


def test_idf_damps_the_nodes_every_memory_mentions(setup) -> None:  # noqa: ANN001
    _, graph, _ = setup
    idf = GraphExpander(graph).idf(USER)
    # the scripted extractor's capitalised words: June in 3 memories, Harbour in 2, Riverside in one
    assert idf[node(graph, "Riverside")] > idf[node(graph, "Harbour")] > idf[node(graph, "June")] > 0.0
    assert all(0.0 <= v <= 1.0 for v in idf.values())


def test_a_memory_linked_through_the_query_entity_joins_the_hits(setup) -> None:  # noqa: ANN001
    memory, graph, ids = setup
    expander = GraphExpander(graph, GraphRetrievalWeights(graph=1.0, hops=0, expand=10))
    vector = memory.embedder.embed(["Riverside"])[0]
    out = expander.expand(USER, "Riverside", vector, [], 10)
    assert [h.memory.id for h in out] == [ids[3]]
    (hit,) = out
    assert hit.score == pytest.approx(HybridWeights(context=0.0).dense * hit.similarity + 1.0)
    assert hit.relevance > 0 and hit.fused == pytest.approx(HybridWeights(context=0.0).dense * hit.similarity)
    # expand = 0: nothing new comes in
    assert GraphExpander(graph, GraphRetrievalWeights(graph=1.0, hops=0, expand=0)).expand(
        USER, "Riverside", vector, [], 10) == []


def test_hits_are_reranked_by_the_graph_and_the_speaker(setup) -> None:  # noqa: ANN001
    memory, graph, ids = setup
    question = "What does Ada say about the Harbour?"
    hits = memory.search(USER, question, 5, mode="hybrid", rank_by="similarity")
    off = GraphExpander(graph, GraphRetrievalWeights(graph=0.0, entity=0.0, speaker=0.0))
    vector = memory.embedder.embed([question])[0]
    assert off.expand(USER, question, vector, hits, 5) == hits[:5]
    speaker = GraphExpander(graph, GraphRetrievalWeights(graph=0.0, speaker=0.5, expand=0))
    by_id = {h.memory.id: h for h in speaker.expand(USER, question, vector, hits, 5)}
    plain = {h.memory.id: h for h in hits}
    for i in (0, 2):  # said by Ada
        assert by_id[ids[i]].score == pytest.approx(plain[ids[i]].score + 0.5)
    assert by_id[ids[1]].score == pytest.approx(plain[ids[1]].score)  # Ben said it (Ada is named in it)
    entity = GraphExpander(graph, GraphRetrievalWeights(graph=0.0, entity=0.4, speaker=0.0, expand=0))
    by_id = {h.memory.id: h for h in entity.expand(USER, question, vector, hits, 5)}
    # memory 1 mentions Ada and Harbour (all of the query's entities), 0 only Harbour (the scripted
    # extractor does not make the speaker an entity), 2 neither
    assert by_id[ids[1]].score == pytest.approx(plain[ids[1]].score + 0.4)
    assert by_id[ids[0]].score == pytest.approx(plain[ids[0]].score + 0.2)
    assert by_id[ids[2]].score == pytest.approx(plain[ids[2]].score)


def test_search_mode_hybrid_graph_uses_the_expander(setup) -> None:  # noqa: ANN001
    memory, graph, ids = setup
    question = "Riverside"
    without = memory.search(USER, question, 2, mode="hybrid+graph", rank_by="similarity")
    assert [h.memory.id for h in without] == [h.memory.id for h in memory.search(USER, question, 2, mode="hybrid",
                                                                                  rank_by="similarity")]
    memory.expander = GraphExpander(graph, GraphRetrievalWeights(graph=1.0, speaker=0.3))
    found = memory.search(USER, question, 2, mode="hybrid+graph", rank_by="similarity")
    assert len(found) == 2 and found[0].memory.id == ids[3]
    assert found[0].score >= found[1].score
    by_relevance = memory.search(USER, question, 5, mode="hybrid+graph", rank_by="relevance")
    assert [h.relevance for h in by_relevance] == sorted((h.relevance for h in by_relevance), reverse=True)


def test_a_quarantined_memory_is_never_brought_back(setup) -> None:  # noqa: ANN001
    memory, graph, ids = setup
    memory.quarantine(USER, ids[3], "test")
    assert graph.wait_idle()
    memory.expander = GraphExpander(graph, GraphRetrievalWeights(graph=1.0, hops=1))
    found = memory.search(USER, "Riverside marathon", 5, mode="hybrid+graph", rank_by="similarity")
    assert ids[3] not in {h.memory.id for h in found}
    vector = memory.embedder.embed(["Riverside"])[0]
    # even if the graph still linked it, the expander drops it
    assert ids[3] not in GraphExpander(graph)._cosines(USER, [ids[3]], vector)


def test_other_users_memories_never_come_through_the_graph(setup) -> None:  # noqa: ANN001
    memory, graph, _ = setup
    memory.add_many("bob", [NewMemory("On 1 May 2023, Bob said: Riverside is lovely."),
                            NewMemory("On 1 May 2023, Bob said: Quiet evening.")])
    assert graph.wait_idle()
    expander = GraphExpander(graph, GraphRetrievalWeights(graph=1.0, hops=1))
    vector = memory.embedder.embed(["Riverside"])[0]
    assert {h.memory.user_id for h in expander.expand(USER, "Riverside", vector, [], 10)} == {USER}
    assert {h.memory.user_id for h in expander.expand("bob", "Riverside", vector, [], 10)} == {"bob"}


@pytest.mark.parametrize(("retrieval", "expands"), [("hybrid", False), ("hybrid+graph", True)])
def test_build_graph_attaches_the_expander_for_hybrid_graph(tmp_path: Path, retrieval: str, expands: bool) -> None:
    from assistant.config import Settings
    from assistant.graph.build import build_graph

    settings = Settings(memory={"retrieval": retrieval, "embedding_backend": "hashing"},
                        knowledge_graph={"max_hops": 1})
    db = Database(tmp_path / "assistant.db")
    sealer = open_sealer(db, tmp_path / "memory.key")
    memory = MemoryStore(db, sealer, HashingEmbedder(), settings.memory)
    graph = build_graph(settings, db, sealer, memory, None, extractor=ScriptedExtractor())  # type: ignore[arg-type]
    try:
        assert graph is not None and graph in memory.listeners
        assert isinstance(memory.expander, GraphExpander) is expands
        if expands:
            assert memory.expander.graph is graph and memory.expander.max_hops == 1
    finally:
        graph.close()
        db.close()


def test_default_weights_are_the_cross_validated_ones() -> None:
    w = GraphRetrievalWeights()
    assert w.speaker > 0 and w.graph > 0 and w.hops == 1 and w.seed_hits == 3 and w.entity == 0.0


def test_idf_is_cached_until_the_graph_or_the_memories_change(setup) -> None:  # noqa: ANN001
    memory, graph, _ = setup
    expander = GraphExpander(graph)
    first = expander.idf(USER)
    assert expander.idf(USER) is first
    memory.add_many(USER, [NewMemory("On 4 June 2023, Ben said: Riverside again.")])
    assert graph.wait_idle()
    again = expander.idf(USER)
    assert again is not first and again[node(graph, "Riverside")] < first[node(graph, "Riverside")]
