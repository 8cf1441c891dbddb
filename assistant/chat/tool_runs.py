"""What the tool loop did for an answer: which tool, with which arguments, what came back, how long.

Kept per reply message so an answer can be explained later (``GET /v1/tools/runs``). Arguments and
results are the user's data (a contact, an e-mail, a place): they are sealed like chat messages.

The defence's verdict on a run's result (``ToolRecord.verdict``; ``ToolRun.defence``, its
``as_dict()``) is kept without a schema change: a run with a verdict seals
``{"__defence__": 1, "result": ..., "defence": {...}}`` in ``result_sealed`` instead of the bare
result; reading unwraps it (rows written before have no verdict). The loop's review of the
arguments (``ToolRecord.review``: dates resolved, words kept, prerequisites, repairs) travels in the
same envelope under ``"review"``. The chat service records what the
defence flagged outside any tool (the user's message, a retrieved memory) as a run of the pseudo-tool
:data:`DEFENCE_TOOL` (iteration 0, status ``flagged``; like the loop's ``(malformed call)``), so the
explanation of an answer lists it with its tool runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from assistant.chat.tool_loop import ToolRecord
from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.storage.db import Database

MAX_STORED_CHARS = 20_000
ENVELOPE = "__defence__"
DEFENCE_TOOL = "(defence)"


@dataclass(frozen=True)
class ToolRun:
    id: str
    conversation_id: str
    message_id: str
    iteration: int
    tool: str
    # ok | error | approval_required | refused | flagged (a DEFENCE_TOOL record) | prerequisite (not run:
    # another tool must give a value first) | repair (not run: invalid arguments, the model asked again)
    status: str
    arguments: dict[str, Any]
    result: Any
    error: str | None
    duration_ms: float
    created_at: str
    defence: dict[str, Any] | None = None  # the defence's verdict on the result (Verdict.as_dict())
    review: dict[str, Any] | None = None  # what the loop did to the arguments (ToolRecord.review)


def _dump(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_STORED_CHARS else json.dumps({"truncated": text[:MAX_STORED_CHARS]})


class ToolRunStore:
    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    def _result(self, row: dict[str, Any]) -> tuple[Any, dict[str, Any] | None, dict[str, Any] | None]:
        """The stored result, the defence's verdict on it and the argument review (module docstring)."""
        value = self._open(row, "result_sealed")
        if isinstance(value, dict) and value.get(ENVELOPE) == 1 and ("defence" in value or "review" in value):
            return value.get("result"), value.get("defence"), value.get("review")
        return value, None, None

    def _open(self, row: dict[str, Any], column: str) -> Any:
        value = row[column]
        if value is None:
            return None
        at = SealContext("tool_runs", column, row["id"], row["user_id"])
        return json.loads(value if isinstance(value, str) else self.sealer.open(value, at))

    def record(self, user_id: UUID | str, conversation_id: str, message_id: str,
               records: Iterable[ToolRecord]) -> list[ToolRun]:
        now, user = iso(), str(user_id)
        runs = []
        with self.db.transaction() as db:
            for position, r in enumerate(records):
                defence = r.verdict.as_dict() if r.verdict is not None else None
                run = ToolRun(str(uuid4()), conversation_id, message_id, r.iteration, r.call.name, r.status,
                              r.call.arguments, r.result, r.error, round(r.duration_ms, 3), now, defence, r.review)
                stored = None if r.result is None else _dump(r.result)
                if defence is not None or r.review:  # the verdict and the review survive a truncated result
                    result = None if stored is None else json.loads(stored)
                    envelope = {ENVELOPE: 1, "result": result}
                    envelope.update({k: v for k, v in (("defence", defence), ("review", r.review)) if v})
                    stored = json.dumps(envelope, ensure_ascii=False, default=str)
                db.execute(
                    "INSERT INTO tool_runs (id, user_id, conversation_id, message_id, iteration, position, tool, "
                    "status, arguments_sealed, result_sealed, error, duration_ms, created_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (run.id, user, conversation_id, message_id, run.iteration, position, run.tool, run.status,
                     self.sealer.seal(_dump(run.arguments), SealContext("tool_runs", "arguments_sealed", run.id, user)),
                     None if stored is None else self.sealer.seal(
                         stored, SealContext("tool_runs", "result_sealed", run.id, user)),
                     run.error, run.duration_ms, now),
                )
                runs.append(run)
        return runs

    def list(self, user_id: UUID | str, *, conversation_id: str | None = None, message_id: str | None = None,
             limit: int = 100, offset: int = 0) -> list[ToolRun]:
        """The caller's runs, newest message first and in execution order within a message."""
        where, params = ["user_id = ?"], [str(user_id)]
        if conversation_id is not None:
            where.append("conversation_id = ?")
            params.append(conversation_id)
        if message_id is not None:
            where.append("message_id = ?")
            params.append(message_id)
        rows = self.db.query(
            f"SELECT * FROM tool_runs WHERE {' AND '.join(where)} "  # noqa: S608 (fixed column names)
            "ORDER BY created_at DESC, message_id, iteration, position LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
        runs = []
        for r in rows:
            result, defence, review = self._result(r)
            runs.append(ToolRun(r["id"], r["conversation_id"], r["message_id"], r["iteration"], r["tool"], r["status"],
                                self._open(r, "arguments_sealed"), result, r["error"], r["duration_ms"],
                                r["created_at"], defence, review))
        return runs
