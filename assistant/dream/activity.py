"""When each user was last active: the idle gate of dream mode.

Active means a chat message (HTTP, messenger or voice: they all go through the chat service) or a
memory written, changed or deleted through the API. Dream mode's own writes are not activity. The
times live in memory; after a restart a user's last activity is read once from what they left in
the database (their newest message, the newest memory they wrote), so a restart does not make
everyone look idle since the epoch, nor active now.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from assistant.clock import epoch_of
from assistant.storage.db import Database


class ActivityTracker:
    def __init__(self, clock: Callable[[], float] = time.time, seed: Callable[[str], float | None] | None = None):
        self.clock = clock
        self.seed = seed
        self._last: dict[str, float] = {}
        self._lock = threading.Lock()

    def touch(self, user_id: str, at: float | None = None) -> None:
        with self._lock:
            self._last[str(user_id)] = self.clock() if at is None else at

    def last_active(self, user_id: str) -> float | None:
        user = str(user_id)
        with self._lock:
            if user in self._last:
                return self._last[user]
        seeded = self.seed(user) if self.seed is not None else None
        with self._lock:
            return self._last.setdefault(user, seeded) if seeded is not None else self._last.get(user)

    def idle_seconds(self, user_id: str) -> float:
        """Seconds since the user was last active (infinite when they never were)."""
        last = self.last_active(user_id)
        return float("inf") if last is None else max(0.0, self.clock() - last)


def seed_from_database(db: Database) -> Callable[[str], float | None]:
    """The newest message of the user's conversations, or their newest memory not written by a dream."""

    def seed(user_id: str) -> float | None:
        row = db.one(
            "SELECT max(t) AS t FROM (SELECT max(updated_at) AS t FROM conversations WHERE user_id = ? "
            "UNION ALL SELECT max(created_at) FROM memories WHERE user_id = ? AND archived_by_session IS NULL "
            "AND memory_type != 'DreamInsight')", (user_id, user_id))
        return epoch_of(row["t"]) if row and row["t"] else None

    return seed
