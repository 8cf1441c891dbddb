"""The query history precache prediction reads: each user's messages with their times, and the read-only
tool calls the replies made.

Message texts are sealed (:mod:`assistant.chat.conversations`) and tool arguments too
(:mod:`assistant.chat.tool_runs`); both are opened here in memory, with the associated data they were
sealed under, and never written anywhere. A reply is the assistant message right after the user's
message in its conversation (``seq + 1``); its tool runs (status ``ok``) are looked up by its id.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime, tzinfo

from assistant.clock import epoch_of, iso
from assistant.crypto import SealContext, Sealer
from assistant.extended.precache_predict import Asked, ToolPlan
from assistant.storage.db import Database

log = logging.getLogger("assistant.precache")

# (tool name, arguments as the model sent them) -> the canonical cache key, or None (not cacheable)
CanonicalCall = Callable[[str, dict], str | None]


class QueryHistory:
    def __init__(self, db: Database, sealer: Sealer, zone: tzinfo, cacheable_tools: frozenset[str] = frozenset()):
        self.db = db
        self.sealer = sealer
        self.zone = zone
        self.cacheable_tools = cacheable_tools

    def users(self, since: datetime) -> list[str]:
        """Users with at least one message since ``since``."""
        rows = self.db.query(
            "SELECT DISTINCT c.user_id FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE m.role = 'user' AND m.created_at >= ? ORDER BY c.user_id", (iso(since),))
        return [r["user_id"] for r in rows]

    def _open(self, value: bytes | str, table: str, column: str, row_id: str, user_id: str) -> str:
        return value if isinstance(value, str) else self.sealer.open(value, SealContext(table, column, row_id, user_id))

    def asked(self, user_id: str, since: datetime, canonical_call: CanonicalCall | None = None) -> list[Asked]:
        """``user_id``'s messages since ``since``, oldest first, each with the cacheable tool calls of its reply."""
        rows = self.db.query(
            "SELECT m.id, m.content, m.created_at, (SELECT r.id FROM messages r WHERE r.conversation_id = "
            "m.conversation_id AND r.seq = m.seq + 1 AND r.role = 'assistant') AS reply_id "
            "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE c.user_id = ? AND m.role = 'user' AND m.created_at >= ? ORDER BY m.created_at, m.seq",
            (user_id, iso(since)))
        calls = self._tool_calls(user_id, since, canonical_call) if canonical_call is not None else {}
        found = []
        for r in rows:
            try:
                text = self._open(r["content"], "messages", "content", r["id"], user_id)
            except Exception:  # a value that does not open is the store's matter, not the prediction's
                log.warning("precache: message %s of user %s does not open; skipped", r["id"], user_id)
                continue
            at = datetime.fromtimestamp(epoch_of(r["created_at"]), self.zone)
            found.append(Asked(r["id"], text, at, tuple(calls.get(r["reply_id"], ()))))
        return found

    def _tool_calls(self, user_id: str, since: datetime, canonical_call: CanonicalCall) -> dict[str, list[ToolPlan]]:
        """reply message id -> its successful cacheable tool calls."""
        if not self.cacheable_tools:
            return {}
        marks = ",".join("?" * len(self.cacheable_tools))
        rows = self.db.query(
            "SELECT id, message_id, tool, arguments_sealed FROM tool_runs WHERE user_id = ? AND created_at >= ? "
            f"AND status = 'ok' AND tool IN ({marks}) ORDER BY created_at, iteration, position",  # noqa: S608
            (user_id, iso(since), *sorted(self.cacheable_tools)))
        found: dict[str, list[ToolPlan]] = {}
        for r in rows:
            try:
                arguments = json.loads(self._open(r["arguments_sealed"], "tool_runs", "arguments_sealed", r["id"],
                                                  user_id))
            except Exception:
                continue
            key = canonical_call(r["tool"], arguments) if isinstance(arguments, dict) else None
            if key is not None:
                found.setdefault(r["message_id"], []).append(
                    ToolPlan(r["tool"], key, json.dumps(arguments, ensure_ascii=False, sort_keys=True)))
        return found
