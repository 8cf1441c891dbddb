"""Graph integrity: orphan nodes, dangling edges and links, edges whose sources are all quarantined;
found by a read-only scan, fixed in the run's transaction, counted in the result."""

from __future__ import annotations

from pathlib import Path

from assistant.graph.types import NodeKind
from assistant.sanitation import integrity
from tests.assistant.sanitation.run_fakes import USER, make_world


def test_a_healthy_graph_has_no_issues(tmp_path: Path, monkeypatch) -> None:
    world = make_world(tmp_path, monkeypatch)
    world.add("I live in Lisbon.")
    world.add("Anna met Tom in Paris")
    assert integrity.scan(world.db, USER).counts() == {"orphan_nodes": 0, "dangling_edges": 0,
                                                       "unsourced_edges": 0, "issues": 0}


def test_orphans_dangling_edges_and_quarantined_sources_are_fixed_and_counted(tmp_path: Path, monkeypatch) -> None:
    world = make_world(tmp_path, monkeypatch)
    lisbon = world.add("I live in Lisbon.")
    world.add("Anna met Tom in Paris")
    db, store = world.db, world.graph.store
    with db.transaction() as tx:
        orphan = store.insert_node(tx, USER, "Atlantis", NodeKind.PLACE, world.clock.t, 1.0)
        ghost = store.insert_node(tx, USER, "Ghost", NodeKind.PLACE, world.clock.t, 1.0)
        anna = db.scalar("SELECT node_id FROM kg_mentions WHERE user_id = ? LIMIT 1", (USER,))
        dangling = store.insert_edge(tx, USER, anna, "knows", ghost, weight=1.0, valid_at=world.clock.t,
                                     now=world.clock.t, stability=1.0)
    # quarantined behind the graph's back (no listener): its edge and nodes stay until sanitation
    db.execute("UPDATE memories SET original_memory_type = memory_type, memory_type = 'Quarantined', "
               "quarantined_at = '2026-11-01T00:00:00.000Z', quarantine_reason = 'test' WHERE id = ?", (lisbon,))
    db.execute("PRAGMA foreign_keys = OFF")  # a node deleted without its cascade (only possible without FKs)
    db.execute("DELETE FROM kg_nodes WHERE id = ?", (ghost,))
    db.execute("PRAGMA foreign_keys = ON")
    plan = integrity.scan(db, USER)
    assert orphan in plan.orphan_nodes and plan.dangling_edges == [dangling]
    assert plan.quarantined_sources == [lisbon] and len(plan.unsourced_edges) == 1
    assert plan.issues >= 3

    result = world.service.run(USER)

    assert result.graph["orphan_nodes"] == len(plan.orphan_nodes) and result.graph["dangling_edges"] >= 1
    assert result.graph["unsourced_edges"] == 1 and result.graph["edges_removed"] >= 1
    after = integrity.scan(db, USER)
    assert after.issues == 0 and after.quarantined_sources == []
    assert db.scalar("SELECT count(*) FROM kg_edges WHERE id = ?", (dangling,)) == 0
    assert "Lisbon" not in {n["name"] for n in world.graph.graph(USER)["nodes"]}
    assert world.service.counters.graph_orphans == plan.issues


def test_an_edge_invalidated_by_a_missing_edge_is_valid_again(tmp_path: Path, monkeypatch) -> None:
    world = make_world(tmp_path, monkeypatch)
    world.add("I live in Lisbon.", days_ago=3)
    world.add("I live in Porto now.", days_ago=1)
    old = world.db.one("SELECT id, invalidated_by FROM kg_edges WHERE invalidated_by IS NOT NULL")
    world.db.execute("PRAGMA foreign_keys = OFF")
    world.db.execute("UPDATE kg_edges SET invalidated_by = 'gone' WHERE id = ?", (old["id"],))
    world.db.execute("PRAGMA foreign_keys = ON")
    plan = integrity.scan(world.db, USER)
    assert plan.broken_invalidations == [old["id"]]
    with world.db.transaction() as tx:
        integrity.apply(tx, world.graph, USER, plan, [])
    row = world.db.one("SELECT invalid_ts, invalidated_by FROM kg_edges WHERE id = ?", (old["id"],))
    assert row == {"invalid_ts": None, "invalidated_by": None}
