"""The memory store: sealed content in SQLite, embeddings, hybrid search, decay, learning.

Content, summary and tags are sealed (XChaCha20-Poly1305) before they reach SQLite, each bound to
its column, row and user as associated data (``records.sealed_at``); embeddings are stored as
float32 BLOBs (the spec keeps them unencrypted); keywords as keyed tokens. Every read of content
opens the seal in memory only. Merging happens on plaintext: the old memory is opened, the texts
are joined, and the result is sealed again.

The parts: :mod:`records` (new memories, limits, weights), :mod:`user_indexes` (each user's
vector index), :mod:`decay_cycle` (the daily decay in SQL); this module keeps the store itself.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from uuid import uuid4

import numpy as np

from assistant.config import MemorySettings
from assistant.crypto import Sealer
from assistant.embeddings.base import Embedder
from assistant.errors import NotFoundError, ValidationFailed
from assistant.memory.candidates import gather, temporal_flags
from assistant.memory.decay_cycle import DecayReport, run_decay
from assistant.memory.hooks import Expander, MemoryListener
from assistant.memory.index import VectorIndex
from assistant.memory.keywords import KeywordIndex
from assistant.memory.learning import score_exchange
from assistant.memory.records import (
    DEFAULT_HYBRID,
    MAX_CONTENT_CHARS,
    MAX_TAGS,
    SUMMARY_CHARS,
    HybridWeights,
    NewMemory,
    decay_type,
    iso_of,
    merge_text,
    sealed_at,
    validate,
)
from assistant.memory.scoring import (
    ARCHIVED_FACTOR,
    BELOW_THRESHOLD,
    CUT_BUDGET,
    DEFAULT_WEIGHTS,
    INJECTED,
    NEAR_MISSES,
    OVER_LIMIT,
    RAG_SEARCH_MODE,
    RelevanceWeights,
    build_context,
    fit_in_budget,
    freshness,
    order_for_prompt,
    relevance,
    type_rank,
)
from assistant.memory.tuning import RetrievalParams, RetrievalTuning
from assistant.memory.types import Memory, MemoryType, ScoredMemory
from assistant.memory.user_indexes import UserIndexes
from assistant.storage.db import Database

__all__ = ["MAX_CONTENT_CHARS", "MAX_TAGS", "SUMMARY_CHARS", "DecayReport", "HybridWeights", "MemoryStore",
           "NewMemory", "iso_of", "merge_text"]

log = logging.getLogger(__name__)
SEARCH_MODES = ("dense", "keyword", "hybrid", "hybrid+graph")
GRAPH_POOL = 50  # hybrid hits handed to the graph expander


class MemoryStore:
    def __init__(
        self,
        db: Database,
        sealer: Sealer,
        embedder: Embedder,
        settings: MemorySettings,
        *,
        index_kind: str = "auto",
        weights: RelevanceWeights = DEFAULT_WEIGHTS,
        hybrid: HybridWeights = DEFAULT_HYBRID,
        clock: Callable[[], float] = time.time,
    ):
        self.db = db
        self.sealer = sealer
        self.embedder = embedder
        self.settings = settings
        self.index_kind = index_kind
        self.weights = weights
        self.hybrid = hybrid
        self.clock = clock
        self.keywords = KeywordIndex(db, sealer)
        self.indexes = UserIndexes(db, settings.embedding_dimension, index_kind)
        self.listeners: list[MemoryListener] = []  # told of writes, removals and recalls (the graph)
        self.expander: Expander | None = None  # mode "hybrid+graph" (memory.retrieval)
        self.tuning: RetrievalTuning | None = None  # per-user parameters (retrieval-parameter optimisation)

    def params_for(self, user_id: str) -> RetrievalParams:
        """The retrieval parameters of ``user_id``'s recall: the configured ones (``[memory]``, the store's
        weights), with the values :attr:`tuning` applied for that user in their place."""
        s = self.settings
        base = RetrievalParams(s.rag_threshold, s.rag_limit, self.weights, self.hybrid, s.decay_factor)
        tuned = self.tuning.tuned(str(user_id)) if self.tuning is not None else None
        return base.with_values(tuned) if tuned else base

    def _tell(self, event: str, user_id: str, memory_ids: Sequence[str]) -> None:
        for listener in self.listeners:
            try:
                getattr(listener, event)(str(user_id), list(memory_ids))
            except Exception:  # a listener never breaks a memory write
                log.exception("memory listener %s.%s failed", type(listener).__name__, event)

    # --- rows <-> Memory -------------------------------------------------------------------------

    def _open(self, row: dict, column: str) -> str:
        return self.sealer.open(row[column], sealed_at(column, row["id"], row["user_id"]))

    def _memory(self, row: dict) -> Memory:
        return Memory(
            id=row["id"],
            user_id=row["user_id"],
            content=self._open(row, "content"),
            summary=self._open(row, "summary"),
            memory_type=MemoryType(row["memory_type"]),
            importance=row["importance"],
            tags=json.loads(self._open(row, "tags")),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            accessed_at=row["accessed_at"],
            access_count=row["access_count"],
            conversation_id=row["conversation_id"],
            original_memory_type=MemoryType(row["original_memory_type"]) if row["original_memory_type"] else None,
            archived_at=row["archived_at"],
            archived_by_session=row["archived_by_session"],
            quarantined_at=row["quarantined_at"],
            quarantine_reason=self.open_reason(row),
            decayed_at=iso_of(row["decay_ts"]),
        )

    def seal_reason(self, row: dict, reason: str) -> bytes:
        """A quarantine reason quotes the memory (a time phrase, a contradicted value): sealed like it."""
        return self.sealer.seal(reason, sealed_at("quarantine_reason", row["id"], row["user_id"]))

    def open_reason(self, row: dict) -> str | None:
        value = row["quarantine_reason"]
        if isinstance(value, bytes | memoryview):
            return self.sealer.open(bytes(value), sealed_at("quarantine_reason", row["id"], row["user_id"]))
        return value  # NULL, or plain text written before reasons were sealed

    # --- the vector index ------------------------------------------------------------------------

    def index(self, user_id: str) -> VectorIndex:
        """The user's vector index, built from SQLite on first use (see :class:`UserIndexes`)."""
        return self.indexes.get(user_id)

    # --- create, read, delete --------------------------------------------------------------------

    def add(self, user_id: str, content: str, summary: str | None = None,
            memory_type: MemoryType | str = MemoryType.CONTEXT, importance: float = 0.5,
            tags: Sequence[str] = (), conversation_id: str | None = None,
            embedding: np.ndarray | None = None) -> Memory:
        memory_type = MemoryType.parse(memory_type) if isinstance(memory_type, str) else memory_type
        item = NewMemory(content, summary, memory_type, importance, tags, conversation_id)
        ids = self.add_many(user_id, [item], None if embedding is None else np.asarray(embedding).reshape(1, -1))
        return self.get(user_id, ids[0])

    def add_many(self, user_id: str, items: Sequence[NewMemory], embeddings: np.ndarray | None = None,
                 progress: Callable[[int], None] | None = None) -> list[str]:
        """Store many memories in one transaction; embeddings are computed unless given."""
        for item in items:
            validate(item)
        if embeddings is None:
            embeddings = self.embedder.embed([i.content for i in items])
        embeddings = np.asarray(embeddings, dtype=np.float32)
        now = self.clock()
        stamp = iso_of(now)
        ids = [str(uuid4()) for _ in items]
        seal, user = self.sealer.seal, str(user_id)
        rows = [
            (
                ids[n], user, item.conversation_id,
                seal(item.content, sealed_at("content", ids[n], user)),
                seal(item.summary if item.summary is not None else item.content[:SUMMARY_CHARS],
                     sealed_at("summary", ids[n], user)),
                seal(json.dumps(list(item.tags)), sealed_at("tags", ids[n], user)),
                item.memory_type.value, stamp, stamp, stamp, embeddings[n].tobytes(),
            )
            for n, item in enumerate(items)
        ]
        with self.db.transaction() as db:
            db.executemany(
                "INSERT INTO memories (id, user_id, conversation_id, content, summary, tags, memory_type, "
                "created_at, updated_at, accessed_at, embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            marks = ",".join("?" * len(ids))
            rowids = {r["id"]: r["rowid"] for r in db.query(f"SELECT id, rowid FROM memories WHERE id IN ({marks})", ids)}
            db.executemany(
                "INSERT INTO memory_scores (memory_rowid, user_id, decay_type, importance, access_count, accessed_ts, "
                "decay_ts) VALUES (?, ?, ?, ?, 0, ?, ?)",
                [(rowids[ids[n]], str(user_id), decay_type(item.memory_type), float(item.importance), now, now)
                 for n, item in enumerate(items)],
            )
            self.keywords.add((rowids[ids[n]], str(user_id), item.content) for n, item in enumerate(items))
        self.indexes.add(str(user_id), np.array([rowids[i] for i in ids], dtype=np.int64), embeddings)
        if progress:
            progress(len(items))
        self._tell("memories_written", user_id, ids)
        return ids

    def _row(self, user_id: str, memory_id: str) -> dict:
        row = self.db.one("SELECT * FROM memory_rows WHERE id = ? AND user_id = ?", (str(memory_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return row

    def get(self, user_id: str, memory_id: str) -> Memory:
        return self._memory(self._row(user_id, memory_id))

    def list(self, user_id: str, limit: int = 100, offset: int = 0) -> list[Memory]:
        """Newest first."""
        rows = self.db.query(
            "SELECT * FROM memory_rows WHERE user_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
            (str(user_id), limit, offset),
        )
        return [self._memory(r) for r in rows]

    def count(self, user_id: str) -> int:
        return int(self.db.scalar("SELECT count(*) FROM memories WHERE user_id = ?", (str(user_id),)))

    def delete(self, user_id: str, memory_id: str) -> None:
        row = self._row(user_id, memory_id)
        with self.db.transaction() as db:
            db.execute("DELETE FROM memories WHERE rowid = ?", (row["rowid"],))
        self.indexes.remove(str(user_id), [row["rowid"]])
        self._tell("memories_removed", user_id, [row["id"]])

    def quarantine(self, user_id: str, memory_id: str, reason: str) -> Memory:
        """Set a memory aside (type ``quarantined``, its former type kept): it is never retrieved,
        and whatever it contributed to the knowledge graph is withdrawn. Sanitation decides when."""
        row = self._row(user_id, memory_id)
        if row["memory_type"] != MemoryType.QUARANTINED:
            with self.db.transaction() as db:
                db.execute(
                    "UPDATE memories SET original_memory_type = coalesce(original_memory_type, memory_type), "
                    "memory_type = ?, quarantined_at = ?, quarantine_reason = ? WHERE rowid = ?",
                    (MemoryType.QUARANTINED.value, iso_of(self.clock()), self.seal_reason(row, reason), row["rowid"]),
                )
            self._tell("memories_removed", user_id, [row["id"]])
        return self.get(user_id, memory_id)

    def stats(self, user_id: str) -> dict:
        rows = self.db.query(
            "SELECT memory_type, count(*) AS n FROM memories WHERE user_id = ? GROUP BY memory_type", (str(user_id),)
        )
        counts = {MemoryType(r["memory_type"]): r["n"] for r in rows}
        by_type = [{"memory_type": t.display_name, "count": counts[t]} for t in MemoryType if t in counts]
        return {"total": sum(counts.values()), "by_type": by_type}

    # --- search ----------------------------------------------------------------------------------

    def search(self, user_id: str, query: str, limit: int = 10, *, query_vector: np.ndarray | None = None,
               mode: str = "hybrid", rank_by: str = "relevance", include_quarantined: bool = False,
               candidates: int | None = None) -> list[ScoredMemory]:
        """Memories of ``user_id`` for ``query``: ``mode`` dense, keyword, hybrid or hybrid+graph;
        ``rank_by`` relevance (the spec's formula) or similarity (the retrieval score alone).

        ``hybrid+graph`` gives the hybrid hits (a pool of ``GRAPH_POOL``) to :attr:`expander` (the
        knowledge graph), which adds memories linked through the query's entities and re-ranks;
        without an expander it is plain hybrid."""
        if mode not in SEARCH_MODES:
            raise ValidationFailed(f"unknown search mode {mode!r}",
                                   [{"field": "mode", "error": ", ".join(SEARCH_MODES)}])
        user_id = str(user_id)
        if mode == "hybrid+graph":
            if query_vector is None:
                query_vector = self.embedder.embed([query])[0]
            hits = self.search(user_id, query, max(limit, GRAPH_POOL), query_vector=query_vector, mode="hybrid",
                               rank_by="similarity", include_quarantined=include_quarantined, candidates=candidates)
            if self.expander is not None:
                hits = self.expander.expand(user_id, query, query_vector, hits, max(limit, GRAPH_POOL))
            if rank_by == "relevance":
                hits = sorted(hits, key=lambda h: -h.relevance)
            return hits[:limit]
        pool = candidates or max(limit * 5, 50)
        params = self.params_for(user_id)
        hybrid, weights = params.hybrid, params.weights
        # Neighbour context (HybridWeights.context): the previous and next memory, in stored order
        # (a consolidated memory where its first source was: ``position``, m020),
        # of each keyword match in its conversation; they join the candidates (candidates.gather). Only a
        # neighbour of a keyword match can gain anything, so no other adjacency is looked up.
        context = hybrid.context if mode == "hybrid" else 0.0
        if mode != "keyword" and query_vector is None:
            query_vector = self.embedder.embed([query])[0]
        found = gather(self, user_id, query, query_vector, mode, pool, context > 0)
        rows, dense, keyword, adjacent = found.rows, found.dense, found.keyword, found.adjacent
        if not rows:
            return []
        top_kw = max(keyword.values(), default=0.0) or 1.0
        own: dict[int, tuple[float, float, float]] = {}  # rowid -> (cosine, keyword, fused)
        for rowid, row in rows.items():
            if row["memory_type"] == MemoryType.QUARANTINED and not include_quarantined:
                continue
            cos = dense.get(rowid, 0.0)
            kw = keyword.get(rowid, 0.0) / top_kw
            if mode == "dense":
                fused = cos
            elif mode == "keyword":
                fused = kw
            else:
                fused = hybrid.dense * cos + hybrid.keyword * kw
            own[rowid] = (cos, kw, fused)
        now = self.clock()
        scored = []
        grounded = self._temporal(query, rows, own, hybrid) if mode == "hybrid" else {}
        for rowid, (cos, kw, fused) in own.items():
            row = rows[rowid]
            near = max((own[n][1] for n in adjacent.get(rowid, ()) if n in own), default=0.0)
            similarity = min(1.0, fused + context * near) if near else fused
            similarity += grounded.get(rowid, 0.0)
            hours = max(now - row["accessed_ts"], 0.0) / 3600.0
            rel = float(relevance(similarity, row["importance"], hours, weights))
            if row["memory_type"] == MemoryType.ARCHIVED:
                rel *= ARCHIVED_FACTOR
                similarity *= ARCHIVED_FACTOR
                fused *= ARCHIVED_FACTOR
            fresh = float(freshness(hours))
            scored.append((row, cos, kw, fresh, rel, similarity, fused))
        key = (lambda s: -s[4]) if rank_by == "relevance" else (lambda s: -s[5])
        scored.sort(key=key)
        if mode == "hybrid" and hybrid.diversity > 0 and rank_by == "similarity":
            scored = self._diversify(scored, hybrid.diversity)
        return [ScoredMemory(self._memory(r), cos, kw, fresh, rel, fused, sim)
                for r, cos, kw, fresh, rel, sim, fused in scored[:limit]]

    def _temporal(self, query: str, rows: dict[int, dict], own: dict, h: HybridWeights) -> dict[int, float]:
        """Temporal grounding (``HybridWeights.date``/``when``, :mod:`assistant.memory.temporal`):
        rowid -> what to add to its ranking score."""
        flags = temporal_flags(self, query, rows, list(own), date=h.date > 0, when=h.when > 0)
        return {rowid: h.date * in_window + h.when * mentions for rowid, (in_window, mentions) in flags.items()}

    def _diversify(self, scored: list[tuple], diversity: float) -> list[tuple]:
        """``HybridWeights.diversity``: each hit loses ``diversity`` per better-ranked hit of the
        same conversation, so that one session does not fill the top of the list."""
        seen: dict[str | None, int] = {}
        adjusted = []
        for n, item in enumerate(scored):
            conv = item[0]["conversation_id"]
            penalty = diversity * seen.get(conv, 0) if conv is not None else 0.0
            seen[conv] = seen.get(conv, 0) + 1
            adjusted.append((item[5] - penalty, -n, item))
        adjusted.sort(key=lambda a: (-a[0], -a[1]))
        return [(*item[:5], score, item[6]) for score, _, item in adjusted]

    def touch(self, memory_ids: Sequence[str], user_id: str | None = None) -> None:
        """Record an access: access_count + 1, accessed_at now (and, with ``user_id``, tell the
        listeners the memories were recalled)."""
        if not memory_ids:
            return
        now = self.clock()
        with self.db.transaction() as db:
            db.executemany("UPDATE memories SET accessed_at = ? WHERE id = ?", [(iso_of(now), i) for i in memory_ids])
            db.executemany(
                "UPDATE memory_scores SET access_count = access_count + 1, accessed_ts = ? "
                "WHERE memory_rowid = (SELECT rowid FROM memories WHERE id = ?)",
                [(now, i) for i in memory_ids],
            )
        if user_id is not None:
            self._tell("memories_recalled", user_id, memory_ids)

    def retrieve_for_prompt(self, user_id: str, message: str, query_vector: np.ndarray | None = None, *,
                            candidates: list[tuple[ScoredMemory, str]] | None = None,
                            ) -> tuple[str, list[ScoredMemory]]:
        """Context for the model: top ``rag_limit`` above ``rag_threshold``, ordered by type
        priority, whole contents within 2,000 characters; the injected memories are touched.

        ``candidates`` (the explanation of an answer, :mod:`assistant.extended.explain`): when a
        list is given, every memory that was in the running is appended to it with what became of
        it (:data:`~assistant.memory.scoring.CANDIDATE_STATES`): ``injected``, ``cut_budget`` (above
        the threshold and among the ``rag_limit`` most relevant, but not whole within the budget),
        ``over_limit`` (above the threshold, beyond ``rag_limit``) and ``below_threshold``; the last
        two at most :data:`~assistant.memory.scoring.NEAR_MISSES` each, best first. Nothing is
        computed for it that retrieval did not compute anyway.

        By default (``rag_threshold_mode = "fused"``) the threshold applies to the fused retrieval
        similarity (dense cosine with BM25), not to cosine alone: MiniLM puts a question and the
        fact that answers it at cosine 0.4-0.45 ("Where do I live?" / "... I live in Reykjavik."),
        under the default 0.5, so cosine alone would almost never let a memory into the prompt.
        ``"cosine"`` applies it to the cosine alone (:data:`RAG_SEARCH_MODE`)."""
        s = self.settings
        p = self.params_for(user_id)  # rag_threshold and rag_limit: the user's tuned ones, if any
        if query_vector is None:
            query_vector = self.embedder.embed([message])[0]
        # Rank the pool by retrieval similarity so every memory above the threshold is in it
        # (ranked by relevance, important-but-dissimilar memories could crowd them out), then keep
        # the most relevant of those.
        mode = RAG_SEARCH_MODE[s.rag_threshold_mode]
        if mode == "hybrid" and s.retrieval == "hybrid+graph":
            mode = "hybrid+graph"
        found = self.search(user_id, message, limit=max(p.rag_limit * 10, 50), query_vector=query_vector,
                            mode=mode, rank_by="similarity")
        above = sorted((m for m in found if m.fused >= p.rag_threshold), key=lambda m: -m.relevance)
        eligible = above[: p.rag_limit]
        ordered = order_for_prompt(eligible, key_type=lambda m: m.memory.memory_type, key_relevance=lambda m: m.relevance)
        contents = [m.memory.content for m in ordered]
        kept = fit_in_budget(contents)
        used = [ordered[i] for i in kept]
        context = build_context(contents)
        if candidates is not None:
            kept_set = set(kept)
            candidates.extend((m, INJECTED if i in kept_set else CUT_BUDGET) for i, m in enumerate(ordered))
            candidates.extend((m, OVER_LIMIT) for m in above[p.rag_limit: p.rag_limit + NEAR_MISSES])
            below = [m for m in found if m.fused < p.rag_threshold][:NEAR_MISSES]  # ``found`` is by similarity
            candidates.extend((m, BELOW_THRESHOLD) for m in below)
        self.touch([m.memory.id for m in used], user_id)
        return context, used

    # --- learning --------------------------------------------------------------------------------

    def learn(self, user_id: str, user_message: str, reply: str = "", *, conversation_id: str | None = None,
              query_vector: np.ndarray | None = None) -> tuple[Memory, bool]:
        """Score the exchange and store what the user said, or merge it into a near-identical
        memory (cosine above ``merge_threshold``). Returns the memory and whether it was merged."""
        learned = score_exchange(user_message, reply)
        if query_vector is None:
            query_vector = self.embedder.embed([user_message])[0]
        nearest = self.search(user_id, user_message, limit=1, query_vector=query_vector, mode="dense",
                              rank_by="similarity")
        if nearest and nearest[0].similarity > self.settings.merge_threshold:
            return self._merge(nearest[0].memory, user_message, learned.importance, learned.memory_type), True
        memory = self.add(user_id, user_message, memory_type=learned.memory_type, importance=learned.importance,
                          conversation_id=conversation_id, embedding=query_vector)
        return memory, False

    def _merge(self, old: Memory, new_text: str, importance: float, memory_type: MemoryType) -> Memory:
        """Merge on plaintext: ``old.content`` was opened by ``get``; the union is sealed again."""
        content = merge_text(old.content, new_text)
        summary = content[:SUMMARY_CHARS]
        kind = memory_type if type_rank(memory_type) < type_rank(old.memory_type) else old.memory_type
        vector = self.embedder.embed([content])[0] if content != old.content else None
        now = self.clock()
        row = self._row(old.user_id, old.id)
        with self.db.transaction() as db:
            db.execute(
                "UPDATE memories SET content = ?, summary = ?, memory_type = ?, updated_at = ?, "
                "embedding = coalesce(?, embedding) WHERE rowid = ?",
                (self.sealer.seal(content, sealed_at("content", old.id, old.user_id)),
                 self.sealer.seal(summary, sealed_at("summary", old.id, old.user_id)), kind.value, iso_of(now),
                 None if vector is None else vector.tobytes(), row["rowid"]),
            )
            db.execute(
                "UPDATE memory_scores SET importance = ?, decay_type = ?, low_since = NULL WHERE memory_rowid = ?",
                (max(old.importance, importance), decay_type(kind, old.original_memory_type), row["rowid"]),
            )
            if content != old.content:
                self.keywords.remove([row["rowid"]])
                self.keywords.add([(row["rowid"], old.user_id, content)])
        if vector is not None:
            self.indexes.update(old.user_id, row["rowid"], vector)
        if content != old.content:
            self._tell("memories_written", old.user_id, [old.id])
        return self.get(old.user_id, old.id)

    # --- decay -----------------------------------------------------------------------------------

    def decay(self, user_id: str | None = None, *, now: float | None = None, collect_changes: bool = True,
              max_changes: int = 1000) -> DecayReport:
        """One decay cycle (all users, or one), then the clean-up (:func:`run_decay`): memories at or
        below ``min_importance`` for ``cleanup_after_days`` are archived."""
        factors = dict(self.tuning.tuned_decay_factors()) if self.tuning is not None else {}
        return run_decay(self.db, self.settings, self.clock() if now is None else now, user_id,
                         collect_changes=collect_changes, max_changes=max_changes, decay_factors=factors)
