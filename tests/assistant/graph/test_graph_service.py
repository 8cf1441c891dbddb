"""KnowledgeGraph on a real SQLite file with the hashing embedder and a scripted extractor.

Ingestion after memory writes, entity resolution (name, alias, embedding), bi-temporal
contradictions, removal of a memory's contribution, recall (stability x recall_bonus), the decay
sweep, the cached view (retention filter, as_of, centre + depth, truncation), events, search, and
that no entity name reaches the database file in plaintext.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from assistant.config import KnowledgeGraphSettings, KnowledgeVisualizationSettings, MemorySettings
from assistant.crypto import open_sealer
from assistant.embeddings.hashing import HashingEmbedder
from assistant.errors import NotFoundError
from assistant.graph.service import KnowledgeGraph, passage_of
from assistant.graph.types import ME, RELATED, Entity, Extraction, Fact, GraphEventType, NodeKind
from assistant.graph.view import GraphQuery
from assistant.memory.store import MemoryStore
from assistant.storage.db import Database
from assistant.testing.graph import ScriptedExtractor

T0 = 1_717_200_000.0  # 2024-06-01T00:00:00Z
DAY = 86_400.0
ALICE, BOB = "alice", "bob"

BERLIN = Extraction((Entity(ME, NodeKind.PERSON), Entity("Berlin", NodeKind.PLACE)), (Fact(ME, "lives in", "Berlin"),))
REYKJAVIK = Extraction((Entity(ME, NodeKind.PERSON), Entity("Reykjavik", NodeKind.PLACE)),
                       (Fact(ME, "lives_in", "Reykjavik"),))


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def extractor() -> ScriptedExtractor:
    return ScriptedExtractor({"live in Berlin": BERLIN, "moved to Reykjavik": REYKJAVIK})


@pytest.fixture
def make_graph(tmp_path: Path, clock: Clock, extractor: ScriptedExtractor) -> Iterator[Callable[..., KnowledgeGraph]]:
    made: list[tuple[Database, KnowledgeGraph]] = []

    def make(**settings: object) -> KnowledgeGraph:
        db = Database(tmp_path / "assistant.db")
        sealer = open_sealer(db, tmp_path / "memory.key")
        memory = MemoryStore(db, sealer, HashingEmbedder(), MemorySettings(), clock=clock)
        graph = KnowledgeGraph(db, sealer, memory, extractor, KnowledgeGraphSettings(**settings), MemorySettings(),
                               KnowledgeVisualizationSettings(), clock=clock)
        memory.listeners.append(graph)
        made.append((db, graph))
        return graph

    yield make
    for db, graph in made:
        graph.close()
        db.close()


def ids_by_name(graph: KnowledgeGraph, user: str = ALICE, **query: object) -> dict[str, dict]:
    data = graph.graph(user, GraphQuery(**query) if query else None)
    return {n["name"]: n for n in data["nodes"]}


def test_a_written_memory_is_extracted_in_the_background(make_graph) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Anna met Tom in Paris")
    assert graph.wait_idle()
    nodes = ids_by_name(graph)
    assert set(nodes) == {"Anna", "Tom", "Paris"}
    assert all(n["mention_count"] == 1 and n["retention"] == 1.0 for n in nodes.values())
    assert graph.pending(ALICE) == []


def test_names_resolve_to_one_node_and_mentions_are_recalls(make_graph, clock: Clock) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Anna likes tea")
    graph.wait_idle()
    clock.t += DAY
    graph.memory.add(ALICE, "anna likes coffee too; Anna said so")
    graph.wait_idle()
    anna = ids_by_name(graph)["Anna"]
    assert anna["mention_count"] == 2
    assert anna["recalls"] == 1 and anna["stability"] == pytest.approx(1.5)  # base 1.0 x recall_bonus 1.5


def test_embedding_resolution_adds_an_alias(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph(resolution_threshold=0.5)
    extractor.scripts["first"] = Extraction((Entity("Deutsche Bahn Berlin", NodeKind.ORGANISATION),))
    extractor.scripts["second"] = Extraction((Entity("Deutsche Bahn", NodeKind.ORGANISATION),))
    graph.memory.add(ALICE, "first")
    graph.memory.add(ALICE, "second")
    graph.wait_idle()
    nodes = graph.graph(ALICE)["nodes"]
    assert [(n["name"], n["aliases"]) for n in nodes] == [("Deutsche Bahn Berlin", ["Deutsche Bahn"])]


def test_a_contradiction_invalidates_the_old_fact_and_as_of_shows_the_past(make_graph, clock: Clock) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "I live in Berlin")
    graph.wait_idle()
    clock.t += 10 * DAY
    graph.memory.add(ALICE, "I moved to Reykjavik")
    graph.wait_idle()
    now = graph.graph(ALICE, GraphQuery(min_retention=0.0))
    lives = [e for e in now["edges"] if e["relation"] == "lives_in"]
    names = {n["id"]: n["name"] for n in now["nodes"]}
    assert [names[e["target"]] for e in lives] == ["Reykjavik"]
    before = graph.graph(ALICE, GraphQuery(min_retention=0.0, as_of=T0 + DAY))
    names = {n["id"]: n["name"] for n in before["nodes"]}
    assert {names[e["target"]] for e in before["edges"] if e["relation"] == "lives_in"} == {"Berlin"}
    assert "Reykjavik" not in names.values()  # not known yet then
    [(old, new)] = graph.conflicts(ALICE)
    assert old.invalid_at == T0 + 10 * DAY and old.invalidated_by == new.id
    assert len(old.source_memory_ids) == 1 and len(new.source_memory_ids) == 1
    kinds = [e.type for e in graph.events.history(ALICE)]
    assert kinds.count(GraphEventType.EDGE_INVALIDATED) == 1


def test_a_backfilled_older_fact_is_stored_already_invalidated(make_graph, clock: Clock) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "I moved to Reykjavik")  # the newer fact is extracted first
    graph.wait_idle()
    memory = graph.memory
    clock.t -= 30 * DAY  # an older memory (written earlier, extracted later)
    older = memory.add(ALICE, "I live in Berlin")
    graph.wait_idle()
    [(old, new)] = graph.conflicts(ALICE)
    assert old.source_memory_ids == (older.id,)
    assert old.invalid_at == T0 and old.valid_at == T0 - 30 * DAY


def test_deleting_a_memory_removes_its_contribution_and_restores_what_it_invalidated(make_graph, clock) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "I live in Berlin")
    graph.wait_idle()
    clock.t += DAY
    moved = graph.memory.add(ALICE, "I moved to Reykjavik")
    graph.wait_idle()
    graph.memory.delete(ALICE, moved.id)
    data = graph.graph(ALICE, GraphQuery(min_retention=0.0))
    assert {n["name"] for n in data["nodes"]} == {ME, "Berlin"}
    [edge] = data["edges"]
    assert edge["invalid_at"] is None and edge["relation"] == "lives_in"
    assert GraphEventType.NODE_REMOVED in [e.type for e in graph.events.history(ALICE)]


def test_quarantine_withdraws_the_memory_too(make_graph) -> None:
    graph = make_graph()
    kept = graph.memory.add(ALICE, "Anna met Tom")
    bad = graph.memory.add(ALICE, "Tom met Mallory")
    graph.wait_idle()
    graph.memory.quarantine(ALICE, bad.id, "poisoned")
    assert set(ids_by_name(graph)) == {"Anna", "Tom"}
    assert ids_by_name(graph)["Tom"]["mention_count"] == 1
    assert graph.pending(ALICE) == []  # a quarantined memory is not extracted again
    assert kept.id in {m.id for m in graph.sources(ALICE, ids_by_name(graph)["Tom"]["id"])}


def test_retention_hides_old_nodes_and_the_sweep_publishes_node_decayed_once(make_graph, clock: Clock) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Anna")
    graph.wait_idle()
    clock.t += 2 * DAY  # R = e^(-2/1) = 0.135 >= 0.1: still shown
    assert ids_by_name(graph)["Anna"]["retention"] == pytest.approx(math.exp(-2), abs=1e-4)
    assert graph.sweep() == []
    clock.t += 1 * DAY  # e^(-3) = 0.0498 < 0.1
    assert ids_by_name(graph) == {}
    assert "Anna" in ids_by_name(graph, min_retention=0.0)  # hidden, not deleted
    [event] = graph.sweep()
    assert event.type is GraphEventType.NODE_DECAYED and event.data["retention"] == pytest.approx(0.0498, abs=1e-4)
    assert graph.sweep() == []  # once


def test_retrieval_recalls_what_the_memory_mentions(make_graph, clock: Clock) -> None:
    graph = make_graph()
    memory = graph.memory.add(ALICE, "Anna plays chess")
    graph.wait_idle()
    clock.t += DAY
    graph.memory.touch([memory.id], ALICE)
    graph.wait_idle()
    anna = ids_by_name(graph)["Anna"]
    assert anna["recalls"] == 1 and anna["stability"] == pytest.approx(1.5) and anna["retention"] == 1.0


def test_facts_edges_and_weights(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph()
    pair = Extraction((Entity("Anna"), Entity("Tom")), (Fact("Tom", RELATED, "Anna"),))
    extractor.scripts["pair"] = pair
    graph.memory.add(ALICE, "pair one")
    graph.memory.add(ALICE, "pair two")
    graph.wait_idle()
    [edge] = graph.graph(ALICE)["edges"]
    assert edge["relation"] == RELATED and edge["sources"] == 2 and edge["weight"] == pytest.approx(0.75)
    anna = ids_by_name(graph)["Anna"]["id"]
    assert [f.relation for f in graph.facts(ALICE, anna)] == [RELATED]


def test_limits_center_depth_kind_and_truncation(make_graph, extractor: ScriptedExtractor, clock: Clock) -> None:
    graph = make_graph()
    extractor.scripts["chain"] = Extraction(
        (Entity("A"), Entity("B"), Entity("C"), Entity("D", NodeKind.PLACE)),
        (Fact("A", "knows", "B"), Fact("B", "knows", "C"), Fact("C", "visited", "D")))
    graph.memory.add(ALICE, "chain")
    graph.wait_idle()
    ids = {n: v["id"] for n, v in ids_by_name(graph).items()}
    near = graph.graph(ALICE, GraphQuery(center=ids["A"], depth=1))
    assert {n["name"] for n in near["nodes"]} == {"A", "B"}
    assert {n["name"] for n in graph.graph(ALICE, GraphQuery(center=ids["A"], depth=2))["nodes"]} == {"A", "B", "C"}
    assert [n["name"] for n in graph.graph(ALICE, GraphQuery(kind="place"))["nodes"]] == ["D"]
    capped = graph.graph(ALICE, GraphQuery(limit=2))
    assert capped["truncated"] is True and capped["total_nodes"] == 4 and len(capped["nodes"]) == 2
    assert all(e["source"] in {n["id"] for n in capped["nodes"]} for e in capped["edges"])
    with pytest.raises(NotFoundError):
        graph.graph_json(ALICE, GraphQuery(center="nope"))


def test_users_never_see_each_other(make_graph) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Anna")
    graph.memory.add(BOB, "Boris")
    graph.wait_idle()
    assert set(ids_by_name(graph, ALICE)) == {"Anna"} and set(ids_by_name(graph, BOB)) == {"Boris"}
    anna = ids_by_name(graph, ALICE)["Anna"]["id"]
    with pytest.raises(NotFoundError):
        graph.node(BOB, anna)
    with pytest.raises(NotFoundError):
        graph.graph_json(BOB, GraphQuery(center=anna))
    assert [e.user_id for e in graph.events.history(BOB)] == [BOB]


def test_search_by_name_alias_and_fuzzy(make_graph) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Annabelle visited Reykjavik")
    graph.wait_idle()
    [(node, score), *_] = graph.search(ALICE, "reykjavik")
    assert node.name == "Reykjavik" and score == 1.0
    assert graph.search(ALICE, "Annabel")[0][0].name == "Annabelle"


def test_engine_failure_falls_back(make_graph, extractor: ScriptedExtractor, tmp_path: Path, clock: Clock) -> None:
    graph = make_graph()
    fallback = ScriptedExtractor()
    graph.fallback = fallback
    extractor.fail_next = 1
    graph.memory.add(ALICE, "Anna")
    graph.wait_idle()
    assert fallback.passages == 1 and set(ids_by_name(graph)) == {"Anna"}


def test_backfill_extracts_what_is_missing_with_progress(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph()
    graph.memory.listeners.clear()  # written while the graph was off
    for text in ("Anna", "Tom", "Paris"):
        graph.memory.add(ALICE, text)
    seen: list[int] = []
    report = graph.backfill(ALICE, progress=seen.append, batch=2)
    assert report.memories == 3 and report.nodes_created == 3 and seen == [2, 1]
    assert graph.backfill(ALICE).memories == 0


def test_a_merged_memory_is_extracted_again(make_graph) -> None:
    graph = make_graph()
    memory = graph.memory.add(ALICE, "Anna likes tea")
    graph.wait_idle()
    graph.memory._merge(memory, "Tom likes tea", 0.5, memory.memory_type)
    graph.wait_idle()
    assert set(ids_by_name(graph)) == {"Anna", "Tom"}
    assert ids_by_name(graph)["Anna"]["mention_count"] == 1


def test_no_name_in_plaintext_in_the_database(make_graph, tmp_path: Path) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Zebulon visited Quixotic")
    graph.wait_idle()
    graph.graph(ALICE)
    graph.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("assistant.db*"))
    assert b"Zebulon" not in raw and b"zebulon" not in raw and b"Quixotic" not in raw


def test_events_are_sealed_numbered_and_resumable(make_graph) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Anna met Tom")
    graph.wait_idle()
    events = graph.events.history(ALICE)
    assert [e.seq for e in events] == [1, 2]
    assert [e.type for e in events] == [GraphEventType.NODE_CREATED] * 2
    assert [e.data["name"] for e in graph.events.history(ALICE, after=1)] == ["Tom"]


def test_passage_of_a_chat_log_memory_names_the_speaker() -> None:
    class M:
        id = "m"
        content = "On 8 May 2023, Caroline said: I went to a support group."

    p = passage_of(M())  # type: ignore[arg-type]
    assert p.speaker == "Caroline" and p.text == "On 8 May 2023: I went to a support group."
    M.content = "I live in Berlin"
    assert passage_of(M()).speaker is None  # type: ignore[arg-type]


def test_the_rendered_json_is_valid_and_complete(make_graph) -> None:
    graph = make_graph()
    graph.memory.add(ALICE, "Anna met Tom")
    graph.wait_idle()
    body = orjson.loads(graph.graph_json(ALICE))
    assert set(body) == {"nodes", "edges", "total_nodes", "total_edges", "returned_nodes", "returned_edges",
                         "truncated", "as_of", "min_retention"}
    assert set(body["nodes"][0]) == {"id", "name", "kind", "aliases", "mention_count", "recalls", "stability",
                                     "created_at", "last_seen", "retention"}


# --- what consolidation (dream mode) does to the graph ------------------------------------------------


def test_merge_nodes_moves_mentions_edges_and_names(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph()
    extractor.scripts["one"] = Extraction((Entity("Bob"), Entity("Paris")), (Fact("Bob", "visited", "Paris"),))
    extractor.scripts["two"] = Extraction((Entity("Robert"), Entity("Paris")), (Fact("Robert", "visited", "Paris"),
                                                                               Fact("Robert", "knows", "Bob")))
    graph.memory.add(ALICE, "one")
    graph.memory.add(ALICE, "two")
    graph.wait_idle()
    ids = {n: v["id"] for n, v in ids_by_name(graph).items()}
    event = graph.merge_nodes(ALICE, ids["Bob"], ids["Robert"])
    assert event.type is GraphEventType.NODE_MERGED and event.data["merged_id"] == ids["Robert"]
    data = graph.graph(ALICE)
    [bob] = [n for n in data["nodes"] if n["name"] == "Bob"]
    assert bob["aliases"] == ["Robert"] and bob["mention_count"] == 2 and len(data["nodes"]) == 2
    [visited] = data["edges"]  # the duplicate fact joined; "Robert knows Bob" became a self-loop and went
    assert visited["sources"] == 2
    assert graph.store.find_by_name(ALICE, ["robert"]) == {"robert": ids["Bob"]}
    assert graph.merge_nodes(ALICE, ids["Bob"], ids["Robert"]) is None  # replayed: nothing


def test_prune_reweight_connect_and_weak_edges(make_graph, extractor: ScriptedExtractor, clock: Clock) -> None:
    graph = make_graph()
    extractor.scripts["pair"] = Extraction((Entity("Anna"), Entity("Tom")), (Fact("Anna", RELATED, "Tom"),))
    graph.memory.add(ALICE, "pair")
    graph.wait_idle()
    ids = {n: v["id"] for n, v in ids_by_name(graph).items()}
    [edge] = graph.graph(ALICE)["edges"]
    assert graph.set_edge_weight(ALICE, edge["id"], 0.1) == 0.5
    clock.t += DAY
    [weak] = graph.weak_edges(ALICE, below=0.2, limit=20)  # 0.1 x e^-1
    assert weak.id == edge["id"]
    assert graph.prune_edge(ALICE, edge["id"]).data == {"id": edge["id"], "reason": "pruned"}
    assert graph.prune_edge(ALICE, edge["id"]) is None
    made = graph.connect(ALICE, ids["Anna"], "friend_of", ids["Tom"], 0.6)
    assert graph.connect(ALICE, ids["Anna"], "friend_of", ids["Tom"]) == made
    graph.remove(ALICE, [])  # a dream edge has no source memory and is not pruned as an orphan
    other = graph.memory.add(ALICE, "Zed")
    graph.wait_idle()
    graph.memory.delete(ALICE, other.id)
    assert [e["relation"] for e in graph.graph(ALICE)["edges"]] == ["friend_of"]
    with pytest.raises(NotFoundError):
        graph.set_edge_weight(BOB, made, 0.5)


def test_a_memory_deleted_during_extraction_is_skipped_alone(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph()
    graph.memory.listeners.clear()
    gone = graph.memory.add(ALICE, "Gone")
    kept = graph.memory.add(ALICE, "Kept")
    original = extractor.extract

    def delete_then_extract(passages):  # noqa: ANN001, ANN202
        graph.memory.delete(ALICE, gone.id)
        return original(passages)

    extractor.extract = delete_then_extract  # type: ignore[method-assign]
    report = graph.ingest(ALICE, [gone.id, kept.id])
    assert report.memories == 1 and set(ids_by_name(graph)) == {"Kept"}
    assert graph.counters.ingest_errors == 1
    assert [e.data["name"] for e in graph.events.history(ALICE)] == ["Kept"]


def test_retrieval_helpers_mentions_and_neighbours(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph()
    extractor.scripts["chain"] = Extraction((Entity("A"), Entity("B"), Entity("C")),
                                            (Fact("A", "knows", "B"), Fact("B", RELATED, "C")))
    memory = graph.memory.add(ALICE, "chain")
    graph.wait_idle()
    ids = {n: v["id"] for n, v in ids_by_name(graph).items()}
    assert sorted(graph.nodes_of_memories(ALICE, [memory.id])[memory.id]) == sorted(ids.values())
    assert graph.memories_of_nodes(ALICE, [ids["A"]]) == {ids["A"]: [memory.id]}
    assert graph.nodes_of_memories(BOB, [memory.id]) == {}
    one = graph.neighbours(ALICE, {ids["A"]: 1.0}, hops=1)
    assert one == {ids["A"]: 1.0, ids["B"]: 1.0}
    two = graph.neighbours(ALICE, {ids["A"]: 1.0}, hops=2)
    assert two[ids["C"]] == pytest.approx(0.5)  # 1.0 x 1.0 (knows) x 0.5 (co-occurrence weight)


def test_stability_is_capped_and_dates_never_resolve_by_embedding(make_graph, extractor: ScriptedExtractor) -> None:
    graph = make_graph(max_stability_days=2.0, resolution_threshold=0.0)
    extractor.scripts["day"] = Extraction((Entity("27 June 2023", NodeKind.DATE),))
    extractor.scripts["other"] = Extraction((Entity("3 July 2023", NodeKind.DATE),))
    for _ in range(3):
        graph.memory.add(ALICE, "day")
    graph.memory.add(ALICE, "other")
    graph.wait_idle()
    nodes = ids_by_name(graph)
    assert set(nodes) == {"27 June 2023", "3 July 2023"}  # any cosine >= 0.0 would have merged them
    assert nodes["27 June 2023"]["stability"] == 2.0 and nodes["27 June 2023"]["recalls"] == 2


def test_the_view_is_built_from_one_state_while_extraction_writes(make_graph, monkeypatch) -> None:
    """CI once saw an edge whose node was written between the view's node and edge reads (KeyError)."""
    graph = make_graph()
    graph.memory.add(ALICE, "Anna met Tom in Paris")
    graph.wait_idle()
    store = graph.views.store
    read_nodes = store.node_rows

    def nodes_then_a_write(user_id: str, ids=None) -> list[dict]:  # noqa: ANN001
        rows = read_nodes(user_id, ids)
        if ids is None:
            monkeypatch.setattr(store, "node_rows", read_nodes)
            writer = threading.Thread(target=graph.memory.add, args=(ALICE, "I live in Berlin"))
            writer.start()  # another thread writes new nodes and an edge, committed now
            writer.join()
            assert graph.wait_idle()
        return rows

    monkeypatch.setattr(store, "node_rows", nodes_then_a_write)
    graph.views.changed(ALICE)
    assert set(ids_by_name(graph)) == {"Anna", "Tom", "Paris"}  # the state before the write, whole
    assert {"Berlin", "Anna"} <= set(ids_by_name(graph))  # the write changed the graph: rebuilt
