"""Request and response models of the command catalog, its executions, approvals and audit log."""

from __future__ import annotations

from dataclasses import asdict
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from assistant.catalog import (
    Approval,
    AuditAction,
    AuditEvent,
    CatalogEntry,
    Category,
    Execution,
    RiskLevel,
    TargetOs,
)
from assistant.catalog.approvals import MAX_REASON_CHARS, ApprovalKind, ApprovalStatus
from assistant.catalog.store import MAX_COMMAND_CHARS, MAX_DESCRIPTION_CHARS, MAX_NAME_CHARS
from assistant.catalog.values import allowed

CATEGORIES = allowed(Category)
RISK_LEVELS = allowed(RiskLevel)
OSES = allowed(TargetOs)


def values(enum: type[StrEnum]) -> dict[str, Any]:
    """The JSON Schema ``enum`` of a value set (the validators below keep the precise message)."""
    return {"enum": [v.value for v in enum]}


# Not blank and no NUL character, as the validators check (ECMA-262 regex; \S is any non-space).
SHELL_TEXT = "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"


def _one_of(enum: type, value: str) -> str:
    if value not in {v.value for v in enum}:
        raise ValueError(f"must be one of {allowed(enum)}")
    return value


class CatalogCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=MAX_NAME_CHARS,
                      description=f"Unique regardless of case; at most {MAX_NAME_CHARS} characters; not blank.",
                      json_schema_extra={"pattern": SHELL_TEXT})
    description: str = Field("", max_length=MAX_DESCRIPTION_CHARS)
    command: str = Field(max_length=MAX_COMMAND_CHARS, json_schema_extra={"pattern": SHELL_TEXT},
                         description="Shell command text: run by /bin/sh -c (cmd.exe /c on Windows); not blank.")
    category: str = Field(description=f"One of {CATEGORIES}.", json_schema_extra=values(Category))
    risk_level: str = Field(description=f"One of {RISK_LEVELS}. high and critical always require approval.",
                            json_schema_extra=values(RiskLevel))
    os: str = Field(description=f"One of {OSES}; `any` for a command that runs on every OS.",
                    json_schema_extra=values(TargetOs))
    requires_approval: bool = Field(False, description="Forced to true for risk_level high and critical.")
    network: bool = Field(False, description="Whether the command may use the network. Commands run in a sandbox "
                                             "without network access unless this is true.")

    @field_validator("name", "command")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        if "\x00" in value:
            raise ValueError("must not contain a NUL character")
        return value

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        return _one_of(Category, value)

    @field_validator("risk_level")
    @classmethod
    def _risk(cls, value: str) -> str:
        return _one_of(RiskLevel, value)

    @field_validator("os")
    @classmethod
    def _os(cls, value: str) -> str:
        return _one_of(TargetOs, value)


class CatalogCommand(BaseModel):
    id: str
    name: str
    description: str
    command: str
    category: str = Field(description=f"One of {CATEGORIES}.", json_schema_extra=values(Category))
    risk_level: str = Field(description=f"One of {RISK_LEVELS}.", json_schema_extra=values(RiskLevel))
    os: str = Field(description=f"One of {OSES}.", json_schema_extra=values(TargetOs))
    requires_approval: bool = Field(description="True makes execution create an approval request instead of "
                                                "running; always true for risk high and critical.")
    network: bool = Field(description="Whether the command may use the network in its sandbox.")
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, e: CatalogEntry) -> CatalogCommand:
        return cls(id=e.id, name=e.name, description=e.description, command=e.command, category=e.category.value,
                   risk_level=e.risk_level.value, os=e.os.value, requires_approval=e.requires_approval,
                   network=e.network, created_at=e.created_at, updated_at=e.updated_at)


class CatalogCount(BaseModel):
    count: int


class ExecutionOut(BaseModel):
    execution_id: str
    catalog_id: str
    approval_id: str | None = Field(description="The approval request it ran for, if any.")
    user_id: str | None = Field(description="Who asked for it, and owns it (for an approved request: the "
                                            "requester; the approver is the approval's decided_by).")
    command: str = Field(description="The command text that ran.")
    status: str = Field(description="completed (exit code 0), failed (non-zero exit code, or the shell could "
                                    "not start) or timed_out (killed at commands.execution_timeout_secs).")
    exit_code: int | None = Field(description="null when timed out or when the command could not start.")
    stdout: str = Field(description="At most commands.max_output_bytes of standard output (UTF-8, invalid "
                                    "bytes replaced).")
    stderr: str = Field(description="At most commands.max_output_bytes of standard error.")
    duration_ms: int
    truncated: bool = Field(description="True when stdout or stderr was cut at commands.max_output_bytes.")
    executed_at: str

    @classmethod
    def of(cls, x: Execution) -> ExecutionOut:
        return cls(execution_id=x.id, catalog_id=x.catalog_id, approval_id=x.approval_id, user_id=x.user_id,
                   command=x.command, status=x.status.value, exit_code=x.exit_code, stdout=x.stdout,
                   stderr=x.stderr, duration_ms=x.duration_ms, truncated=x.truncated, executed_at=x.executed_at)


class ApprovalOut(BaseModel):
    id: str
    kind: str = Field(description="`command` (a catalog entry's command) or `tool_call` (a call of the chat's "
                                  "tool-calling loop, for a tool in tool_calling.require_approval_for).",
                      json_schema_extra=values(ApprovalKind))
    status: str = Field(description="pending, approved (approved and running), denied or executed.",
                        json_schema_extra=values(ApprovalStatus))
    requested_by: str | None = Field(description="The user who asked (the executing key's or the chat's user); "
                                                 "the request is theirs.")
    requested_at: str
    decided_by: str | None = Field(description="The admin who decided (never the requester).")
    decided_at: str | None
    reason: str | None = Field(description="The reason given with the decision, if any.")
    catalog_id: str | None = Field(description="kind command: the catalog entry.")
    catalog_name: str | None = Field(description="kind command: the entry's name.")
    command: str | None = Field(description="kind command: the command text that runs if approved.")
    risk_level: str | None = Field(description="kind command: the entry's risk level.")
    execution_id: str | None = Field(description="kind command: set once the approved command ran.")
    tool_name: str | None = Field(description="kind tool_call: the tool.")
    arguments: dict[str, Any] | None = Field(description="kind tool_call: the arguments it runs with if approved.")
    conversation_id: str | None = Field(description="kind tool_call: the conversation it was asked in.")
    message_id: str | None = Field(description="kind tool_call: the reply that asked for it.")
    tool_run_id: str | None = Field(description="kind tool_call: the tool run recorded once it ran.")
    result: Any = Field(None, description="kind tool_call: what the tool returned once approved and run.")
    error: str | None = Field(description="kind tool_call: the tool's error, when the approved call failed.")

    @classmethod
    def of(cls, a: Approval) -> ApprovalOut:
        return cls(**{**asdict(a), "status": a.status.value, "kind": a.kind.value})


class ApprovalRequired(BaseModel):
    status: str = Field("approval_required", description="Always `approval_required`.")
    approval_id: str
    catalog_id: str
    message: str
    approval: ApprovalOut


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(None, max_length=MAX_REASON_CHARS, description="Why; recorded in the audit log.")


class AuditEventOut(BaseModel):
    id: str
    action: str = Field(description=f"One of {allowed(AuditAction)}.", json_schema_extra=values(AuditAction))
    catalog_id: str | None
    approval_id: str | None
    execution_id: str | None
    user_id: str | None = Field(description="The caller; null for the server itself (the default entries).")
    detail: str
    at: str

    @classmethod
    def of(cls, e: AuditEvent) -> AuditEventOut:
        return cls(**{**asdict(e), "action": e.action.value})


APPROVAL_STATUSES = allowed(ApprovalStatus)
