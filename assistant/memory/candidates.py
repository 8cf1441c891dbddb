"""The candidates of a hybrid search, gathered once: what :meth:`MemoryStore.search` ranks, and what
retrieval-parameter optimisation re-scores trial after trial without searching again.

:func:`gather` collects the rows of the dense and keyword pools (and, with the neighbour context on, the
neighbours of keyword matches: ``HybridWeights.context``), with each row's dense cosine and raw BM25.
:func:`features` turns a gathered pool into per-candidate arrays that do not depend on any weight: cosine,
normalised keyword score, the best keyword score of its neighbours, its temporal-grounding flags,
importance, hours since its last access, age in days, type, access count and length. Every retrieval
score of the store is a function of these and the parameters (:mod:`assistant.learning.optimize_score`
recomputes them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from assistant.memory import temporal
from assistant.memory.decay import TYPE_CODES
from assistant.memory.scoring import hours_between, type_rank
from assistant.memory.types import MemoryType

if TYPE_CHECKING:
    from assistant.memory.store import MemoryStore


@dataclass
class CandidatePool:
    rows: dict[int, dict]  # rowid -> memory_rows row
    dense: dict[int, float]  # rowid -> cosine with the query
    keyword: dict[int, float]  # rowid -> raw BM25
    adjacent: dict[int, set[int]] = field(default_factory=dict)  # rowid -> the keyword matches it neighbours


def gather(store: MemoryStore, user_id: str, query: str, query_vector: np.ndarray | None, mode: str, pool: int,
           context: bool) -> CandidatePool:
    """The candidates of ``mode`` (dense, keyword or hybrid): the ``pool`` best of each retriever, and
    with ``context`` the previous and next memory (in stored order) of each keyword match in its
    conversation. Every candidate gets its cosine unless ``mode`` is keyword."""
    dense: dict[int, float] = {}
    if mode != "keyword":
        ids, sims = store.index(user_id).search(query_vector, pool)
        dense = dict(zip(ids.tolist(), sims.tolist(), strict=True))
    keyword = store.keywords.search(user_id, query, pool) if mode != "dense" else {}
    rowids = list(dense.keys() | keyword.keys())
    if not rowids:
        return CandidatePool({}, dense, keyword)
    db = store.db
    marks = ",".join("?" * len(rowids))
    rows = {r["rowid"]: r for r in db.query(f"SELECT * FROM memory_rows WHERE rowid IN ({marks})", rowids)}
    adjacent: dict[int, set[int]] = {}
    matched = [r for r in keyword if r in rows and rows[r]["conversation_id"] is not None]
    if context and matched:
        conversations = {rows[r]["conversation_id"] for r in matched}
        cmarks = ",".join("?" * len(conversations))
        kmarks = ",".join("?" * len(matched))
        pairs = db.query(
            "SELECT rowid, prev, next FROM (SELECT rowid, lag(rowid) OVER w AS prev, lead(rowid) OVER w AS next "
            f"FROM memories WHERE user_id = ? AND conversation_id IN ({cmarks}) "
            f"WINDOW w AS (PARTITION BY conversation_id ORDER BY coalesce(position, rowid), rowid)) "
            f"WHERE rowid IN ({kmarks})",
            (user_id, *conversations, *matched),
        )
        for r in pairs:
            for other in (r["prev"], r["next"]):
                if other is not None:
                    adjacent.setdefault(other, set()).add(r["rowid"])
        if extra := [r for r in adjacent if r not in rows]:
            emarks = ",".join("?" * len(extra))
            more = db.query(f"SELECT * FROM memory_rows WHERE rowid IN ({emarks})", extra)
            rows.update({r["rowid"]: r for r in more})
    if mode != "keyword" and (missing := [r for r in rows if r not in dense]):
        vectors = np.frombuffer(b"".join(rows[r]["embedding"] for r in missing), dtype=np.float32)
        sims = vectors.reshape(len(missing), -1) @ np.asarray(query_vector, dtype=np.float32)
        dense.update(zip(missing, sims.tolist(), strict=True))
    return CandidatePool(rows, dense, keyword, adjacent)


def temporal_flags(store: MemoryStore, query: str, rows: dict[int, dict], rowids: Sequence[int],
                   *, date: bool = True, when: bool = True,
                   texts: dict[int, str] | None = None) -> dict[int, tuple[bool, bool]]:
    """rowid -> (its day is in the period the question names, it places something in time while the
    question asks when), for the rows where either holds (``HybridWeights.date``/``when``)."""
    window = temporal.question_window(query) if date else None
    asks = when and temporal.asks_when(query)
    if window is None and not asks:
        return {}
    out: dict[int, tuple[bool, bool]] = {}
    for rowid in rowids:
        text = texts[rowid] if texts is not None else store._open(rows[rowid], "content")
        in_window = window is not None and temporal.in_window(temporal.memory_day(text, rows[rowid]["created_at"]),
                                                              window)
        mentions = asks and temporal.mentions_time(text)
        if in_window or mentions:
            out[rowid] = (bool(in_window), bool(mentions))
    return out


@dataclass(frozen=True)
class Features:
    """One query's candidates as arrays (one entry per candidate memory, Quarantined ones left out)."""

    ids: tuple[str, ...]
    cosine: np.ndarray
    keyword: np.ndarray  # BM25 / the query's best BM25, 0..1
    near: np.ndarray  # the best normalised keyword score of its neighbours (0: none)
    in_window: np.ndarray  # bool
    mentions_time: np.ndarray  # bool
    importance: np.ndarray
    hours: np.ndarray  # since last access
    age_days: np.ndarray  # since it was created (the time its importance has been decaying)
    type_code: np.ndarray  # decay.TYPE_CODES of its decay type (an Archived memory: its original type)
    access_count: np.ndarray
    archived: np.ndarray  # bool
    chars: np.ndarray  # length of its content (the prompt budget)
    prompt_rank: np.ndarray  # scoring.type_rank of its type (the prompt's order: Correction, Fact, ...)

    def __len__(self) -> int:
        return len(self.ids)


def features(store: MemoryStore, user_id: str, query: str, query_vector: np.ndarray, *, now: float,
             pool: int = 50) -> Features:
    """The weight-free features of ``query``'s hybrid candidates for ``user_id`` (see the module)."""
    found = gather(store, str(user_id), query, query_vector, "hybrid", pool, context=True)
    rows = {r: row for r, row in found.rows.items() if row["memory_type"] != MemoryType.QUARANTINED}
    rowids = list(rows)
    top_kw = max(found.keyword.values(), default=0.0) or 1.0
    kw = {r: found.keyword.get(r, 0.0) / top_kw for r in rowids}
    texts = {r: store._open(rows[r], "content") for r in rowids}
    flags = temporal_flags(store, query, rows, rowids, texts=texts)
    near = [max((kw.get(n, 0.0) for n in found.adjacent.get(r, ()) if n in rows), default=0.0) for r in rowids]

    return Features(
        ids=tuple(rows[r]["id"] for r in rowids),
        cosine=np.array([found.dense.get(r, 0.0) for r in rowids], dtype=np.float64),
        keyword=np.array([kw[r] for r in rowids], dtype=np.float64),
        near=np.array(near, dtype=np.float64),
        in_window=np.array([flags.get(r, (False, False))[0] for r in rowids], dtype=bool),
        mentions_time=np.array([flags.get(r, (False, False))[1] for r in rowids], dtype=bool),
        importance=np.array([rows[r]["importance"] for r in rowids], dtype=np.float64),
        hours=np.array([max(now - rows[r]["accessed_ts"], 0.0) / 3600.0 for r in rowids], dtype=np.float64),
        age_days=np.array([hours_between(rows[r]["created_at"], now) / 24.0 for r in rowids], dtype=np.float64),
        type_code=np.array([TYPE_CODES[MemoryType(rows[r]["decay_type"])] for r in rowids], dtype=np.int64),
        access_count=np.array([rows[r]["access_count"] for r in rowids], dtype=np.float64),
        archived=np.array([rows[r]["memory_type"] == MemoryType.ARCHIVED for r in rowids], dtype=bool),
        chars=np.array([len(texts[r]) for r in rowids], dtype=np.int64),
        prompt_rank=np.array([type_rank(MemoryType(rows[r]["memory_type"])) for r in rowids], dtype=np.int64),
    )
