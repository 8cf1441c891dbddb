"""The audit log of the catalog: who created, deleted, ran, requested, approved or denied what.

Details can quote a deny reason or a command's name: they are sealed at rest like other user text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from uuid import uuid4

from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.storage.db import Database


class AuditAction(StrEnum):
    CREATED = "created"
    DELETED = "deleted"
    EXECUTE = "execute"
    APPROVAL_REQUESTED = "approval_requested"
    APPROVED = "approved"
    DENIED = "denied"


@dataclass(frozen=True)
class AuditEvent:
    id: str
    action: AuditAction
    catalog_id: str | None
    approval_id: str | None
    execution_id: str | None
    user_id: str | None  # None: the server itself (the default entries)
    detail: str
    at: str


class AuditLog:
    def __init__(self, db: Database, sealer: Sealer):
        self.db = db
        self.sealer = sealer

    def record(self, action: AuditAction, user_id: str | None, detail: str, *, catalog_id: str | None = None,
               approval_id: str | None = None, execution_id: str | None = None) -> AuditEvent:
        event = AuditEvent(str(uuid4()), action, catalog_id, approval_id, execution_id, user_id, detail, iso())
        self.db.execute(
            "INSERT INTO command_audit (id, action, catalog_id, approval_id, execution_id, user_id, detail_sealed, "
            "at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (event.id, action.value, catalog_id, approval_id, execution_id, user_id,
             self.sealer.seal(detail, SealContext("command_audit", "detail_sealed", event.id, user_id or "")),
             event.at),
        )
        return event

    def list(self, limit: int = 100, offset: int = 0, *, action: AuditAction | None = None,
             catalog_id: str | None = None, user_id: str | None = None) -> list[AuditEvent]:
        """Newest first (by time, then by the order of recording); only ``user_id``'s when given."""
        clauses, params = [], []
        for column, value in (("action", action), ("catalog_id", catalog_id), ("user_id", user_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(str(value))
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = self.db.query(f"SELECT * FROM command_audit{where} ORDER BY at DESC, rowid DESC LIMIT ? OFFSET ?",
                             (*params, limit, offset))
        return [
            AuditEvent(r["id"], AuditAction(r["action"]), r["catalog_id"], r["approval_id"], r["execution_id"],
                       r["user_id"],
                       self.sealer.open(r["detail_sealed"], SealContext("command_audit", "detail_sealed", r["id"],
                                                                        r["user_id"] or "")), r["at"])
            for r in rows
        ]
