"""Recorded executions of catalog commands. Outputs can hold user data: they are sealed at rest.

An execution belongs to the user who asked for it (for an approved request: its requester):
``owner`` arguments restrict reads to one user's executions (None: every execution, for admins).
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import uuid4

from assistant.catalog.executor import ExecutionStatus, RunOutcome
from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import NotFoundError
from assistant.storage.db import Database


@dataclass(frozen=True)
class Execution:
    id: str
    catalog_id: str
    approval_id: str | None
    user_id: str | None
    command: str
    status: ExecutionStatus
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: bool
    truncated: bool
    executed_at: str


def _at(column: str, execution_id: str, user_id: str | None) -> SealContext:
    """Where an execution's output is sealed (its associated data)."""
    return SealContext("command_executions", column, execution_id, user_id or "")


class ExecutionStore:
    def __init__(self, db: Database, sealer: Sealer):
        self.db = db
        self.sealer = sealer

    def record(self, catalog_id: str, command: str, user_id: str | None, outcome: RunOutcome,
               approval_id: str | None = None, executed_at: str | None = None) -> Execution:
        execution = Execution(
            id=str(uuid4()), catalog_id=catalog_id, approval_id=approval_id, user_id=user_id, command=command,
            status=outcome.status, exit_code=outcome.exit_code, stdout=outcome.stdout, stderr=outcome.stderr,
            duration_ms=outcome.duration_ms, timed_out=outcome.timed_out, truncated=outcome.truncated,
            executed_at=executed_at or iso(),
        )
        self.db.execute(
            "INSERT INTO command_executions (id, catalog_id, approval_id, user_id, command, status, exit_code, "
            "stdout_sealed, stderr_sealed, duration_ms, timed_out, truncated, executed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (execution.id, catalog_id, approval_id, user_id, command, execution.status.value, execution.exit_code,
             self.sealer.seal(execution.stdout, _at("stdout_sealed", execution.id, user_id)),
             self.sealer.seal(execution.stderr, _at("stderr_sealed", execution.id, user_id)), execution.duration_ms,
             int(execution.timed_out), int(execution.truncated), execution.executed_at),
        )
        return execution

    def get(self, execution_id: str, owner: str | None = None) -> Execution:
        row = self.db.one("SELECT * FROM command_executions WHERE id = ?", (str(execution_id),))
        if row is None or (owner is not None and row["user_id"] != str(owner)):
            raise NotFoundError(f"execution {execution_id} not found")
        return self._execution(row)

    def list(self, limit: int = 100, offset: int = 0, catalog_id: str | None = None, *,
             owner: str | None = None) -> list[Execution]:
        """Newest first; only ``owner``'s when given."""
        clauses, params = [], []
        for column, value in (("catalog_id", catalog_id), ("user_id", owner)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(str(value))
        where = "WHERE " + " AND ".join(clauses) + " " if clauses else ""
        rows = self.db.query(f"SELECT * FROM command_executions {where}ORDER BY executed_at DESC, rowid DESC "
                             "LIMIT ? OFFSET ?", (*params, limit, offset))
        return [self._execution(r) for r in rows]

    def _execution(self, row: dict) -> Execution:
        return Execution(
            id=row["id"], catalog_id=row["catalog_id"], approval_id=row["approval_id"], user_id=row["user_id"],
            command=row["command"], status=ExecutionStatus(row["status"]), exit_code=row["exit_code"],
            stdout=self.sealer.open(row["stdout_sealed"], _at("stdout_sealed", row["id"], row["user_id"])),
            stderr=self.sealer.open(row["stderr_sealed"], _at("stderr_sealed", row["id"], row["user_id"])),
            duration_ms=row["duration_ms"], timed_out=bool(row["timed_out"]), truncated=bool(row["truncated"]),
            executed_at=row["executed_at"],
        )
