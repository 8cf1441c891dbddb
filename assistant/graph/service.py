"""The knowledge graph service: memories in, entities and facts out, kept per user.

**Ingestion.** After each memory write the store tells :class:`KnowledgeGraph` (a
:class:`~assistant.memory.hooks.MemoryListener`), which queues the ids for its worker thread: the
chat's critical path never waits for extraction. The worker reads the memories, extracts
(:mod:`assistant.graph.extract`) in batches and applies each extraction in one transaction:

- **Entity resolution**: a mention joins the node whose name or alias matches after
  normalisation (:func:`~assistant.graph.store.normalise_name`), else the node whose name
  embedding has cosine >= ``resolution_threshold`` (then the mention becomes an alias), else a
  new node (``NodeCreated``).
- **Facts** become edges with the memory as source; a fact seen again gains a source and weight
  (w += (1 - w) / 2). ``valid_at`` is the memory's creation time.
- **Contradictions**: for a functional relation (``functional_relations``: lives_in, works_at,
  ...) a fact with a new object for the same subject sets ``invalid_at`` on the old edge (kept,
  ``EdgeInvalidated``), or, when the new fact is the older one (a backfill), it is stored already
  invalidated by the newer.
- **Recall**: each mention by a written memory, and each retrieval of a memory into a prompt,
  multiplies the stability of the nodes and edges it mentions by ``recall_bonus`` and restarts
  their forgetting clock (see :mod:`assistant.graph.retention`).

**Removal.** A deleted or quarantined memory takes its contribution with it: its mentions and edge
sources go, edges left without a source and nodes left without a mention are removed, and an edge
it had invalidated becomes valid again.

**Decay.** :meth:`KnowledgeGraph.sweep` (scheduled) publishes ``NodeDecayed`` once for each node
whose retention fell under ``knowledge_visualization.min_retention_threshold``.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from assistant.clock import epoch_of, iso_at
from assistant.config import KnowledgeGraphSettings, KnowledgeVisualizationSettings, MemorySettings
from assistant.crypto import Sealer
from assistant.graph import retention as R
from assistant.graph.events import GraphEvents
from assistant.graph.operations import GraphOperations
from assistant.graph.queries import GraphQueries
from assistant.graph.store import GraphStore, normalise_name, normalise_relation
from assistant.graph.types import (
    ME,
    RELATED,
    Entity,
    Extraction,
    Extractor,
    GraphEvent,
    GraphEventType,
    NodeKind,
    Passage,
)
from assistant.graph.view import GraphViews
from assistant.memory.types import MemoryType
from assistant.storage.db import Database

if TYPE_CHECKING:
    from assistant.memory.store import MemoryStore
    from assistant.memory.types import Memory

log = logging.getLogger(__name__)

FACT_WEIGHT = 1.0  # first weight of an extracted relation
RELATED_WEIGHT = 0.5  # first weight of a co-occurrence edge
_SAID = re.compile(r"^\s*(?:On ([^,]{3,40}), )?([A-Z][\w.' -]{0,60}?) said:\s*(.*)$", re.S)


def passage_of(memory: Memory) -> Passage:
    """What the extractor reads of a memory: a chat log's ``"On <day>, <Name> said: <text>"`` gives
    the speaker; anything else is the user's own words (speaker None)."""
    m = _SAID.match(memory.content)
    if m:
        text = f"On {m.group(1)}: {m.group(3)}" if m.group(1) else m.group(3)
        return Passage(text, speaker=m.group(2).strip(), memory_id=memory.id)
    return Passage(memory.content, memory_id=memory.id)


@dataclass
class GraphCounters:
    """What /metrics reports of the graph (the extractors keep their own counters)."""

    ingested: int = 0  # memories extracted
    ingest_errors: int = 0  # batches that failed (logged; the memories are retried by a backfill)
    events: dict[str, int] = field(default_factory=dict)


@dataclass
class IngestReport:
    memories: int = 0
    nodes_created: int = 0
    edges_created: int = 0
    edges_invalidated: int = 0
    events: list[GraphEvent] = field(default_factory=list)


class KnowledgeGraph(GraphQueries, GraphOperations):
    def __init__(self, db: Database, sealer: Sealer, memory: MemoryStore, extractor: Extractor,
                 settings: KnowledgeGraphSettings, memory_settings: MemorySettings,
                 visualization: KnowledgeVisualizationSettings, *, fallback: Extractor | None = None,
                 clock: Callable[[], float] = time.time):
        self.db = db
        self.store = GraphStore(db, sealer)
        self.memory = memory
        self.extractor = extractor
        self.fallback = fallback
        self.settings = settings
        self.base_stability = memory_settings.ebbinghaus_base_stability
        self.recall_bonus = memory_settings.recall_bonus
        self.visualization = visualization
        self.clock = clock
        self.functional = {normalise_relation(r) for r in settings.functional_relations}
        self.events = GraphEvents(self.store, settings.event_retention, clock)
        self.views = GraphViews(self.store, clock)
        self.counters = GraphCounters()
        self._queue: queue.Queue[tuple[str, str, list[str]] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._apply_lock = threading.Lock()  # one extraction applied at a time (resolution reads, then writes)
        self._name_vectors: dict[str, np.ndarray] = {}  # normalised name -> embedding (this process only)

    # --- the memory listener (called on the writer's thread: queue and return) --------------------

    def memories_written(self, user_id: str, memory_ids: Sequence[str]) -> None:
        self._submit("ingest", user_id, memory_ids)

    def memories_removed(self, user_id: str, memory_ids: Sequence[str]) -> None:
        self.remove(user_id, memory_ids)  # at once: a deleted memory must not be found through the graph

    def memories_recalled(self, user_id: str, memory_ids: Sequence[str]) -> None:
        self._submit("recall", user_id, memory_ids)

    # --- the worker ------------------------------------------------------------------------------

    def _submit(self, op: str, user_id: str, memory_ids: Sequence[str]) -> None:
        if not memory_ids:
            return
        self._queue.put((op, str(user_id), list(memory_ids)))
        with self._worker_lock:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(target=self._work, name="knowledge-graph", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                op, user_id, ids = item
                if op == "ingest":  # gather what else is queued for this user, up to a batch
                    ids = self._gather(user_id, ids)
                    self.ingest(user_id, ids)
                else:
                    self.recall(user_id, ids)
            except Exception:
                self.counters.ingest_errors += 1
                log.exception("knowledge graph: %s of %d memories failed", item[0] if item else "?",
                              len(item[2]) if item else 0)
            finally:
                self._queue.task_done()

    def _gather(self, user_id: str, ids: list[str]) -> list[str]:
        more: list[tuple[str, str, list[str]]] = []
        while len(ids) < self.settings.batch_size:
            try:
                nxt = self._queue.get_nowait()
            except queue.Empty:
                break
            if nxt is not None and nxt[0] == "ingest" and nxt[1] == user_id:
                ids = ids + nxt[2]
                self._queue.task_done()
            else:
                more.append(nxt)  # type: ignore[arg-type]
                self._queue.task_done()
        for item in more:  # back in the queue, in order
            self._queue.put(item)
        return list(dict.fromkeys(ids))

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until every queued ingestion and recall is done (tests, notebooks, backfill)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def close(self) -> None:
        with self._worker_lock:
            worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(timeout=30)

    # --- ingestion -------------------------------------------------------------------------------

    def pending(self, user_id: str) -> list[str]:
        """Ids of the user's memories not extracted yet (quarantined ones are left out), oldest first."""
        rows = self.db.query(
            "SELECT m.id FROM memories m LEFT JOIN kg_extracted x ON x.memory_id = m.id "
            "WHERE m.user_id = ? AND x.memory_id IS NULL AND m.memory_type != 'Quarantined' ORDER BY m.rowid",
            (str(user_id),))
        return [r["id"] for r in rows]

    def backfill(self, user_id: str, *, progress: Callable[[int], None] | None = None,
                 batch: int | None = None) -> IngestReport:
        """Extract every memory of the user not yet in the graph, in batches, oldest first;
        ``progress(n)`` after each batch (tqdm's ``update``)."""
        total = IngestReport()
        ids = self.pending(user_id)
        size = batch or max(self.settings.batch_size, 32)
        for start in range(0, len(ids), size):
            part = self.ingest(user_id, ids[start:start + size])
            total.memories += part.memories
            total.nodes_created += part.nodes_created
            total.edges_created += part.edges_created
            total.edges_invalidated += part.edges_invalidated
            if progress:
                progress(len(ids[start:start + size]))
        return total

    def _extract(self, passages: list[Passage]) -> list[Extraction]:
        try:
            return self.extractor.extract(passages)
        except Exception:
            if self.fallback is None:
                raise
            log.warning("extractor %s failed; %d memories go to %s", self.extractor.id, len(passages),
                        self.fallback.id, exc_info=True)
            return self.fallback.extract(passages)

    def ingest(self, user_id: str, memory_ids: Sequence[str]) -> IngestReport:
        """Extract and apply the memories (synchronously). Memories already extracted are done again
        (their content changed): their old contribution is withdrawn first."""
        user = str(user_id)
        memories = []
        for memory_id in memory_ids:
            try:
                memory = self.memory.get(user, memory_id)
            except Exception:  # deleted meanwhile
                continue
            if memory.memory_type != MemoryType.QUARANTINED:
                memories.append(memory)
        report = IngestReport()
        if not memories:
            return report
        extractions: list[Extraction] = []
        size = self.settings.batch_size
        for start in range(0, len(memories), size):
            extractions += self._extract([passage_of(m) for m in memories[start:start + size]])
        names = {e.name for x in extractions for e in x.entities} | {n for x in extractions for f in x.facts
                                                                      for n in (f.subject, f.object)}
        self._embed_names(names)
        with self._apply_lock:
            done = {r["memory_id"] for r in self.db.query(
                f"SELECT memory_id FROM kg_extracted WHERE memory_id IN ({','.join('?' * len(memories))})",
                [m.id for m in memories])}
            if done:
                self.remove(user, sorted(done), publish=True)
            for memory, extraction in zip(memories, extractions, strict=True):
                events = len(report.events)
                try:
                    with self.db.transaction() as db:
                        self._apply(db, user, memory, extraction, report)
                        db.execute("INSERT OR REPLACE INTO kg_extracted (memory_id, user_id, extractor, "
                                   "extracted_ts) VALUES (?, ?, ?, ?)", (memory.id, user, self.extractor.id,
                                                                         self.clock()))
                except Exception:  # e.g. the memory was deleted meanwhile (its foreign key): skip it alone
                    del report.events[events:]  # rolled back with it
                    self.counters.ingest_errors += 1
                    log.warning("knowledge graph: memory %s not applied", memory.id, exc_info=True)
                    continue
                report.memories += 1
            self.views.changed(user)
        self.counters.ingested += report.memories
        self._deliver(report.events)
        return report

    def _embed_names(self, names: Iterable[str]) -> None:
        missing = sorted({normalise_name(n) for n in names} - self._name_vectors.keys() - {""})
        if not missing:
            return
        vectors = np.asarray(self.memory.embedder.embed(missing), dtype=np.float32)
        self._name_vectors.update(zip(missing, vectors, strict=True))

    def _vector(self, name: str) -> np.ndarray | None:
        return self._name_vectors.get(normalise_name(name))

    def _resolve(self, db: Database, user: str, entity: Entity, when: float, report: IngestReport,
                 cache: dict[str, str], created: set[str]) -> str | None:
        """The node id of ``entity`` (found or created)."""
        key = normalise_name(entity.name)
        if not key:
            return None
        if key in cache:
            return cache[key]
        found = self.store.find_by_name(user, [entity.name]).get(key)
        if found is None and (vector := self._vector(entity.name)) is not None:
            ids, matrix = self.views.embeddings(user)
            if matrix is not None and len(ids):
                sims = matrix @ vector
                best = int(np.argmax(sims))
                if sims[best] >= self.settings.resolution_threshold:
                    found = ids[best]
                    self.store.add_alias(db, self.store.node(user, found), entity.name.strip())
        if found is None:
            found = self.store.insert_node(db, user, entity.name.strip(), entity.kind, when, self.base_stability,
                                           self._vector(entity.name))
            self.views.add_embedding(user, found, self._vector(entity.name))
            report.nodes_created += 1
            created.add(found)
            report.events.append(self.events.append(db, user, GraphEventType.NODE_CREATED, {
                "id": found, "name": entity.name.strip(), "kind": entity.kind.value}))
        cache[key] = found
        return found

    def _apply(self, db: Database, user: str, memory: Memory, extraction: Extraction, report: IngestReport) -> None:
        when = epoch_of(memory.created_at) if memory.created_at else self.clock()
        cache: dict[str, str] = {}
        kinds = {normalise_name(e.name): e.kind for e in extraction.entities}
        entities = list(extraction.entities)
        for fact in extraction.facts:  # a fact's ends are entities even if not listed
            for name in (fact.subject, fact.object):
                if normalise_name(name) not in kinds:
                    kinds[normalise_name(name)] = NodeKind.PERSON if name == ME else NodeKind.TOPIC
                    entities.append(Entity(name, kinds[normalise_name(name)]))
        created: set[str] = set()
        mentioned: list[str] = []
        for entity in entities:
            node_id = self._resolve(db, user, entity, when, report, cache, created)
            if node_id is not None and node_id not in mentioned:
                mentioned.append(node_id)
        for node_id in mentioned:
            db.execute("INSERT OR IGNORE INTO kg_mentions (node_id, memory_id, user_id) VALUES (?, ?, ?)",
                       (node_id, memory.id, user))
        if mentioned:
            marks = ",".join("?" * len(mentioned))
            db.execute(f"UPDATE kg_nodes SET mention_count = mention_count + 1 WHERE id IN ({marks})", mentioned)
        # a mention by a memory written again is a recall; a node's first mention is not
        self._strengthen(db, "kg_nodes", [n for n in mentioned if n not in created], when)
        for fact in extraction.facts:
            subject, obj = cache.get(normalise_name(fact.subject)), cache.get(normalise_name(fact.object))
            if subject is None or obj is None or subject == obj:
                continue
            self._add_fact(db, user, subject, normalise_relation(fact.relation), obj, memory.id, when, report)

    def _strengthen(self, db: Database, table: str, ids: Sequence[str], when: float) -> None:
        """A recall: stability x recall_bonus, recalls + 1, the forgetting clock restarted."""
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        decayed = ", decayed_ts = NULL" if table == "kg_nodes" else ""
        db.execute(f"UPDATE {table} SET recalls = recalls + 1, stability = stability * ?, "
                   f"last_seen_ts = max(last_seen_ts, ?){decayed} WHERE id IN ({marks})",
                   (self.recall_bonus, when, *ids))

    def _add_fact(self, db: Database, user: str, subject: str, relation: str, obj: str, memory_id: str,
                  when: float, report: IngestReport) -> None:
        if relation == RELATED and subject > obj:
            subject, obj = obj, subject  # one co-occurrence edge per pair
        existing = self.store.find_edge(db, user, subject, relation, obj)
        if existing is not None:
            db.execute("INSERT OR IGNORE INTO kg_edge_sources (edge_id, memory_id) VALUES (?, ?)",
                       (existing["id"], memory_id))
            db.execute("UPDATE kg_edges SET weight = weight + (1.0 - weight) / 2 WHERE id = ?", (existing["id"],))
            self._strengthen(db, "kg_edges", [existing["id"]], when)
            return
        base = RELATED_WEIGHT if relation == RELATED else FACT_WEIGHT
        edge_id = self.store.insert_edge(db, user, subject, relation, obj, weight=base, valid_at=when, now=when,
                                         stability=self.base_stability)
        db.execute("INSERT INTO kg_edge_sources (edge_id, memory_id) VALUES (?, ?)", (edge_id, memory_id))
        report.edges_created += 1
        report.events.append(self.events.append(db, user, GraphEventType.EDGE_CREATED, {
            "id": edge_id, "source": subject, "target": obj, "relation": relation, "weight": base}))
        if relation in self.functional:
            self._contradict(db, user, edge_id, subject, relation, obj, when, report)

    def _contradict(self, db: Database, user: str, edge_id: str, subject: str, relation: str, obj: str,
                    when: float, report: IngestReport) -> None:
        for old in self.store.current_edges(db, user, subject, relation):
            if old["id"] == edge_id or old["object_id"] == obj:
                continue
            if old["valid_ts"] <= when:  # the usual case: the new fact replaces the old one
                loser, winner, at = old["id"], edge_id, when
            else:  # a backfilled older fact: it was replaced by the one already stored
                loser, winner, at = edge_id, old["id"], old["valid_ts"]
            db.execute("UPDATE kg_edges SET invalid_ts = ?, invalidated_by = ? WHERE id = ?", (at, winner, loser))
            report.edges_invalidated += 1
            report.events.append(self.events.append(db, user, GraphEventType.EDGE_INVALIDATED, {
                "id": loser, "invalidated_by": winner, "relation": relation, "invalid_at": iso_at(at)}))
            if loser == edge_id:
                return

    # --- removal and recall ----------------------------------------------------------------------

    def remove(self, user_id: str, memory_ids: Sequence[str], *, publish: bool = True) -> list[GraphEvent]:
        """Withdraw what the memories contributed (see the module docstring)."""
        user = str(user_id)
        if not memory_ids:
            return []
        marks = ",".join("?" * len(memory_ids))
        events: list[GraphEvent] = []
        with self.db.transaction() as db:
            db.execute(f"DELETE FROM kg_mentions WHERE memory_id IN ({marks})", list(memory_ids))
            db.execute(f"DELETE FROM kg_edge_sources WHERE memory_id IN ({marks})", list(memory_ids))
            db.execute(f"DELETE FROM kg_extracted WHERE memory_id IN ({marks})", list(memory_ids))
            events += self._prune(db, user)
        self.views.changed(user, removed=True)
        if publish:
            self._deliver(events)
        return events

    def _prune(self, db: Database, user: str) -> list[GraphEvent]:
        """Edges without a source and nodes without a mention go (a deletion's cascade, a removal)."""
        events = []
        orphans = [r["id"] for r in db.query(
            "SELECT id FROM kg_edges e WHERE user_id = ? AND origin = 'extraction' AND NOT EXISTS "
            "(SELECT 1 FROM kg_edge_sources s WHERE s.edge_id = e.id)", (user,))]
        if orphans:
            marks = ",".join("?" * len(orphans))
            db.execute(f"UPDATE kg_edges SET invalid_ts = NULL, invalidated_by = NULL "
                       f"WHERE invalidated_by IN ({marks})", orphans)
            db.execute(f"DELETE FROM kg_edges WHERE id IN ({marks})", orphans)
            events += [self.events.append(db, user, GraphEventType.EDGE_REMOVED, {"id": e}) for e in orphans]
        db.execute("UPDATE kg_nodes SET mention_count = (SELECT count(*) FROM kg_mentions m WHERE m.node_id = "
                   "kg_nodes.id) WHERE user_id = ?", (user,))
        gone = [r["id"] for r in db.query("SELECT id FROM kg_nodes WHERE user_id = ? AND mention_count = 0", (user,))]
        if gone:
            marks = ",".join("?" * len(gone))
            db.execute(f"DELETE FROM kg_nodes WHERE id IN ({marks})", gone)  # their edges and names cascade
            events += [self.events.append(db, user, GraphEventType.NODE_REMOVED, {"id": n}) for n in gone]
        return events

    def recall(self, user_id: str, memory_ids: Sequence[str]) -> None:
        """The memories were retrieved: what they mention is recalled (stability x recall_bonus)."""
        user = str(user_id)
        marks = ",".join("?" * len(memory_ids))
        now = self.clock()
        with self.db.transaction() as db:
            nodes = [r["node_id"] for r in db.query(
                f"SELECT DISTINCT node_id FROM kg_mentions WHERE user_id = ? AND memory_id IN ({marks})",
                (user, *memory_ids))]
            edges = [r["edge_id"] for r in db.query(
                f"SELECT DISTINCT s.edge_id FROM kg_edge_sources s JOIN kg_edges e ON e.id = s.edge_id "
                f"WHERE e.user_id = ? AND s.memory_id IN ({marks})", (user, *memory_ids))]
            self._strengthen(db, "kg_nodes", nodes, now)
            self._strengthen(db, "kg_edges", edges, now)
        if nodes or edges:
            self.views.changed(user)

    # --- decay -----------------------------------------------------------------------------------

    def sweep(self, now: float | None = None) -> list[GraphEvent]:
        """``NodeDecayed`` for every node (all users) whose retention fell under the threshold since
        it was last seen; each node once until it is recalled again."""
        now = self.clock() if now is None else now
        threshold = self.visualization.min_retention_threshold
        rows = self.db.query("SELECT id, user_id, last_seen_ts, stability FROM kg_nodes WHERE decayed_ts IS NULL")
        if not rows:
            return []
        kept = R.retention_at(now, np.array([r["last_seen_ts"] for r in rows]), np.array([r["stability"] for r in rows]))
        events = []
        with self.db.transaction() as db:
            for row, value in zip(rows, np.atleast_1d(kept), strict=True):
                if value < threshold:
                    db.execute("UPDATE kg_nodes SET decayed_ts = ? WHERE id = ?", (now, row["id"]))
                    events.append(self.events.append(db, row["user_id"], GraphEventType.NODE_DECAYED, {
                        "id": row["id"], "retention": round(float(value), 4), "threshold": threshold}))
        for user in {e.user_id for e in events}:
            self.views.changed(user)
        self._deliver(events)
        return events

    def _deliver(self, events: list[GraphEvent]) -> None:
        for event in events:
            self.counters.events[event.type.value] = self.counters.events.get(event.type.value, 0) + 1
        self.events.deliver(events)
