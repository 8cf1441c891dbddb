"""The shell-command catalog: entries, their execution, approvals and the audit log.

``build_catalog(db, sealer, settings.commands)`` gives the server's :class:`CommandCatalog`;
:class:`SubprocessRunner` runs commands behind the :class:`CommandRunner` contract.
"""

from assistant.catalog.approvals import Approval, ApprovalKind, ApprovalStatus, ApprovalStore
from assistant.catalog.audit import AuditAction, AuditEvent
from assistant.catalog.defaults import DEFAULT_ENTRIES, EntrySpec
from assistant.catalog.executions import Execution
from assistant.catalog.executor import CommandRunner, ExecutionStatus, RunOutcome, SubprocessRunner
from assistant.catalog.service import CommandCatalog, ExecuteResult, build_catalog
from assistant.catalog.store import CatalogEntry, EntryFilter, spec_of
from assistant.catalog.values import Category, RiskLevel, TargetOs, current_os

__all__ = [
    "DEFAULT_ENTRIES", "Approval", "ApprovalKind", "ApprovalStatus", "ApprovalStore", "AuditAction", "AuditEvent", "CatalogEntry", "Category",
    "CommandCatalog", "CommandRunner", "EntryFilter", "EntrySpec", "ExecuteResult", "Execution", "ExecutionStatus",
    "RiskLevel", "RunOutcome", "SubprocessRunner", "TargetOs", "build_catalog", "current_os", "spec_of",
]
