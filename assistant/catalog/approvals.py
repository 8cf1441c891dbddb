"""Approval requests: of catalog entries that need them, and of tool calls the tool-calling loop
may not make on its own (``tool_calling.require_approval_for``).

A request is ``pending`` until decided. Deciding is atomic: of two concurrent decisions only the
first moves the request on, the other is a ConflictError. A request is decided by someone other
than its requester (ForbiddenError otherwise; who may decide at all, an admin, is the API's rule).
``approved`` lasts while the command or tool runs; once it ran the request is ``executed`` and
names what ran (``execution_id`` of a command; ``tool_run_id`` and the result of a tool call).
``denied`` is final. The request keeps the command text or the tool's arguments it was made for:
the approver approves exactly that.

Requests belong to their requester: ``owner`` arguments restrict reads to one user's requests
(None: every request, for admins).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from uuid import uuid4

from assistant.catalog.store import CatalogEntry
from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import ConflictError, ForbiddenError, NotFoundError, ValidationFailed
from assistant.storage.db import Database

MAX_REASON_CHARS = 1_000
SELF_DECISION = "an approval must be decided by an admin other than its requester"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"  # approved, the command or tool is running
    DENIED = "denied"
    EXECUTED = "executed"


class ApprovalKind(StrEnum):
    COMMAND = "command"  # a catalog entry
    TOOL_CALL = "tool_call"  # a call of the tool-calling loop


@dataclass(frozen=True)
class Approval:
    id: str
    kind: ApprovalKind
    status: ApprovalStatus
    requested_by: str | None
    requested_at: str
    decided_by: str | None
    decided_at: str | None
    reason: str | None
    # a catalog command
    catalog_id: str | None = None
    catalog_name: str | None = None
    command: str | None = None
    risk_level: str | None = None
    execution_id: str | None = None
    # a tool call
    tool_name: str | None = None
    arguments: dict[str, Any] | None = None
    conversation_id: str | None = None
    message_id: str | None = None
    tool_run_id: str | None = None
    result: Any = None
    error: str | None = None


def clean_reason(reason: str | None) -> str | None:
    """A decision's reason, stripped (blank: none); ValidationFailed when too long."""
    reason = (reason or "").strip() or None
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        error = f"must be at most {MAX_REASON_CHARS} characters (got {len(reason)})"
        raise ValidationFailed(f"reason {error}", [{"field": "reason", "error": error}])
    return reason


def _at(column: str, approval_id: str, requested_by: str | None) -> SealContext:
    """Where a request's arguments, result or decision reason is sealed: bound to the requester."""
    return SealContext("command_approvals", column, approval_id, requested_by or "")


class ApprovalStore:
    def __init__(self, db: Database, sealer: Sealer):
        self.db = db
        self.sealer = sealer

    def request(self, entry: CatalogEntry, user_id: str | None) -> Approval:
        approval_id = str(uuid4())
        self.db.execute(
            "INSERT INTO command_approvals (id, kind, catalog_id, catalog_name, command, risk_level, requested_by, "
            "status, created_at) VALUES (?, 'command', ?, ?, ?, ?, ?, 'pending', ?)",
            (approval_id, entry.id, entry.name, entry.command, entry.risk_level.value, user_id, iso()),
        )
        return self.get(approval_id)

    def request_tool_call(self, user_id: str, tool_name: str, arguments: dict[str, Any],
                          conversation_id: str | None, message_id: str | None) -> Approval:
        """A pending request to run ``tool_name`` with ``arguments`` (sealed) for ``user_id``'s chat."""
        approval_id = str(uuid4())
        self.db.execute(
            "INSERT INTO command_approvals (id, kind, tool_name, arguments_sealed, conversation_id, message_id, "
            "requested_by, status, created_at) VALUES (?, 'tool_call', ?, ?, ?, ?, ?, 'pending', ?)",
            (approval_id, tool_name, self.sealer.seal(json.dumps(arguments, ensure_ascii=False, default=str),
                                                      _at("arguments_sealed", approval_id, str(user_id))),
             conversation_id, message_id, str(user_id), iso()),
        )
        return self.get(approval_id)

    def get(self, approval_id: str, owner: str | None = None) -> Approval:
        """The request; NotFoundError when there is none or (with ``owner``) it is another user's."""
        row = self.db.one("SELECT * FROM command_approvals WHERE id = ?", (str(approval_id),))
        if row is None or (owner is not None and row["requested_by"] != str(owner)):
            raise NotFoundError(f"approval {approval_id} not found")
        return self._approval(row)

    def list(self, status: ApprovalStatus | None = None, limit: int = 100, offset: int = 0, *,
             owner: str | None = None, kind: ApprovalKind | None = None) -> list[Approval]:
        """Newest requests first; only ``owner``'s when given."""
        clauses, params = [], []
        for column, value in (("status", status), ("requested_by", owner), ("kind", kind)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(str(value))
        where = "WHERE " + " AND ".join(clauses) + " " if clauses else ""
        rows = self.db.query(f"SELECT * FROM command_approvals {where}ORDER BY created_at DESC, rowid DESC "
                             "LIMIT ? OFFSET ?", (*params, limit, offset))
        return [self._approval(r) for r in rows]

    def decide(self, approval_id: str, user_id: str | None, status: ApprovalStatus,
               reason: str | None = None, *, by_requester: bool = False) -> Approval:
        """Move a pending request to ``approved`` or ``denied``. ConflictError when it was decided;
        ForbiddenError when ``user_id`` requested it (unless ``by_requester``: the server denying
        the requests of a deleted entry)."""
        with self.db.transaction():
            current = self.get(approval_id)
            if current.status != ApprovalStatus.PENDING:
                raise ConflictError(
                    f"approval {approval_id} was already decided (status {current.status.value})",
                    {"status": current.status.value},
                )
            if not by_requester and current.requested_by is not None and current.requested_by == user_id:
                raise ForbiddenError(SELF_DECISION, {"requested_by": current.requested_by})
            self.db.execute(
                "UPDATE command_approvals SET status = ?, decided_by = ?, decided_at = ?, reason_sealed = ? "
                "WHERE id = ?",
                (status.value, user_id, iso(),
                 self.sealer.seal(reason, _at("reason_sealed", current.id, current.requested_by)) if reason else None,
                 current.id),
            )
        return self.get(approval_id)

    def executed(self, approval_id: str, execution_id: str) -> Approval:
        self.db.execute("UPDATE command_approvals SET status = 'executed', execution_id = ? WHERE id = ?",
                        (execution_id, str(approval_id)))
        return self.get(approval_id)

    def tool_executed(self, approval_id: str, tool_run_id: str | None, result: Any, error: str | None) -> Approval:
        """Record what the approved tool call gave (sealed) and mark the request ``executed``."""
        payload = json.dumps({"result": result, "error": error}, ensure_ascii=False, default=str)
        owner = self.db.scalar("SELECT requested_by FROM command_approvals WHERE id = ?", (str(approval_id),))
        self.db.execute("UPDATE command_approvals SET status = 'executed', tool_run_id = ?, result_sealed = ? "
                        "WHERE id = ?", (tool_run_id, self.sealer.seal(payload, _at("result_sealed", str(approval_id),
                                                                                        owner)), str(approval_id)))
        return self.get(approval_id)

    def pending_for(self, catalog_id: str) -> list[Approval]:
        rows = self.db.query("SELECT * FROM command_approvals WHERE catalog_id = ? AND status = 'pending' "
                             "ORDER BY created_at, rowid", (str(catalog_id),))
        return [self._approval(r) for r in rows]

    def _approval(self, row: dict) -> Approval:
        reason, arguments, outcome = row["reason_sealed"], row["arguments_sealed"], row["result_sealed"]

        def opened(column: str) -> str:
            return self.sealer.open(row[column], _at(column, row["id"], row["requested_by"]))

        done = json.loads(opened("result_sealed")) if outcome is not None else {}
        return Approval(
            id=row["id"], kind=ApprovalKind(row["kind"]), status=ApprovalStatus(row["status"]),
            requested_by=row["requested_by"], requested_at=row["created_at"], decided_by=row["decided_by"],
            decided_at=row["decided_at"], reason=opened("reason_sealed") if reason is not None else None,
            catalog_id=row["catalog_id"], catalog_name=row["catalog_name"], command=row["command"],
            risk_level=row["risk_level"], execution_id=row["execution_id"], tool_name=row["tool_name"],
            arguments=json.loads(opened("arguments_sealed")) if arguments is not None else None,
            conversation_id=row["conversation_id"], message_id=row["message_id"], tool_run_id=row["tool_run_id"],
            result=done.get("result"), error=done.get("error"),
        )
