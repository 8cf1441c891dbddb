"""What the precache keeps on disk (m026): prediction and hit statistics, never a precached result.

A predicted query is a row of ``precache_predictions`` per (user, :meth:`query_hash`): the keyed
digest of its canonical form, its wording sealed (associated data: table, column, row id, user), its
latest probability and slot, how often it was predicted and hit, and the time the hits saved.
``precache_stats`` keeps each user's counters (:class:`Counters`). The precache counts in memory and
writes both here at each refresh and when it closes (:meth:`Precache.flush`), not on the chat path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from uuid import uuid4

from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.extended.precache_predict import Prediction
from assistant.storage.db import Database


@dataclass
class Counters:
    """One user's lookups: ``hits`` answered from the precache, ``misses`` not; on the hits, the
    ``retrieval_ms`` the refresh spent (what the hits did not spend again) and the ``lookup_ms`` they
    took; tool calls answered from the precache and what their real calls took."""

    hits: int = 0
    misses: int = 0
    retrieval_ms: float = 0.0
    lookup_ms: float = 0.0
    tool_hits: int = 0
    tool_saved_ms: float = 0.0

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else 0.0

    @property
    def time_saved_ms(self) -> float:
        return self.retrieval_ms - self.lookup_ms + self.tool_saved_ms


@dataclass
class PredictionRecord:
    id: str
    query: str
    probability: float
    slot: str
    days_asked: int
    active_days: int
    first_predicted_at: str
    predicted_at: str
    times_predicted: int
    refreshed_at: str | None
    retrieval_ms: float | None
    hits: int
    saved_ms: float

    def as_dict(self) -> dict:
        return asdict(self)


COUNTER_COLUMNS = ("hits", "misses", "retrieval_ms", "lookup_ms", "tool_hits", "tool_saved_ms")


class PrecacheStats:
    def __init__(self, db: Database, sealer: Sealer):
        self.db = db
        self.sealer = sealer

    def query_hash(self, user_id: str, key: str) -> str:
        """The keyed digest of a canonical query (equal queries of one user give equal hashes, nothing leaks)."""
        return self.sealer.token(f"precache\x00{user_id}\x00{key}").hex()

    def counters(self, user_id: str) -> Counters:
        row = self.db.one("SELECT * FROM precache_stats WHERE user_id = ?", (str(user_id),))
        return Counters(**{c: row[c] for c in COUNTER_COLUMNS}) if row else Counters()

    def save_counters(self, counters: dict[str, Counters]) -> None:
        if not counters:
            return
        now = iso()
        with self.db.transaction() as db:
            for user_id, c in counters.items():
                db.execute(
                    "INSERT INTO precache_stats (user_id, hits, misses, retrieval_ms, lookup_ms, tool_hits, "
                    "tool_saved_ms, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(user_id) DO UPDATE SET "
                    "hits = excluded.hits, misses = excluded.misses, retrieval_ms = excluded.retrieval_ms, "
                    "lookup_ms = excluded.lookup_ms, tool_hits = excluded.tool_hits, "
                    "tool_saved_ms = excluded.tool_saved_ms, updated_at = excluded.updated_at",
                    (user_id, c.hits, c.misses, c.retrieval_ms, c.lookup_ms, c.tool_hits, c.tool_saved_ms, now))

    def record_predictions(self, predictions: Sequence[Prediction], retrieval_ms: dict[tuple[str, str], float],
                           hits: dict[tuple[str, str], tuple[int, float]]) -> None:
        """Upsert the predictions of a refresh (``retrieval_ms`` of those precached, by (user, key)) and add
        the hits counted since the last write (``(count, saved ms)`` by (user, key))."""
        now = iso()
        with self.db.transaction() as db:
            for p in predictions:
                digest = self.query_hash(p.user_id, p.key)
                row = db.one("SELECT id FROM precache_predictions WHERE user_id = ? AND query_hash = ?",
                             (p.user_id, digest))
                ident = row["id"] if row else str(uuid4())
                sealed = self.sealer.seal(p.text, SealContext("precache_predictions", "query_sealed", ident, p.user_id))
                took = retrieval_ms.get((p.user_id, p.key))
                refreshed = now if took is not None else None
                if row is None:
                    db.execute(
                        "INSERT INTO precache_predictions (id, user_id, query_hash, query_sealed, probability, slot, "
                        "days_asked, active_days, first_predicted_at, predicted_at, refreshed_at, retrieval_ms) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (ident, p.user_id, digest, sealed, p.probability, p.slot.label, p.days_asked, p.active_days,
                         now, now, refreshed, took))
                else:
                    db.execute(
                        "UPDATE precache_predictions SET query_sealed = ?, probability = ?, slot = ?, days_asked = ?, "
                        "active_days = ?, predicted_at = ?, times_predicted = times_predicted + 1, "
                        "refreshed_at = coalesce(?, refreshed_at), retrieval_ms = coalesce(?, retrieval_ms) "
                        "WHERE id = ?",
                        (sealed, p.probability, p.slot.label, p.days_asked, p.active_days, now, refreshed, took, ident))
            for (user_id, key), (count, saved) in hits.items():
                db.execute("UPDATE precache_predictions SET hits = hits + ?, saved_ms = saved_ms + ? "
                           "WHERE user_id = ? AND query_hash = ?", (count, saved, user_id, self.query_hash(user_id, key)))

    def history(self, user_id: str, limit: int = 50) -> list[PredictionRecord]:
        """The user's predicted queries, latest predicted first, wordings opened."""
        rows = self.db.query("SELECT * FROM precache_predictions WHERE user_id = ? ORDER BY predicted_at DESC, "
                             "probability DESC LIMIT ?", (str(user_id), limit))
        return [PredictionRecord(
            r["id"], self.sealer.open(r["query_sealed"], SealContext("precache_predictions", "query_sealed", r["id"],
                                                                     r["user_id"])),
            r["probability"], r["slot"], r["days_asked"], r["active_days"], r["first_predicted_at"], r["predicted_at"],
            r["times_predicted"], r["refreshed_at"], r["retrieval_ms"], r["hits"], r["saved_ms"]) for r in rows]
