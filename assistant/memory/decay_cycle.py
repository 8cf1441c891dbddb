"""One decay cycle over the ``memory_scores`` rows, in one SQL statement, then the clean-up.

The formula and its per-type parameters are in :mod:`assistant.memory.decay`; this runs them in
SQLite for every memory of every user (or one user) at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from assistant.config import MemorySettings
from assistant.memory.decay import (
    CLEANED_UP,
    DECAY_PARAMS,
    NOT_DECAYED,
    SECONDS_PER_DAY,
    base_rate_from_factor,
    cleanup_due,
    next_low_since,
)
from assistant.memory.records import iso_of
from assistant.memory.types import MemoryType
from assistant.storage.db import Database


@dataclass
class DecayReport:
    ran_at: str
    processed: int = 0
    changed: int = 0
    cleaned_up: int = 0
    changes: list[dict] = field(default_factory=list)


def run_decay(db: Database, settings: MemorySettings, now: float, user_id: str | None = None, *,
              collect_changes: bool = True, max_changes: int = 1000,
              decay_factors: Mapping[str, float] | None = None) -> DecayReport:
    """One decay cycle (all users, or one), in one SQL statement; then the clean-up: memories at or
    below ``min_importance`` for ``cleanup_after_days`` are archived (see :mod:`assistant.memory.decay`).
    ``days`` counts from each memory's previous decay (or creation). ``decay_factors`` (user id ->
    decay factor): the users whose base rate is their own (tuned, :mod:`assistant.memory.tuning`); the
    others decay at ``settings.decay_factor``."""
    base = base_rate_from_factor(settings.decay_factor)
    rates = {str(u): base_rate_from_factor(f) for u, f in (decay_factors or {}).items()}
    if user_id:
        base, rates = rates.get(str(user_id), base), {}
    params = [(t.value, p.modifier, p.floor) for t, p in DECAY_PARAMS.items()]
    values = ",".join("(?, ?, ?)" for _ in params)
    flat = [v for p in params for v in p]
    rate_sql = "?"
    if rates:  # per-user base rates: a second table in the WITH clause, the default rate for the rest
        values += "), r(u, v) AS (VALUES " + ",".join("(?, ?)" for _ in rates)
        flat += [v for pair in rates.items() for v in pair]
        rate_sql = "coalesce((SELECT r.v FROM r WHERE r.u = memory_scores.user_id), ?)"
    user_clause, user_args = ("AND user_id = ?", [str(user_id)]) if user_id else ("", [])
    skip = ",".join(f"'{t.value}'" for t in NOT_DECAYED)
    before: dict[int, float] = {}
    if collect_changes:
        before = {
            r["memory_rowid"]: r["importance"]
            for r in db.query(
                f"SELECT memory_rowid, importance FROM memory_scores WHERE decay_type NOT IN ({skip}) {user_clause}",
                user_args,
            )
        }
    # One pass over the narrow memory_scores rows; decay_type is the type whose parameters
    # apply (an Archived memory keeps its original type there).
    sql = (
        f"WITH p(t, m, f) AS (VALUES {values}) "
        f"UPDATE memory_scores SET importance = min(1.0, max(importance * exp(-{rate_sql} * p.m / (1.0 + ln(1.0 + "
        "access_count)) * (max(? - decay_ts, 0.0) / 86400.0)) + min(access_count * 0.005, 0.08), p.f)), "
        f"decay_ts = ? FROM p WHERE p.t = memory_scores.decay_type AND decay_type NOT IN ({skip}) {user_clause} "
        + ("RETURNING memory_rowid, importance" if collect_changes else "")
    )
    report = DecayReport(ran_at=iso_of(now))
    with db.transaction():
        if collect_changes:
            after = db.query(sql, [*flat, base, now, now, *user_args])
            report.processed = len(after)
            changed = [(r["memory_rowid"], before[r["memory_rowid"]], r["importance"]) for r in after
                       if r["memory_rowid"] in before and abs(before[r["memory_rowid"]] - r["importance"]) > 1e-12]
            report.changed = len(changed)
            shown = changed[:max_changes]
            if shown:
                marks = ",".join("?" * len(shown))
                ids = {r["rowid"]: r["id"] for r in db.query(
                    f"SELECT rowid, id FROM memories WHERE rowid IN ({marks})", [c[0] for c in shown])}
                report.changes = [{"id": ids[rowid], "before": b, "after": a} for rowid, b, a in shown]
        else:
            db.execute(sql, [*flat, base, now, now, *user_args])
            report.processed = report.changed = int(db.scalar("SELECT changes()"))
        report.cleaned_up = clean_up(db, settings, now, user_id)
    return report


def clean_up(db: Database, settings: MemorySettings, now: float, user_id: str | None = None) -> int:
    """Track since when each memory is at or below ``min_importance`` and archive those that
    have been for ``cleanup_after_days`` (:func:`next_low_since`, :func:`cleanup_due`). Only
    rows whose state may change are read: one that has just got low, one that is no longer,
    one that is due; a memory that stays low reads nothing. Returns how many were archived."""
    s = settings
    low, due_before = s.min_importance + 1e-12, now - s.cleanup_after_days * SECONDS_PER_DAY + 1e-6
    clause, args = ("AND user_id = ?", [str(user_id)]) if user_id else ("", [])
    skip = ",".join(f"'{t.value}'" for t in NOT_DECAYED)
    rows = db.query(
        "SELECT memory_rowid AS rowid, importance, low_since FROM memory_scores "
        f"WHERE decay_type NOT IN ({skip}) AND low_since IS NOT ? {clause} AND ((importance <= ? AND "
        "low_since IS NULL) OR (importance > ? AND low_since IS NOT NULL) OR low_since <= ?)",
        [CLEANED_UP, *args, low, low, due_before],
    )
    if not rows:
        return 0
    before = np.array([np.nan if r["low_since"] is None else r["low_since"] for r in rows], dtype=np.float64)
    after = next_low_since(np.array([r["importance"] for r in rows]), before, now, s.min_importance)
    due = cleanup_due(after, now, s.cleanup_after_days)
    db.executemany("UPDATE memory_scores SET low_since = ? WHERE memory_rowid = ?",
                   [(CLEANED_UP if d else None if np.isnan(a) else float(a), r["rowid"])
                    for r, a, d in zip(rows, after, due, strict=True)])
    archived = 0
    for r, d in zip(rows, due, strict=True):  # an Archived memory is marked, not archived again
        if d:
            db.execute(
                "UPDATE memories SET original_memory_type = memory_type, memory_type = ?, archived_at = ? "
                "WHERE rowid = ? AND memory_type != ?",
                (MemoryType.ARCHIVED.value, iso_of(now), r["rowid"], MemoryType.ARCHIVED.value),
            )
            archived += int(db.scalar("SELECT changes()"))
    return archived
