"""Where explanations are kept: one sealed row per answer (m023), read back by its owner only.

``body_sealed`` is the :class:`~assistant.extended.explain.Explanation` as JSON, sealed with the
associated data (``explanations``, ``body_sealed``, message id, user id). :meth:`ExplanationStore.get`
answers 404 ``NOT_FOUND`` alike for an unknown id and another user's message; for one of the
caller's own messages without an explanation it says why in ``details.reason``: ``not_an_answer``
(the id is of the user's own message or a note), ``predates_recording`` (stored before m023 ran:
``details.recording_began_at``) or ``not_recorded`` (answered while recording was off).
"""

from __future__ import annotations

import json
import time
from uuid import UUID

from assistant.clock import epoch_of
from assistant.config import Settings
from assistant.crypto import SealContext, Sealer
from assistant.errors import NotFoundError
from assistant.extended.explain import Explanation
from assistant.storage.db import Database

MIGRATION = "m023_explanations"
TABLE = "explanations"
COLUMN = "body_sealed"


class ExplanationStore:
    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)
        self._began: str | None = None

    def _at(self, message_id: str, user_id: str) -> SealContext:
        return SealContext(TABLE, COLUMN, message_id, user_id)

    def save(self, user_id: UUID | str, explanation: Explanation) -> None:
        user, mid = str(user_id), explanation.message_id
        body = json.dumps(explanation.as_dict(), ensure_ascii=False, default=str, separators=(",", ":"))
        self.db.execute(
            "INSERT OR REPLACE INTO explanations (message_id, user_id, conversation_id, created_ts, body_sealed) "
            "VALUES (?, ?, ?, ?, ?)",
            (mid, user, explanation.conversation_id, time.time(), self.sealer.seal(body, self._at(mid, user))),
        )

    def recording_began(self) -> str | None:
        """When this database began recording explanations (m023's ``applied_at``)."""
        if self._began is None:
            row = self.db.one("SELECT applied_at FROM _migrations WHERE name = ?", (MIGRATION,))
            self._began = row["applied_at"] if row is not None else None
        return self._began

    def recent(self, user_id: UUID | str, limit: int = 500) -> list[Explanation]:
        """The caller's ``limit`` most recent explanations, newest first (retrieval-parameter optimisation
        reads which memories each answer was given)."""
        user = str(user_id)
        rows = self.db.query("SELECT message_id, body_sealed FROM explanations WHERE user_id = ? "
                             "ORDER BY created_ts DESC LIMIT ?", (user, int(limit)))
        out = []
        for row in rows:
            value = row["body_sealed"]
            text = value if isinstance(value, str) else self.sealer.open(value, self._at(row["message_id"], user))
            out.append(Explanation.of(json.loads(text)))
        return out

    def get(self, user_id: UUID | str, message_id: UUID | str) -> Explanation:
        """The explanation of the caller's answer ``message_id`` (see the module docstring for the 404s)."""
        user, mid = str(user_id), str(message_id)
        row = self.db.one("SELECT body_sealed FROM explanations WHERE message_id = ? AND user_id = ?", (mid, user))
        if row is not None:
            value = row["body_sealed"]
            text = value if isinstance(value, str) else self.sealer.open(value, self._at(mid, user))
            return Explanation.of(json.loads(text))
        message = self.db.one(
            "SELECT m.role, m.created_at FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE m.id = ? AND c.user_id = ?", (mid, user))
        if message is None:
            raise NotFoundError(f"message {mid} not found")
        if message["role"] != "assistant":
            raise NotFoundError(f"message {mid} is not an answer (its role is {message['role']}): only the "
                                "assistant's answers have explanations", {"reason": "not_an_answer"})
        began = self.recording_began()
        if began is not None and epoch_of(message["created_at"]) < epoch_of(began):
            raise NotFoundError(f"message {mid} predates explanation recording (its answer was stored at "
                                f"{message['created_at']}, recording began at {began}): no explanation exists for it",
                                {"reason": "predates_recording", "recording_began_at": began,
                                 "message_created_at": message["created_at"]})
        raise NotFoundError(f"no explanation was recorded for message {mid}: it was answered while explanation "
                            "recording was off (sovereign_intelligence.enabled = false)",
                            {"reason": "not_recorded", "message_created_at": message["created_at"]})


def build_explanations(settings: Settings, db: Database, sealer: Sealer | None) -> ExplanationStore | None:
    """The store while ``sovereign_intelligence.enabled`` (recording and the route), else None."""
    return ExplanationStore(db, sealer) if settings.sovereign_intelligence.enabled else None
