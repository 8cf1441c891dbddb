"""The shell-command catalog: entries, their execution, approvals and the audit log.

``build_catalog(db, sealer, settings.commands, runner)`` gives the server's :class:`CommandCatalog`;
commands run behind the :class:`CommandRunner` contract: :class:`SandboxedRunner` (bubblewrap, Linux)
or :class:`SubprocessRunner` (the host shell, Windows only), picked by :func:`create_runner`.
"""

from assistant.catalog.approvals import Approval, ApprovalKind, ApprovalStatus, ApprovalStore
from assistant.catalog.audit import AuditAction, AuditEvent
from assistant.catalog.defaults import DEFAULT_ENTRIES, EntrySpec
from assistant.catalog.executions import Execution
from assistant.catalog.executor import (
    CommandRunner,
    ExecutionStatus,
    RunOutcome,
    SandboxedRunner,
    SubprocessRunner,
    create_runner,
    secret_paths,
)
from assistant.catalog.service import CommandCatalog, ExecuteResult, build_catalog
from assistant.catalog.store import CatalogEntry, EntryFilter, spec_of
from assistant.catalog.values import Category, RiskLevel, TargetOs, current_os

__all__ = [
    "DEFAULT_ENTRIES", "Approval", "ApprovalKind", "ApprovalStatus", "ApprovalStore", "AuditAction", "AuditEvent", "CatalogEntry", "Category",
    "CommandCatalog", "CommandRunner", "EntryFilter", "EntrySpec", "ExecuteResult", "Execution", "ExecutionStatus",
    "RiskLevel", "RunOutcome", "SandboxedRunner", "SubprocessRunner", "TargetOs", "build_catalog", "create_runner",
    "current_os", "secret_paths", "spec_of",
]
