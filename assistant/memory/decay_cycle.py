"""One decay cycle over the ``memory_scores`` rows, in one SQL statement, then the clean-up.

The formula and its per-type parameters are in :mod:`assistant.memory.decay`; this runs them in
SQLite for every memory of every user (or one user) at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from assistant.config import MemorySettings
from assistant.memory.decay import DECAY_PARAMS, NOT_DECAYED, base_rate_from_factor
from assistant.memory.records import iso_of
from assistant.storage.db import Database


@dataclass
class DecayReport:
    ran_at: str
    processed: int = 0
    changed: int = 0
    cleaned_up: int = 0
    changes: list[dict] = field(default_factory=list)


def run_decay(db: Database, settings: MemorySettings, now: float, user_id: str | None = None, *,
              collect_changes: bool = True, max_changes: int = 1000) -> tuple[DecayReport, list[dict]]:
    """One decay cycle (all users, or one); then clean up memories below ``min_importance``.
    ``days`` counts from each memory's previous decay (or creation). Returns the report and the
    removed rows (``rowid``, ``user_id``), which the caller drops from its vector indexes."""
    base = base_rate_from_factor(settings.decay_factor)
    params = [(t.value, p.modifier, p.floor) for t, p in DECAY_PARAMS.items()]
    values = ",".join("(?, ?, ?)" for _ in params)
    flat = [v for p in params for v in p]
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
        "UPDATE memory_scores SET importance = min(1.0, max(importance * exp(-? * p.m / (1.0 + ln(1.0 + "
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
        doomed = db.query(
            f"SELECT memory_rowid AS rowid, user_id FROM memory_scores WHERE importance < ? "
            f"AND decay_type NOT IN ({skip}) {user_clause}",
            [settings.min_importance, *user_args],
        )
        if doomed:
            db.executemany("DELETE FROM memories WHERE rowid = ?", [(r["rowid"],) for r in doomed])
    report.cleaned_up = len(doomed)
    return report, doomed
