"""Approval requests for catalog entries that need them.

A request is ``pending`` until decided. Deciding is atomic: of two concurrent decisions only the
first moves the request on, the other is a ConflictError. ``approved`` lasts while the command runs;
once its execution is recorded the request is ``executed`` and names the execution. ``denied`` is
final. The request keeps the command text it was made for: the approver approves exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from uuid import uuid4

from assistant.catalog.store import CatalogEntry
from assistant.clock import iso
from assistant.crypto import Sealer
from assistant.errors import ConflictError, NotFoundError
from assistant.storage.db import Database

MAX_REASON_CHARS = 1_000


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"  # approved, the command is running
    DENIED = "denied"
    EXECUTED = "executed"


@dataclass(frozen=True)
class Approval:
    id: str
    catalog_id: str
    catalog_name: str
    command: str
    risk_level: str
    status: ApprovalStatus
    requested_by: str | None
    requested_at: str
    decided_by: str | None
    decided_at: str | None
    reason: str | None
    execution_id: str | None


class ApprovalStore:
    def __init__(self, db: Database, sealer: Sealer):
        self.db = db
        self.sealer = sealer

    def request(self, entry: CatalogEntry, user_id: str | None) -> Approval:
        approval_id = str(uuid4())
        self.db.execute(
            "INSERT INTO command_approvals (id, catalog_id, catalog_name, command, risk_level, requested_by, "
            "status, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
            (approval_id, entry.id, entry.name, entry.command, entry.risk_level.value, user_id, iso()),
        )
        return self.get(approval_id)

    def get(self, approval_id: str) -> Approval:
        row = self.db.one("SELECT * FROM command_approvals WHERE id = ?", (str(approval_id),))
        if row is None:
            raise NotFoundError(f"approval {approval_id} not found")
        return self._approval(row)

    def list(self, status: ApprovalStatus | None = None, limit: int = 100, offset: int = 0) -> list[Approval]:
        """Newest requests first."""
        where, params = ("WHERE status = ? ", [status.value]) if status else ("", [])
        rows = self.db.query(f"SELECT * FROM command_approvals {where}ORDER BY created_at DESC, rowid DESC "
                             "LIMIT ? OFFSET ?", (*params, limit, offset))
        return [self._approval(r) for r in rows]

    def decide(self, approval_id: str, user_id: str | None, status: ApprovalStatus,
               reason: str | None = None) -> Approval:
        """Move a pending request to ``approved`` or ``denied``; ConflictError when it was decided."""
        with self.db.transaction():
            current = self.get(approval_id)
            if current.status != ApprovalStatus.PENDING:
                raise ConflictError(
                    f"approval {approval_id} was already decided (status {current.status.value})",
                    {"status": current.status.value},
                )
            self.db.execute(
                "UPDATE command_approvals SET status = ?, decided_by = ?, decided_at = ?, reason_sealed = ? "
                "WHERE id = ?",
                (status.value, user_id, iso(), self.sealer.seal(reason) if reason else None, current.id),
            )
        return self.get(approval_id)

    def executed(self, approval_id: str, execution_id: str) -> Approval:
        self.db.execute("UPDATE command_approvals SET status = 'executed', execution_id = ? WHERE id = ?",
                        (execution_id, str(approval_id)))
        return self.get(approval_id)

    def pending_for(self, catalog_id: str) -> list[Approval]:
        rows = self.db.query("SELECT * FROM command_approvals WHERE catalog_id = ? AND status = 'pending' "
                             "ORDER BY created_at, rowid", (str(catalog_id),))
        return [self._approval(r) for r in rows]

    def _approval(self, row: dict) -> Approval:
        reason = row["reason_sealed"]
        return Approval(
            id=row["id"], catalog_id=row["catalog_id"], catalog_name=row["catalog_name"], command=row["command"],
            risk_level=row["risk_level"], status=ApprovalStatus(row["status"]), requested_by=row["requested_by"],
            requested_at=row["created_at"], decided_by=row["decided_by"], decided_at=row["decided_at"],
            reason=self.sealer.open(reason) if reason is not None else None, execution_id=row["execution_id"],
        )
