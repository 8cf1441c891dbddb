"""One importance-decay cycle over many memories, against a numpy baseline of the same formula.

Setup (not measured): a fresh SQLite store (the real schema, migrations applied) gets ``--rows``
memories through raw ``executemany`` into ``memories`` with placeholder sealed bytes of realistic
sizes (content, summary, tags and a 384-dim float32 embedding, so rows are as wide as real ones),
mixed types (incl. Archived with an original type, and Hypothesis / Quarantined, which do not
decay), access counts and last-decay times spread over a few days, spread over ``--users`` users.
A share of the Context, ToolResult and DreamInsight memories sits at its 0.10 floor since 0-40
days, so the clean-up archives some on every cycle.

Measured, per cycle (``--cycles``, each one simulated day after the previous):

* ``MemoryStore.decay(collect_changes=False)``: the whole cycle as the scheduler runs it (the
  UPDATE over every decaying memory, then the clean-up: memories at or below ``min_importance``
  for ``cleanup_after_days`` are archived);
* numpy: ``assistant.memory.decay.decay_arrays`` over the same rows (arrays already in memory:
  the compute alone), and separately the time to read those arrays out of SQLite.

Why the schema splits: a memory row is ~2 KB (the 1.5 KB float32 embedding is inline), so an
UPDATE of every memory row rewrote every data page (~4 GB at 1M rows through the WAL): 26-44 s.
The decay state (importance, access count, decay time, decay type) therefore lives in the narrow
``memory_scores`` table, which is all a cycle rewrites.

Checked: the SQL result equals the numpy result (|difference| <= 1e-9) on ``--sample`` random
rows, non-decaying types are untouched, the number of processed rows matches, and the number
archived equals what ``next_low_since`` / ``cleanup_due`` give on the numpy arrays. Target: a
cycle over 1M memories <= 2 s.

    .venv/bin/python benchmarks/decay.py [--rows 1000000] [--cycles 3] [--sample 20000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import MemorySettings  # noqa: E402
from assistant.crypto import NONCE_BYTES, Sealer  # noqa: E402
from assistant.embeddings.hashing import HashingEmbedder  # noqa: E402
from assistant.memory.decay import (  # noqa: E402
    NOT_DECAYED,
    TYPE_CODES,
    base_rate_from_factor,
    cleanup_due,
    decay_arrays,
    next_low_since,
)
from assistant.memory.store import MemoryStore, iso_of  # noqa: E402
from assistant.memory.types import MemoryType  # noqa: E402
from assistant.storage.db import Database  # noqa: E402
from benchmarks._measure import rss_mb  # noqa: E402

DAY = 86400.0
T0 = 1_717_200_000.0  # 2024-06-01T00:00:00Z
TAG_BYTES = 16  # Poly1305 tag
# Share of each type among the memories (Archived rows carry an original type).
TYPE_MIX = {
    MemoryType.CONTEXT: 0.40, MemoryType.FACT: 0.20, MemoryType.PREFERENCE: 0.10, MemoryType.CORRECTION: 0.05,
    MemoryType.TOOL_RESULT: 0.10, MemoryType.DREAM_INSIGHT: 0.03, MemoryType.HYPOTHESIS: 0.04,
    MemoryType.ARCHIVED: 0.06, MemoryType.QUARANTINED: 0.02,
}
ORIGINAL_TYPES = (MemoryType.CONTEXT, MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.TOOL_RESULT)
LOW_FLOOR_TYPES = {MemoryType.CONTEXT, MemoryType.TOOL_RESULT, MemoryType.DREAM_INSIGHT}  # floor 0.10
AT_FLOOR_SHARE = 0.15  # of those, at their floor since 0-40 days


def populate(db: Database, rows: int, users: int, now: float, seed: int, batch: int = 20_000) -> None:
    rng = np.random.default_rng(seed)
    types = list(TYPE_MIX)
    probs = np.array(list(TYPE_MIX.values()))
    # Sealed placeholders: nonce + ciphertext + tag, as wide as sealed real texts (content ~120 chars).
    content = bytes(NONCE_BYTES + 120 + TAG_BYTES)
    summary = bytes(NONCE_BYTES + 100 + TAG_BYTES)
    tags = bytes(NONCE_BYTES + 20 + TAG_BYTES)
    embedding = rng.standard_normal(384).astype(np.float32).tobytes()
    stamp = iso_of(now)
    sql = (
        "INSERT INTO memories (rowid, id, user_id, conversation_id, content, summary, tags, memory_type, "
        "created_at, updated_at, accessed_at, embedding, term_count, original_memory_type) "
        "VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, 12, ?)"
    )
    scores_sql = (
        "INSERT INTO memory_scores (memory_rowid, user_id, decay_type, importance, access_count, accessed_ts, "
        "decay_ts, low_since) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    with tqdm(total=rows, desc="setup: insert memories", unit="row", unit_scale=True) as bar:
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            kinds = rng.choice(len(types), n, p=probs)
            importance = rng.uniform(0.12, 1.0, n)
            access = np.minimum(rng.geometric(0.3, n) - 1, 40)
            decay_ts = now - rng.uniform(0.0, 3.0, n) * DAY
            originals = rng.choice(len(ORIGINAL_TYPES), n)
            at_floor = rng.random(n) < AT_FLOOR_SHARE
            low_since = now - rng.uniform(0.0, 40.0, n) * DAY
            batch_rows, score_rows = [], []
            for i in range(n):
                kind = types[kinds[i]]
                original = ORIGINAL_TYPES[originals[i]].value if kind == MemoryType.ARCHIVED else None
                rowid, user = start + i + 1, f"user-{(start + i) % users}"
                batch_rows.append((rowid, f"m{start + i:09d}", user, content, summary, tags, kind.value,
                                   stamp, stamp, stamp, embedding, original))
                low = bool(at_floor[i]) and kind in LOW_FLOOR_TYPES
                score_rows.append((rowid, user, original or kind.value, 0.1 if low else float(importance[i]),
                                   0 if low else int(access[i]), float(decay_ts[i]), float(decay_ts[i]),
                                   float(low_since[i]) if low else None))
            with db.transaction():
                db.executemany(sql, batch_rows)
                db.executemany(scores_sql, score_rows)
            bar.update(n)


def read_arrays(db: Database) -> dict[str, np.ndarray]:
    """rowid, importance, access count, last decay time, decay type code, whether it decays,
    whether the clean-up may archive it, and since when it is low, of every memory."""
    codes = {t.value: TYPE_CODES[t] for t in MemoryType}
    rowid, importance, access, decay_ts, code, decays, cleanable, low_since = [], [], [], [], [], [], [], []
    for r in db.query("SELECT m.rowid, s.importance, s.access_count, s.decay_ts, s.low_since, m.memory_type, "
                      "m.original_memory_type FROM memories m JOIN memory_scores s ON s.memory_rowid = m.rowid"):
        rowid.append(r["rowid"])
        importance.append(r["importance"])
        access.append(r["access_count"])
        decay_ts.append(r["decay_ts"])
        kind = r["memory_type"]
        if kind == MemoryType.ARCHIVED:
            kind = r["original_memory_type"] or MemoryType.CONTEXT.value
        code.append(codes[kind])
        decays.append(r["memory_type"] not in {t.value for t in NOT_DECAYED})
        cleanable.append(decays[-1] and r["memory_type"] != MemoryType.ARCHIVED)
        low_since.append(np.nan if r["low_since"] is None else r["low_since"])
    return {
        "rowid": np.array(rowid, dtype=np.int64), "importance": np.array(importance), "access": np.array(access),
        "decay_ts": np.array(decay_ts), "code": np.array(code, dtype=np.int64), "decays": np.array(decays),
        "cleanable": np.array(cleanable), "low_since": np.array(low_since, dtype=np.float64),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--sample", type=int, default=20_000, help="rows compared between SQL and numpy")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary database goes")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    settings = MemorySettings()
    base = base_rate_from_factor(settings.decay_factor)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="decay-bench-") as tmp:
        db = Database(Path(tmp) / "assistant.db")
        now = T0
        t = time.perf_counter()
        populate(db, args.rows, args.users, now, args.seed)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size_mb = db.size_bytes() / 1e6
        print(f"setup: {args.rows:,} memories, {args.users} users, database {size_mb:,.0f} MB, "
              f"{time.perf_counter() - t:.1f} s (not measured)")
        store = MemoryStore(db, Sealer(None), HashingEmbedder(), settings, clock=lambda: now)
        rng = np.random.default_rng(args.seed + 1)

        sql_times, numpy_times, read_times = [], [], []
        print(f"\n{'cycle':>5} {'processed':>10} {'cleaned':>8} {'SQL decay':>10} {'numpy compute':>14} "
              f"{'numpy read':>11} {'SQL/numpy':>10} {'max |diff|':>11}")
        for cycle in range(1, args.cycles + 1):
            now += DAY
            t = time.perf_counter()
            arrays = read_arrays(db)
            read_times.append(time.perf_counter() - t)
            decaying = arrays["decays"]
            t = time.perf_counter()
            days = np.maximum(now - arrays["decay_ts"][decaying], 0.0) / DAY
            expected = np.minimum(1.0, decay_arrays(arrays["importance"][decaying], arrays["code"][decaying],
                                                    arrays["access"][decaying], days, base))
            numpy_times.append(time.perf_counter() - t)

            t = time.perf_counter()
            report = store.decay(collect_changes=False, now=now)
            sql_times.append(time.perf_counter() - t)

            # Check a random sample of rows (decaying and not) against numpy.
            pick = rng.choice(len(arrays["rowid"]), min(args.sample, len(arrays["rowid"])), replace=False)
            want = arrays["importance"].copy()
            want[decaying] = expected
            sample_ids = arrays["rowid"][pick]
            got: dict[int, float] = {}
            for start in range(0, len(sample_ids), 10_000):
                chunk = sample_ids[start:start + 10_000].tolist()
                marks = ",".join("?" * len(chunk))
                got.update((r["rowid"], r["importance"]) for r in
                           db.query(f"SELECT rowid, importance FROM memory_rows WHERE rowid IN ({marks})", chunk))
            kept = [i for i in pick if int(arrays["rowid"][i]) in got]
            diff = max((abs(got[int(arrays["rowid"][i])] - want[i]) for i in kept), default=0.0)
            cleanable = arrays["cleanable"]
            low = next_low_since(want[cleanable], arrays["low_since"][cleanable], now, settings.min_importance)
            removed_expected = int(np.sum(cleanup_due(low, now, settings.cleanup_after_days)))
            ok = (diff <= 1e-9 and report.processed == int(decaying.sum())
                  and report.cleaned_up == removed_expected and len(kept) == len(pick))  # archived, not deleted
            ratio = sql_times[-1] / numpy_times[-1]
            print(f"{cycle:>5} {report.processed:>10,} {report.cleaned_up:>8,} {sql_times[-1]:>9.3f}s "
                  f"{numpy_times[-1]:>13.3f}s {read_times[-1]:>10.3f}s {ratio:>9.1f}x {diff:>11.2e}"
                  + ("" if ok else "  MISMATCH"))
            if not ok:
                raise SystemExit(f"SQL and numpy disagree: max diff {diff}, processed {report.processed} vs "
                                 f"{int(decaying.sum())}, cleaned {report.cleaned_up} vs {removed_expected}")

        cur, peak = rss_mb()
        sql_p50 = float(np.median(sql_times))
        print(f"\nSQL decay cycle over {args.rows:,} memories: median {sql_p50:.3f} s "
              f"(min {min(sql_times):.3f}, max {max(sql_times):.3f}); target (1M memories) <= 2 s: "
              f"{'MET' if sql_p50 <= 2.0 else 'NOT MET'}")
        print(f"numpy decay_arrays (compute only): median {np.median(numpy_times):.3f} s; "
              f"+ reading the arrays from SQLite {np.median(read_times):.3f} s "
              f"-> SQL / numpy compute = {sql_p50 / np.median(numpy_times):.1f}x, "
              f"SQL / (numpy read + compute) = {sql_p50 / (np.median(numpy_times) + np.median(read_times)):.2f}x")
        print(f"results equal on {args.sample:,} sampled rows per cycle (|diff| <= 1e-9)")
        print(f"database {size_mb:,.0f} MB = {size_mb * 1e6 / args.rows:,.0f} bytes per memory")
        print(f"RSS {cur:,.0f} MB (peak {peak:,.0f} MB); {os.cpu_count()} cores, timings on a shared machine")
        db.close()


if __name__ == "__main__":
    main()
