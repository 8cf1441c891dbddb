"""The command catalog as one object: entries, execution, approvals and the audit log.

Commands are server-wide (every user sees the same catalog); every change, run and decision is
audited with the caller's user id. Executing an entry that ``requires_approval`` creates an
approval request and runs nothing; approving it (someone other than the requester: see
:mod:`assistant.catalog.approvals`) runs the command once. An execution belongs to the user who
asked for it: for an approved request, the requester (the approver is the request's
``decided_by`` and the audit event's user). An entry written for another OS than the server's is
refused before anything is recorded. The entry's ``network`` flag is handed to the runner.
"""

from __future__ import annotations

from dataclasses import dataclass

from assistant.catalog.approvals import Approval, ApprovalKind, ApprovalStatus, ApprovalStore, clean_reason
from assistant.catalog.audit import AuditAction, AuditLog
from assistant.catalog.defaults import EntrySpec
from assistant.catalog.executions import Execution, ExecutionStore
from assistant.catalog.executor import CommandRunner, RunOutcome, create_runner
from assistant.catalog.store import CatalogEntry, CatalogStore
from assistant.catalog.values import TargetOs, current_os
from assistant.config import CommandsSettings
from assistant.crypto import Sealer
from assistant.errors import ConflictError, NotFoundError, ServiceUnavailableError
from assistant.storage.db import Database

DELETED_REASON = "the catalog entry was deleted"


@dataclass(frozen=True)
class ExecuteResult:
    """Either the command ran (``execution``) or an approval request was made (``approval``)."""

    execution: Execution | None = None
    approval: Approval | None = None


class CommandCatalog:
    def __init__(self, db: Database, sealer: Sealer, settings: CommandsSettings | None = None, *,
                 runner: CommandRunner | None = None, server_os: TargetOs | None = None):
        self.settings = settings or CommandsSettings()
        self.entries = CatalogStore(db)
        self.executions = ExecutionStore(db, sealer)
        self.approvals = ApprovalStore(db, sealer)
        self.audit = AuditLog(db, sealer)
        self.runner = runner or create_runner(self.settings)
        self.server_os = server_os or current_os()

    # --- entries ---------------------------------------------------------------------------------

    def seed_defaults(self) -> list[CatalogEntry]:
        """Create the default entries if they never were (see :meth:`CatalogStore.seed_defaults`)."""
        created = self.entries.seed_defaults()
        for entry in created:
            self.audit.record(AuditAction.CREATED, None, f"{_describe(entry)} (a default entry)", catalog_id=entry.id)
        return created

    def create(self, spec: EntrySpec, user_id: str | None) -> CatalogEntry:
        entry = self.entries.create(spec, user_id)
        self.audit.record(AuditAction.CREATED, user_id, _describe(entry), catalog_id=entry.id)
        return entry

    def delete(self, entry_id: str, user_id: str | None) -> CatalogEntry:
        """Delete the entry; its pending approval requests are denied (they can no longer run)."""
        entry = self.entries.delete(entry_id)
        detail = f"deleted {entry.name!r}"
        pending = self.approvals.pending_for(entry.id)
        for approval in pending:
            try:
                self.approvals.decide(approval.id, user_id, ApprovalStatus.DENIED, DELETED_REASON, by_requester=True)
            except ConflictError:  # decided meanwhile
                continue
            self.audit.record(AuditAction.DENIED, user_id, f"denied running {entry.name!r}: {DELETED_REASON}",
                              catalog_id=entry.id, approval_id=approval.id)
        if pending:
            detail += f"; {len(pending)} pending approval request(s) denied"
        self.audit.record(AuditAction.DELETED, user_id, detail, catalog_id=entry.id)
        return entry

    # --- running ---------------------------------------------------------------------------------

    def runnable(self, entry: CatalogEntry) -> None:
        """ConflictError when ``entry`` is written for another OS than the server's."""
        if entry.os not in (TargetOs.ANY, self.server_os):
            raise ConflictError(
                f"catalog entry {entry.name!r} is for {entry.os.value} and this server runs "
                f"{self.server_os.value}: it cannot be executed here",
                {"entry_os": entry.os.value, "server_os": self.server_os.value},
            )

    def execute(self, entry_id: str, user_id: str | None) -> ExecuteResult:
        """Run the entry now, or, when it requires approval, only create an approval request."""
        entry = self.entries.get(entry_id)
        self.runnable(entry)
        if entry.requires_approval:
            approval = self.approvals.request(entry, user_id)
            self.audit.record(AuditAction.APPROVAL_REQUESTED, user_id,
                              f"{entry.name!r} needs approval (risk {entry.risk_level.value})",
                              catalog_id=entry.id, approval_id=approval.id)
            return ExecuteResult(approval=approval)
        return ExecuteResult(execution=self._run(entry.id, entry.name, entry.command, user_id,
                                                 network=entry.network))

    def approve(self, approval_id: str, user_id: str | None, reason: str | None = None) -> tuple[Approval, Execution]:
        """Approve a pending request and run its command, once. ConflictError if already decided,
        ForbiddenError if ``user_id`` requested it. The command runs with the entry's ``network``
        flag as it is now (no network when the entry was deleted meanwhile: its requests are denied
        then, so this is only a race)."""
        reason = clean_reason(reason)
        self._check_command(approval_id)
        approval = self.approvals.decide(approval_id, user_id, ApprovalStatus.APPROVED, reason)
        self.audit.record(AuditAction.APPROVED, user_id, _decision("approved", approval.catalog_name, reason),
                          catalog_id=approval.catalog_id, approval_id=approval.id)
        try:
            network = self.entries.get(approval.catalog_id).network
        except NotFoundError:
            network = False
        execution = self._run(approval.catalog_id, approval.catalog_name, approval.command,  # type: ignore[arg-type]
                              approval.requested_by, approval.id, network=network, actor=user_id)
        return self.approvals.executed(approval.id, execution.id), execution

    def deny(self, approval_id: str, user_id: str | None, reason: str | None = None) -> Approval:
        reason = clean_reason(reason)
        self._check_command(approval_id)
        approval = self.approvals.decide(approval_id, user_id, ApprovalStatus.DENIED, reason)
        self.audit.record(AuditAction.DENIED, user_id, _decision("denied", approval.catalog_name, reason),
                          catalog_id=approval.catalog_id, approval_id=approval.id)
        return approval

    def _check_command(self, approval_id: str) -> None:
        if self.approvals.get(approval_id).kind is not ApprovalKind.COMMAND:
            raise ConflictError(f"approval {approval_id} is not a catalog command (decide it as a tool call)")

    def _run(self, catalog_id: str, name: str, command: str, user_id: str | None,
             approval_id: str | None = None, *, network: bool = False, actor: str | None = None) -> Execution:
        """Run ``command`` for ``user_id`` (the execution's owner); ``actor`` (default: the owner)
        is the audit event's user."""
        try:
            outcome = self.runner.run(command, timeout_secs=self.settings.execution_timeout_secs,
                                      max_output_bytes=self.settings.max_output_bytes, network=network)
        except ServiceUnavailableError:
            raise  # no sandbox here: nothing ran, nothing is recorded (503)
        except Exception as exc:  # noqa: BLE001 - a runner must not raise; if one does, the run is recorded as failed
            outcome = RunOutcome(None, "", f"the command could not run: {exc}", 0)
        execution = self.executions.record(catalog_id, command, user_id, outcome, approval_id)
        detail = f"ran {name!r}: {execution.status.value}"
        if execution.exit_code is not None:
            detail += f", exit code {execution.exit_code}"
        detail += f", {execution.duration_ms} ms" + (", output truncated" if execution.truncated else "")
        self.audit.record(AuditAction.EXECUTE, actor or user_id, detail, catalog_id=catalog_id,
                          approval_id=approval_id, execution_id=execution.id)
        return execution


def build_catalog(db: Database, sealer: Sealer, settings: CommandsSettings,
                  runner: CommandRunner | None = None) -> CommandCatalog:
    """The server's catalog; the defaults are created on first start when ``seed_defaults``."""
    catalog = CommandCatalog(db, sealer, settings, runner=runner)
    if settings.seed_defaults:
        catalog.seed_defaults()
    return catalog


def _describe(entry: CatalogEntry) -> str:
    return (f"created {entry.name!r} ({entry.category.value}, risk {entry.risk_level.value}, "
            f"os {entry.os.value}{', requires approval' if entry.requires_approval else ''}"
            f"{', network' if entry.network else ''})")


def _decision(verb: str, name: str, reason: str | None) -> str:
    return f"{verb} running {name!r}" + (f": {reason}" if reason else "")
