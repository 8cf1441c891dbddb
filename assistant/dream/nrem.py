"""NREM: consolidation. Steps, in order (each change a journaled operation, see :mod:`journal`):

1. **Deduplicate** (MemoryDeduplicated, one entry per group): memories whose texts are equal once
   normalised (:func:`consolidate.normalise_text`: case, punctuation and spacing ignored; texts are
   opened in memory only). The most used one is kept (then the oldest); it gains the others'
   access counts and they are archived. It runs before consolidation so that exact copies are set
   aside cheaply instead of being merged into a text that repeats itself.
2. **Consolidate** (MemoryConsolidated, one entry per group): pairs with an embedding cosine above
   ``nrem.merge_threshold`` (:func:`pairs.near_pairs`: blocked products within coarse lists,
   sub-quadratic) joined into groups of at most ``MAX_GROUP`` (union-find, strongest pairs first;
   fewer when the merged text would pass ``MAX_CONTENT_CHARS``). A group never mixes two
   conversations (memories without one join any): on LoCoMo, merging the near-identical turns of
   different sessions ("On <day>, Caroline said: Thanks!") cost temporal questions 0.03 to 0.08 of
   R@5, within a session it does not (benchmarks/dream.py). Archived, Quarantined, DreamInsight
   and Hypothesis memories are left alone. The merged memory's id is chosen when the entry is
   planned (``details.memory_id``, a uuid5 of the user and the key), so a replay finds it written;
   ``details.merged_from`` lists the sources. Originals are archived (``archive_consolidated``) or
   deleted; with a graph, the archived sources' mentions and facts move to the merged memory
   (:meth:`KnowledgeGraph.move_sources`). Merged texts are embedded in batches while planning (one by one is ~20x slower with
   MiniLM); the applier embeds its text itself when that batch does not hold it (a replay).
3. **Archive at floor** (MemoryArchived, one entry per batch of ``ARCHIVE_BATCH``): memories whose
   importance sits at their type's floor (:data:`decay.DECAY_PARAMS`) and that were not accessed
   for ``memory.cleanup_after_days``.
4. **Review edges** and 5. **merge nodes**: :mod:`assistant.dream.nrem_graph` (with a graph only).
6. **Decay** (DecayApplied, once per session): the memory module's decay
   (:func:`decay_cycle.run_decay`, its pure functions) with ``decay_factor = nrem.decay_rate``.

Journal keys are deterministic per planned change (``dedupe:``/``consolidate:``/``archive:`` and a
digest of the sorted ids; ``decay:<session>``), so what a cycle or an earlier night applied is
skipped. Snapshots hold ids, types, importance and 200-character previews, never whole texts.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from assistant.dream.journal import Applied, applier
from assistant.dream.nrem_graph import MergeNodes, ReviewEdges
from assistant.dream.session import PhaseContext, Step
from assistant.dream.types import JournalEntry, Operation
from assistant.memory import consolidate as C
from assistant.memory import pairs
from assistant.memory.decay import DECAY_PARAMS, NOT_DECAYED, SECONDS_PER_DAY
from assistant.memory.decay_cycle import run_decay
from assistant.memory.records import MAX_CONTENT_CHARS

if TYPE_CHECKING:
    from assistant.dream.deps import DreamDeps

MAX_GROUP = 8  # memories merged into one at most
EMBED_BATCH = 64  # merged texts embedded at once while planning
ARCHIVE_BATCH = 500  # memories per MemoryArchived entry
SNAPSHOT_ITEMS = 50  # memories shown in a snapshot at most
_NAMESPACE = uuid.UUID("5b0c4a52-4c8e-4d43-9d8a-6f1f6f0d7a11")


def digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\x00".join(sorted(ids)).encode()).hexdigest()[:32]


def merged_id(user_id: str, key: str) -> str:
    """The merged memory's id: a uuid5 of the user and the operation's key (the same plan, the same id)."""
    return str(uuid.uuid5(_NAMESPACE, f"{user_id}\x00{key}"))


class _Vectors:
    """Merged texts' embeddings computed in batches while planning, by digest of user and text;
    an applier takes its own (and embeds the text itself if it is not there)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, np.ndarray] = {}

    def put(self, user_id: str, texts: Sequence[str], vectors: np.ndarray) -> None:
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._held[C.text_digest(user_id, text)] = vector

    def take(self, user_id: str, text: str) -> np.ndarray | None:
        with self._lock:
            return self._held.pop(C.text_digest(user_id, text), None)

    def drop(self, user_id: str, texts: Sequence[str]) -> None:
        with self._lock:
            for text in texts:
                self._held.pop(C.text_digest(user_id, text), None)


VECTORS = _Vectors()


class _Once:
    """A step whose whole plan ran (not cut by the budget) needs no second pass in the same session
    while the user's memories are unchanged (later cycles would find the same groups, all applied):
    remembered per user as (session, a signature of the memories it reads)."""

    def __init__(self) -> None:
        self._done: dict[str, tuple[str, tuple]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def signature(ctx: PhaseContext) -> tuple:
        row = ctx.deps.memory.db.one(
            "SELECT count(*) AS n, max(rowid) AS last, max(updated_at) AS changed FROM memories WHERE user_id = ? "
            f"AND memory_type NOT IN ({C._skip(C.NOT_CONSOLIDATED)})", (ctx.user_id,))
        return (row["n"], row["last"], row["changed"]) if row else ()

    def skip(self, ctx: PhaseContext) -> bool:
        with self._lock:
            done = self._done.get(ctx.user_id)
        return done is not None and done == (ctx.session.id, self.signature(ctx))

    def finished(self, ctx: PhaseContext) -> None:
        if not ctx.exhausted:
            with self._lock:
                self._done[ctx.user_id] = (ctx.session.id, self.signature(ctx))

    def run(self, ctx: PhaseContext) -> None:
        if self.skip(ctx):
            return
        self._run(ctx)
        self.finished(ctx)

    def _run(self, ctx: PhaseContext) -> None:
        raise NotImplementedError


# --- 1. deduplicate --------------------------------------------------------------------------------


class Deduplicate(_Once):
    name = "deduplicate"

    def _run(self, ctx: PhaseContext) -> None:
        store, user = ctx.deps.memory, ctx.user_id
        rows = store.db.query(
            "SELECT rowid, id, user_id, content, created_at, access_count, memory_type, importance FROM memory_rows "
            f"WHERE user_id = ? AND memory_type NOT IN ({C._skip(C.NOT_CONSOLIDATED)}) ORDER BY rowid", (user,))
        by_text: dict[str, list[tuple[dict, str]]] = {}
        for row in rows:
            content = C.open_content(store, row)
            by_text.setdefault(C.text_digest(user, C.normalise_text(content)), []).append((row, content))
        for group in by_text.values():
            if len(group) < 2:
                continue
            group.sort(key=lambda rc: (-int(rc[0]["access_count"]), rc[0]["created_at"], rc[0]["rowid"]))
            keep, dups = group[0], group[1:]
            ids = [r["id"] for r, _ in group]
            details = {"kept": keep[0]["id"], "duplicates": [r["id"] for r, _ in dups], "rule": "normalised text"}
            before = {"kept": C.brief(*keep), "duplicates": [C.brief(*d) for d in dups[:SNAPSHOT_ITEMS]]}
            done = ctx.record(Operation.MEMORY_DEDUPLICATED, f"dedupe:{digest(ids)}", details, memories=ids,
                              before=before)
            if done is None and ctx.exhausted:
                return


@applier(Operation.MEMORY_DEDUPLICATED)
def apply_dedupe(deps: DreamDeps, entry: JournalEntry) -> Applied:
    d = entry.details
    archived = C.absorb_duplicates(deps.memory, entry.user_id, d["kept"], d["duplicates"],
                                   session_id=entry.session_id)
    return Applied(after={"kept": d["kept"], "archived": archived[:SNAPSHOT_ITEMS]}, count=len(archived),
                   extra={"archived": len(archived)})


# --- 2. consolidate --------------------------------------------------------------------------------


class Consolidate(_Once):
    name = "consolidate"

    def _run(self, ctx: PhaseContext) -> None:
        deps, user = ctx.deps, ctx.user_id
        store, threshold = deps.memory, deps.settings.nrem.merge_threshold
        found = C.candidates(store, user)
        i, j, scores = pairs.near_pairs(found.vectors, threshold)
        ctx.emit("progress", step=self.name, candidates=len(found.ids), pairs=int(len(i)))
        planned = pairs.groups(len(found.ids), i, j, scores, max_members=MAX_GROUP, labels=found.conversations)
        for start in range(0, len(planned), EMBED_BATCH):
            batch = []
            for group in planned[start:start + EMBED_BATCH]:
                plan = self._plan(ctx, [found.ids[g] for g in group])
                if plan is not None:
                    batch.append(plan)
            if not batch:
                continue
            texts = [text for *_, text in batch]
            VECTORS.put(user, texts, store.embedder.embed(texts))
            try:
                for key, details, before, ids, _ in batch:
                    if ctx.record(Operation.MEMORY_CONSOLIDATED, key, details, memories=ids, before=before) is None \
                            and ctx.exhausted:
                        return
            finally:
                VECTORS.drop(user, texts)

    def _plan(self, ctx: PhaseContext, ids: list[str]) -> tuple | None:
        """(key, details, before, ids, merged text) of a group, trimmed so the text fits; None when
        already applied or fewer than two memories are left."""
        store, user = ctx.deps.memory, ctx.user_id
        rows = C.rows_of(store, user, ids, C.NOT_CONSOLIDATED)
        contents = {r["id"]: C.open_content(store, r) for r in rows}
        while len(rows) >= 2:
            text = C.merged_text(store, rows)
            if len(text) <= MAX_CONTENT_CHARS:
                break
            rows = rows[:-1]
        if len(rows) < 2:
            return None
        source_ids = [r["id"] for r in rows]
        key = f"consolidate:{digest(source_ids)}"
        if ctx.deps.store.applied(user, key):
            return None
        details = {"memory_id": merged_id(user, key), "merged_from": source_ids,
                   "threshold": ctx.deps.settings.nrem.merge_threshold,
                   "archive": ctx.deps.settings.nrem.archive_consolidated}
        before = {"memories": [C.brief(r, contents[r["id"]]) for r in rows]}
        return key, details, before, [*source_ids, details["memory_id"]], text


@applier(Operation.MEMORY_CONSOLIDATED)
def apply_consolidate(deps: DreamDeps, entry: JournalEntry) -> Applied:
    d, user = entry.details, entry.user_id
    done = C.write_consolidated(deps.memory, user, d["memory_id"], d["merged_from"], session_id=entry.session_id,
                                archive=bool(d.get("archive", True)),
                                vector_for=lambda text: VECTORS.take(user, text))
    if done is not None and deps.graph is not None and d.get("archive", True):
        # the archived sources' mentions and facts become the merged memory's (again on a replay:
        # idempotent); deleted sources took theirs with them
        deps.graph.move_sources(user, d["merged_from"], d["memory_id"])
    if done is None or not done.created:
        return Applied(count=0, details={**d, "replayed": done is not None})
    after = {"memory": C.brief(done.row, done.content), "archived" if d.get("archive", True) else "deleted": done.removed}
    return Applied(after=after, details={**d, "merged_from": done.sources}, memories=[*done.sources, done.memory_id],
                   count=1, extra={"archived": len(done.removed) if d.get("archive", True) else 0,
                                   "memory_id": done.memory_id})


# --- 3. archive at floor ---------------------------------------------------------------------------


class ArchiveAtFloor:
    name = "archive_at_floor"

    def run(self, ctx: PhaseContext) -> None:
        deps, user = ctx.deps, ctx.user_id
        store = deps.memory
        floors = [(t.value, p.floor) for t, p in DECAY_PARAMS.items()]
        values = ",".join("(?, ?)" for _ in floors)
        idle_since = deps.clock() - deps.memory_settings.cleanup_after_days * SECONDS_PER_DAY
        rows = store.db.query(
            f"WITH f(t, floor) AS (VALUES {values}) SELECT m.id, m.memory_type, s.importance FROM memories m "
            "JOIN memory_scores s ON s.memory_rowid = m.rowid JOIN f ON f.t = s.decay_type "
            f"WHERE m.user_id = ? AND m.memory_type NOT IN ({C._skip(C.NOT_ARCHIVED)}) "
            "AND s.importance <= f.floor + 1e-9 AND s.accessed_ts < ? ORDER BY m.rowid",
            [v for f in floors for v in f] + [user, idle_since])
        for start in range(0, len(rows), ARCHIVE_BATCH):
            part = rows[start:start + ARCHIVE_BATCH]
            ids = [r["id"] for r in part]
            details = {"ids": ids, "rule": "importance at the type floor, not accessed for "
                                           f"{deps.memory_settings.cleanup_after_days} days"}
            before = {"memories": [C.brief(r) for r in part[:SNAPSHOT_ITEMS]], "total": len(part)}
            if ctx.record(Operation.MEMORY_ARCHIVED, f"archive:{digest(ids)}", details, memories=ids,
                          before=before) is None and ctx.exhausted:
                return


@applier(Operation.MEMORY_ARCHIVED)
def apply_archive(deps: DreamDeps, entry: JournalEntry) -> Applied:
    archived = C.archive(deps.memory, entry.user_id, entry.details["ids"], session_id=entry.session_id)
    return Applied(after={"archived": archived[:SNAPSHOT_ITEMS], "total": len(archived)}, count=len(archived))


# --- 6. decay --------------------------------------------------------------------------------------


class Decay:
    name = "decay"

    def run(self, ctx: PhaseContext) -> None:
        ctx.record(Operation.DECAY_APPLIED, f"decay:{ctx.session.id}",
                   {"decay_rate": ctx.deps.settings.nrem.decay_rate, "planned_at": ctx.deps.clock()})


@applier(Operation.DECAY_APPLIED)
def apply_decay(deps: DreamDeps, entry: JournalEntry) -> Applied:
    """Once: a replay finds every memory of the user decayed after the entry was planned and does
    nothing (decay adds reinforcement at every run, so running it twice would not be idempotent)."""
    d, user = entry.details, entry.user_id
    skip = ",".join(f"'{t.value}'" for t in NOT_DECAYED)  # the rows run_decay leaves alone
    last = deps.memory.db.scalar(f"SELECT min(decay_ts) FROM memory_scores WHERE user_id = ? AND decay_type NOT IN "
                                 f"({skip})", (user,))
    if last is not None and last >= d["planned_at"]:
        return Applied(count=0, details={**d, "replayed": True})
    settings = deps.memory_settings.model_copy(update={"decay_factor": d["decay_rate"]})
    report = run_decay(deps.memory.db, settings, deps.clock(), user, max_changes=SNAPSHOT_ITEMS)
    changes = [{"id": c["id"], "importance": round(c["before"], 4)} for c in report.changes]
    after = {"changes": [{"id": c["id"], "importance": round(c["after"], 4)} for c in report.changes]}
    return Applied(after=after, count=report.changed,
                   details={**d, "processed": report.processed, "changed": report.changed,
                            "cleaned_up": report.cleaned_up, "before": changes},
                   memories=[c["id"] for c in report.changes], extra={"archived": report.cleaned_up})


NREM_STEPS: list[Step] = [Deduplicate(), Consolidate(), ArchiveAtFloor(), ReviewEdges(), MergeNodes(), Decay()]
