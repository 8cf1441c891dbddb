"""NREM steps with the hashing embedder on a real SQLite file: the merge threshold, archive flags,
deduplication, archive at floor, edge review, node merges, decay; idempotent appliers and replay."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from assistant.dream import nrem
from assistant.dream.nrem_graph import MergeNodes, ReviewEdges
from assistant.dream.types import EntryStatus, Operation, Phase, SessionStatus
from assistant.graph.types import NodeKind
from assistant.memory import pairs
from assistant.memory.consolidate import normalise_text
from assistant.memory.types import MemoryType
from assistant.services import Services

DAY = 86_400.0


def unit(*parts: tuple[int, float], dim: int = 384) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    for axis, value in parts:
        v[axis] = value
    return v / np.linalg.norm(v)


def at_cosine(c: float, axis: int) -> np.ndarray:
    """A unit vector at cosine ``c`` from axis 0 (the rest on ``axis``)."""
    return unit((0, c), (axis, float(np.sqrt(1 - c * c))))


@pytest.fixture
def dreaming(make_settings, make_services) -> Callable[..., Services]:
    def make(steps: list, graph: bool = False, **nrem_settings) -> Services:
        settings = make_settings(dream={"max_cycles": 1, "nrem": nrem_settings},
                                 knowledge_graph={"enabled": graph})
        services = make_services(settings)
        services.dream.nrem_steps, services.dream.rem_steps = steps, []
        services.dream.deps.sanitation = None  # NREM steps alone (sanitation's own tests run it between)
        return services

    return make


def types_of(services: Services, user: str = "u1") -> dict[str, str]:
    return {m.content: m.memory_type.value for m in services.memory.list(user, limit=1000)}


def test_cosine_086_merges_and_084_does_not(dreaming) -> None:
    services = dreaming([nrem.Consolidate()])
    memory = services.memory
    a = memory.add("u1", "I live in Lisbon.", memory_type="context", importance=0.4, tags=["home"],
                   conversation_id="c1", embedding=unit((0, 1.0)))
    b = memory.add("u1", "I moved to Lisbon last year.", memory_type="fact", importance=0.7, tags=["move"],
                   conversation_id="c1", embedding=at_cosine(0.86, 1))
    c = memory.add("u1", "I like Lisbon's trams.", embedding=at_cosine(0.84, 2))
    memory.touch([a.id, b.id])
    session = services.dream.trigger("u1", background=False)
    assert session.status is SessionStatus.COMPLETED and session.counts == {"MemoryConsolidated": 1}
    [entry], _ = services.dream.journal("u1", session.id)
    assert entry.operation is Operation.MEMORY_CONSOLIDATED and entry.status is EntryStatus.APPLIED
    assert entry.details["merged_from"] == [a.id, b.id]
    merged = memory.get("u1", entry.details["memory_id"])
    assert merged.content == "I live in Lisbon. I moved to Lisbon last year."
    assert merged.memory_type is MemoryType.FACT and merged.importance == pytest.approx(0.7)
    assert merged.tags == ["home", "move"] and merged.conversation_id == "c1" and merged.access_count == 2
    for original in (a, b):
        got = memory.get("u1", original.id)
        assert got.memory_type is MemoryType.ARCHIVED and got.archived_by_session == session.id
        assert got.archived_at and got.original_memory_type == original.memory_type
    assert memory.get("u1", c.id).memory_type is MemoryType.CONTEXT  # 0.84: left alone
    assert set(entry.affected_memory_ids) == {a.id, b.id, merged.id}
    assert [m["id"] for m in entry.before_snapshot["memories"]] == [a.id, b.id]
    assert all(len(m["preview"]) <= 200 for m in entry.before_snapshot["memories"])
    assert entry.after_snapshot["memory"]["id"] == merged.id
    assert services.dream.counters.snapshot()["memories_consolidated"] == 1
    assert services.dream.counters.snapshot()["memories_archived"] == 2
    # the merged memory is found by search; a second night changes nothing
    assert memory.search("u1", "Lisbon moved", limit=1)[0].memory.id == merged.id
    again = services.dream.trigger("u1", background=False)
    assert again.counts == {}


def test_without_archive_consolidated_the_originals_are_deleted(dreaming) -> None:
    services = dreaming([nrem.Consolidate()], archive_consolidated=False)
    memory = services.memory
    memory.add("u1", "I have a cat.", embedding=unit((0, 1.0)))
    memory.add("u1", "I own a cat named Tom.", embedding=at_cosine(0.9, 1))
    services.dream.trigger("u1", background=False)
    [merged] = memory.list("u1")
    assert merged.content == "I have a cat. I own a cat named Tom." and memory.count("u1") == 1


def test_skipped_types_are_never_consolidated(dreaming) -> None:
    services = dreaming([nrem.Consolidate()])
    memory = services.memory
    memory.add("u1", "I live in Lisbon.", embedding=unit((0, 1.0)))
    other = memory.add("u1", "I live in Lisbon now.", embedding=at_cosine(0.95, 1))
    memory.quarantine("u1", other.id, "test")
    session = services.dream.trigger("u1", background=False)
    assert session.counts == {} and memory.count("u1") == 2


def test_an_entry_applied_twice_writes_one_merged_memory(dreaming) -> None:
    services = dreaming([nrem.Consolidate()])
    memory = services.memory
    memory.add("u1", "Coffee at nine.", embedding=unit((0, 1.0)))
    memory.add("u1", "Coffee every day at nine.", embedding=at_cosine(0.9, 1))
    session = services.dream.trigger("u1", background=False)
    [entry], _ = services.dream.journal("u1", session.id)
    result = nrem.apply_consolidate(services.dream.deps, entry)
    assert result.count == 0 and result.details["replayed"] is True
    assert memory.count("u1") == 3 and sum(m.memory_type is MemoryType.ARCHIVED for m in memory.list("u1")) == 2


def test_a_crash_between_journal_and_apply_is_completed_by_recover(dreaming) -> None:
    services = dreaming([nrem.Consolidate()])
    memory, dream = services.memory, services.dream
    a = memory.add("u1", "Coffee at nine.", embedding=unit((0, 1.0)))
    b = memory.add("u1", "Coffee every day at nine.", embedding=at_cosine(0.9, 1))
    store = dream.store
    session = store.update_session(store.create_session("u1", 1, "manual"), status=SessionStatus.RUNNING,
                                   started=True, current_cycle=1)
    key = f"consolidate:{nrem.digest([a.id, b.id])}"
    details = {"memory_id": nrem.merged_id("u1", key), "merged_from": [a.id, b.id], "archive": True}
    pending = store.begin_entry(session, 1, Phase.NREM, Operation.MEMORY_CONSOLIDATED, key, details)
    assert memory.count("u1") == 2  # journaled, not applied: the process died here
    [failed] = dream.recover()
    assert failed.status is SessionStatus.FAILED and "1 pending operation(s) completed" in failed.reason
    assert store.entry("u1", pending.id).status is EntryStatus.APPLIED
    merged = memory.get("u1", details["memory_id"])
    assert merged.content == "Coffee at nine. Coffee every day at nine."
    assert {memory.get("u1", i).archived_by_session for i in (a.id, b.id)} == {session.id}
    # the next night skips the applied key: nothing is merged twice
    assert dream.trigger("u1", background=False).counts == {}


def test_duplicates_are_archived_and_the_kept_one_gains_their_access_counts(dreaming) -> None:
    services = dreaming([nrem.Deduplicate()])
    memory = services.memory
    first = memory.add("u1", "I live in Lisbon.")
    used = memory.add("u1", "i live in   lisbon")
    third = memory.add("u1", "I LIVE IN LISBON!!")
    other = memory.add("u1", "I live in Porto.")
    memory.touch([used.id])
    memory.touch([used.id, third.id])
    session = services.dream.trigger("u1", background=False)
    assert session.counts == {"MemoryDeduplicated": 2}
    assert memory.get("u1", used.id).memory_type is MemoryType.CONTEXT  # most used: kept
    assert memory.get("u1", used.id).access_count == 3
    for gone in (first, third):
        assert memory.get("u1", gone.id).memory_type is MemoryType.ARCHIVED
        assert memory.get("u1", gone.id).archived_by_session == session.id
    assert memory.get("u1", other.id).memory_type is MemoryType.CONTEXT
    [entry], _ = services.dream.journal("u1", session.id)
    assert entry.details["kept"] == used.id and set(entry.details["duplicates"]) == {first.id, third.id}
    assert nrem.apply_dedupe(services.dream.deps, entry).count == 0  # replay: nothing more
    assert memory.get("u1", used.id).access_count == 3


def test_normalised_text() -> None:
    assert normalise_text("  I live in\tLisbon!! ") == normalise_text("i live in lisbon") == "i live in lisbon"
    assert normalise_text("Straße") == normalise_text("STRASSE")


def test_memories_at_their_floor_and_unused_are_archived(dreaming) -> None:
    services = dreaming([nrem.ArchiveAtFloor()])
    memory, db = services.memory, services.memory.db
    old = services.dream.deps.clock() - 40 * DAY
    floor_ctx = memory.add("u1", "a context at its floor", importance=0.1)
    floor_fact = memory.add("u1", "a fact at its floor", memory_type="fact", importance=0.3)
    above = memory.add("u1", "a context above its floor", importance=0.2)
    recent = memory.add("u1", "a context at its floor, used lately", importance=0.1)
    with db.transaction():
        db.execute("UPDATE memory_scores SET accessed_ts = ? WHERE memory_rowid IN (SELECT rowid FROM memories "
                   "WHERE id IN (?, ?, ?))", (old, floor_ctx.id, floor_fact.id, above.id))
    session = services.dream.trigger("u1", background=False)
    assert session.counts == {"MemoryArchived": 2}
    got = {m.id: m for m in memory.list("u1")}
    assert got[floor_ctx.id].memory_type is MemoryType.ARCHIVED and got[floor_ctx.id].archived_by_session == session.id
    assert got[floor_fact.id].original_memory_type is MemoryType.FACT
    assert got[above.id].memory_type is MemoryType.CONTEXT and got[recent.id].memory_type is MemoryType.CONTEXT
    assert services.dream.counters.snapshot()["memories_archived"] == 2


def test_decay_runs_once_per_session_with_the_dream_rate(dreaming) -> None:
    services = dreaming([nrem.Decay()], decay_rate=0.5)
    memory, db = services.memory, services.memory.db
    m = memory.add("u1", "something said", importance=0.8)
    with db.transaction():
        db.execute("UPDATE memory_scores SET decay_ts = decay_ts - ?", (DAY,))
    session = services.dream.trigger("u1", background=False)
    [entry], _ = services.dream.journal("u1", session.id)
    assert entry.operation is Operation.DECAY_APPLIED and entry.details["processed"] == 1
    assert entry.details["changed"] == 1 and entry.after_snapshot["changes"][0]["id"] == m.id
    assert memory.get("u1", m.id).importance == pytest.approx(0.4, abs=1e-3)  # 0.8 x 0.5 after one day
    assert nrem.apply_decay(services.dream.deps, entry).count == 0  # a replay does not decay again
    assert memory.get("u1", m.id).importance == pytest.approx(0.4, abs=1e-3)


def test_weak_edges_are_pruned_unless_used(dreaming) -> None:
    services = dreaming([ReviewEdges()], graph=True)
    memory, graph = services.memory, services.graph
    kept = memory.add("u1", "Anna met Tom in Paris.")
    dropped = memory.add("u1", "Boris met Clara in Oslo.")
    assert graph.wait_idle()
    edges = {e.id: e for e in graph.weak_edges("u1", 2.0, 100)}
    assert edges
    for edge_id in edges:
        graph.set_edge_weight("u1", edge_id, 0.05)
    memory.touch([kept.id])
    session = services.dream.trigger("u1", background=False)
    by_op: dict[str, set[str]] = {}
    for entry in services.dream.journal("u1", session.id)[0]:
        assert entry.status is EntryStatus.APPLIED
        by_op.setdefault(entry.operation.value, set()).add(entry.details["edge_id"])
    sourced = {e.id: set(e.source_memory_ids) for e in edges.values()}
    assert by_op["EdgeWeightUpdated"] == {e for e, s in sourced.items() if kept.id in s}
    assert by_op["EdgePruned"] == {e for e, s in sourced.items() if s == {dropped.id}}
    remaining = {e.id: e.weight for e in graph.weak_edges("u1", 2.0, 100)}
    assert set(remaining) == by_op["EdgeWeightUpdated"]
    assert all(w == pytest.approx(0.15) for w in remaining.values())


def test_the_edge_review_stops_at_its_cap(dreaming) -> None:
    services = dreaming([ReviewEdges()], graph=True, max_edge_reviews_per_cycle=1)
    services.memory.add("u1", "Anna met Tom in Paris.")
    assert services.graph.wait_idle()
    for edge in services.graph.weak_edges("u1", 2.0, 100):
        services.graph.set_edge_weight("u1", edge.id, 0.05)
    session = services.dream.trigger("u1", background=False)
    assert sum(session.counts.values()) == 1


def test_duplicate_nodes_are_merged_up_to_the_cap(dreaming) -> None:
    services = dreaming([MergeNodes()], graph=True)
    graph = services.graph
    services.dream.settings.rem.max_node_merges_per_cycle = 1
    now = graph.clock()
    with graph.db.transaction() as db:
        a = graph.store.insert_node(db, "u1", "Anna Smith", NodeKind.PERSON, now, 1.0, unit((0, 1.0)))
        b = graph.store.insert_node(db, "u1", "Anna Smyth", NodeKind.PERSON, now, 1.0, at_cosine(0.99, 1))
        place = graph.store.insert_node(db, "u1", "Anna Smith Hall", NodeKind.PLACE, now, 1.0, at_cosine(0.99, 2))
        c = graph.store.insert_node(db, "u1", "Tom", NodeKind.PERSON, now, 1.0, unit((5, 1.0)))
        d = graph.store.insert_node(db, "u1", "Tom", NodeKind.PERSON, now, 1.0, unit((6, 1.0)))
        # never one entity by embedding: dates, and names whose numbers differ
        graph.store.insert_node(db, "u1", "17 July 2023", NodeKind.DATE, now, 1.0, unit((9, 1.0)))
        graph.store.insert_node(db, "u1", "17 August 2023", NodeKind.DATE, now, 1.0,
                                unit((9, 0.99), (10, 0.141)))
        graph.store.insert_node(db, "u1", "Room 12", NodeKind.PLACE, now, 1.0, unit((11, 1.0)))
        graph.store.insert_node(db, "u1", "Room 13", NodeKind.PLACE, now, 1.0, unit((11, 0.99), (12, 0.141)))
    first = services.dream.trigger("u1", background=False)
    assert first.counts == {"NodeMerged": 1}
    second = services.dream.trigger("u1", background=False)
    assert second.counts == {"NodeMerged": 1}
    left = {r["id"] for r in graph.store.node_rows("u1")}
    assert place in left and len(left & {a, b}) == 1 and len(left & {c, d}) == 1 and len(left) == 7
    assert services.dream.trigger("u1", background=False).counts == {}


def test_near_pairs_finds_the_exact_pairs_above_the_threshold() -> None:
    rng = np.random.default_rng(3)
    n, dim = 6000, 64
    topics = rng.normal(size=(40, dim))
    base = topics[rng.integers(0, 40, n)] + rng.normal(size=(n, dim)) * 1.5
    planted = base[:300] + rng.normal(size=(300, dim)) * 0.15
    v = np.vstack([base, planted]).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    i, j, s = pairs.near_pairs(v, 0.85)
    ei, ej, _ = pairs.exact_pairs(v, 0.85)
    found, exact = set(zip(i.tolist(), j.tolist(), strict=True)), set(zip(ei.tolist(), ej.tolist(), strict=True))
    assert found <= exact and len(found) >= 0.95 * len(exact) >= 0.95 * 300
    assert np.all(s > 0.85) and np.all(i < j)


def test_groups_never_pass_the_cap() -> None:
    i = np.array([0, 1, 2, 3, 5])
    j = np.array([1, 2, 3, 4, 6])
    s = np.array([0.99, 0.98, 0.97, 0.96, 0.9])
    assert pairs.groups(7, i, j, s, max_members=3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert pairs.groups(7, i, j, s, max_members=8) == [[0, 1, 2, 3, 4], [5, 6]]


def test_a_finished_plan_is_not_searched_again_in_later_cycles(make_settings, make_services,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    services = make_services(make_settings(dream={"max_cycles": 3}, knowledge_graph={"enabled": False}))
    dream, memory = services.dream, services.memory
    dream.nrem_steps, dream.rem_steps = [nrem.Deduplicate(), nrem.Consolidate()], []
    memory.add("u1", "Coffee at nine.", embedding=unit((0, 1.0)))
    memory.add("u1", "Coffee every day at nine.", embedding=at_cosine(0.9, 1))
    searched: list[int] = []
    real = pairs.near_pairs
    monkeypatch.setattr(pairs, "near_pairs", lambda v, t, **kw: (searched.append(len(v)), real(v, t, **kw))[1])
    session = dream.trigger("u1", background=False)
    assert session.counts == {"MemoryConsolidated": 1}
    assert searched == [2]  # cycle 1 only: cycles 2 and 3 find the memories as cycle 1 left them
    memory.add("u1", "Tea at five.", embedding=unit((7, 1.0)))
    dream.trigger("u1", background=False)
    assert searched == [2, 2]  # a new session searches again (the merged memory and the new one)


def test_groups_keep_conversations_apart() -> None:
    i, j, s = np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0.99, 0.98, 0.97])
    # 0 and 1 in conversation 5, 2 in none, 3 in conversation 6: 2 joins the first group, 3 stays out
    assert pairs.groups(4, i, j, s, max_members=8, labels=np.array([5, 5, -1, 6])) == [[0, 1, 2]]
    assert pairs.groups(4, i, j, s, max_members=8, labels=np.array([-1, -1, -1, -1])) == [[0, 1, 2, 3]]


def test_memories_of_different_conversations_are_not_consolidated(dreaming) -> None:
    services = dreaming([nrem.Consolidate()])
    memory = services.memory
    memory.add("u1", "On 8 May 2023, Ann said: Thanks!", conversation_id="s1", embedding=unit((0, 1.0)))
    memory.add("u1", "On 9 June 2023, Ann said: Thanks a lot!", conversation_id="s2", embedding=at_cosine(0.95, 1))
    assert services.dream.trigger("u1", background=False).counts == {}
    memory.add("u1", "On 8 May 2023, Ann said: Thank you!", conversation_id="s1", embedding=at_cosine(0.93, 2))
    assert services.dream.trigger("u1", background=False).counts == {"MemoryConsolidated": 1}


def test_the_graph_follows_a_consolidation(dreaming) -> None:
    services = dreaming([nrem.Consolidate()], graph=True)
    memory, graph = services.memory, services.graph
    a = memory.add("u1", "Anna met Tom in Paris.", embedding=unit((0, 1.0)))
    b = memory.add("u1", "Anna met Tom in Paris again.", embedding=at_cosine(0.95, 1))
    assert graph.wait_idle()
    session = services.dream.trigger("u1", background=False)
    [entry], _ = services.dream.journal("u1", session.id)
    merged = entry.details["memory_id"]
    assert graph.wait_idle()

    def mentions(memory_id: str) -> int:
        return graph.db.scalar("SELECT count(*) FROM kg_mentions WHERE memory_id = ?", (memory_id,))

    assert mentions(a.id) == mentions(b.id) == 0 and mentions(merged) >= 3
    sources = graph.db.query("SELECT DISTINCT memory_id FROM kg_edge_sources")
    assert {r["memory_id"] for r in sources} == {merged}
    assert graph.move_sources("u1", [a.id, b.id], merged) == 0  # a replay moves nothing


def test_a_consolidated_memory_stands_where_its_first_source_stood(dreaming) -> None:
    """Hybrid search's neighbour context reads a conversation in ``coalesce(position, rowid)`` order:
    the merged memory sits right after its first source (archived, still searchable), not after the
    conversation's last memory."""
    services = dreaming([nrem.Consolidate()])
    memory = services.memory
    before = memory.add("u1", "Which violin teacher should I call?", conversation_id="c1", embedding=unit((3, 1.0)))
    a = memory.add("u1", "Try Mrs Okafor.", conversation_id="c1", embedding=unit((0, 1.0)))
    b = memory.add("u1", "Try Mrs Okafor, she is patient.", conversation_id="c1", embedding=at_cosine(0.9, 1))
    last = memory.add("u1", "The weather is nice.", conversation_id="c1", embedding=unit((5, 1.0)))
    session = services.dream.trigger("u1", background=False)
    [entry], _ = services.dream.journal("u1", session.id)
    merged = entry.details["memory_id"]
    rowid = {m: services.db.scalar("SELECT rowid FROM memories WHERE id = ?", (m,)) for m in (a.id, merged)}
    assert services.db.scalar("SELECT position FROM memories WHERE id = ?", (merged,)) == rowid[a.id]
    order = [r["id"] for r in services.db.query(
        "SELECT id FROM memories WHERE conversation_id = 'c1' ORDER BY coalesce(position, rowid), rowid")]
    assert order == [before.id, a.id, merged, b.id, last.id]
