"""The shell-command catalog: list, search, count, get, create, delete, execute; executions and the
audit log.

Entries are server-wide: every key sees the same entries. Creating and deleting entries need an
admin key (403 otherwise); executing needs a user or admin key (a read-only key may only use the
GET routes). Executions belong to the user who asked for them: a user key sees its own (another
user's execution is 404), an admin key sees all; the same for the audit log's events. Every change
and run is audited with the caller's user id.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Response

from api.deps import AdminPrincipal, CurrentPrincipal, Limit, Offset, service
from api.schemas.catalog import (
    CATEGORIES,
    OSES,
    RISK_LEVELS,
    ApprovalOut,
    ApprovalRequired,
    AuditEventOut,
    CatalogCommand,
    CatalogCount,
    CatalogCreate,
    ExecutionOut,
)
from api.schemas.common import ADMIN_ONLY, AUTH_ERRORS, ErrorEnvelope, error_responses
from assistant.catalog import (
    AuditAction,
    Category,
    CommandCatalog,
    EntryFilter,
    RiskLevel,
    TargetOs,
    spec_of,
)

router = APIRouter(prefix="/v1/commands/catalog", tags=["command catalog"])

VALUE_SETS = (f"**Value sets.** `category`: {CATEGORIES}. `risk_level`: {RISK_LEVELS} (low: reads "
              "non-sensitive state; medium: reads sensitive state such as process command lines, logins or "
              "logs; high: changes the system; critical: may destroy data or stop the machine). "
              f"`os`: {OSES} (`any`: a portable command).")

CategoryQuery = Annotated[Category | None, Query(description="Only this category.")]
RiskQuery = Annotated[RiskLevel | None, Query(description="Only this risk level.")]
OsQuery = Annotated[TargetOs | None, Query(description="Only entries for this OS (`any` means portable ones).")]
Catalog = Annotated[CommandCatalog, service("catalog", "the command catalog is not available")]


@router.get("", response_model=list[CatalogCommand], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="List catalog commands", description=(
                "Catalog commands ordered by name (case-insensitive), then id, paged by `limit` (default 100) "
                "and `offset` (default 0); optionally filtered by `category`, `risk_level` and `os`. The "
                "server creates about 32 default entries (Linux, macOS, Windows and portable ones) on its first "
                "start when `commands.seed_defaults` is true, once: a deleted default does not come back.\n\n"
                + VALUE_SETS))
def list_commands(user: CurrentPrincipal, catalog: Catalog, limit: Limit = 100, offset: Offset = 0,
                  category: CategoryQuery = None, risk_level: RiskQuery = None,
                  os: OsQuery = None) -> list[CatalogCommand]:
    entries = catalog.entries.list(limit, offset, EntryFilter(category, risk_level, os))
    return [CatalogCommand.of(e) for e in entries]


@router.get("/search", response_model=list[CatalogCommand], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="Search catalog commands")
def search_commands(
    user: CurrentPrincipal,
    catalog: Catalog,
    q: Annotated[str, Query(min_length=1, max_length=200, description="Text to find in names and descriptions.")],
    limit: Limit = 100,
) -> list[CatalogCommand]:
    """Entries whose name or description contains `q`, ignoring case (Unicode-aware). Name matches
    come first, then description matches; each group by name. A blank `q` is 422."""
    return [CatalogCommand.of(e) for e in catalog.entries.search(q, limit)]


@router.get("/count", response_model=CatalogCount, responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="Count catalog commands")
def count_commands(user: CurrentPrincipal, catalog: Catalog, category: CategoryQuery = None,
                   risk_level: RiskQuery = None, os: OsQuery = None) -> CatalogCount:
    """How many entries there are (with the same optional filters as the listing)."""
    return CatalogCount(count=catalog.entries.count(EntryFilter(category, risk_level, os)))


@router.get("/audit", response_model=list[AuditEventOut], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="Audit log")
def audit_log(
    user: CurrentPrincipal,
    catalog: Catalog,
    limit: Limit = 100,
    offset: Offset = 0,
    action: Annotated[AuditAction | None, Query(description="Only this action.")] = None,
    catalog_id: Annotated[UUID | None, Query(description="Only events of this catalog entry.")] = None,
) -> list[AuditEventOut]:
    """Every change, execution and decision, newest first: `action` is one of `created`, `deleted`,
    `execute`, `approval_requested`, `approved`, `denied`; `user_id` is the caller (null for the
    default entries the server created); `detail` says what happened (for `execute`: status, exit
    code, duration). Decisions on tool-call approvals are here too (no `catalog_id`). Details are
    sealed at rest. Rows keep the ids of entries deleted later. An admin key sees every user's
    events; any other key only the events of its own user (its changes, runs and requests)."""
    events = catalog.audit.list(limit, offset, action=action,
                                             catalog_id=str(catalog_id) if catalog_id else None,
                                             user_id=user.owner_filter())
    return [AuditEventOut.of(e) for e in events]


@router.get("/executions", response_model=list[ExecutionOut], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="List executions")
def list_executions(
    user: CurrentPrincipal,
    catalog: Catalog,
    limit: Annotated[int, Query(ge=1, le=200, description="Page size (1 to 200).")] = 20,
    offset: Offset = 0,
    catalog_id: Annotated[UUID | None, Query(description="Only executions of this catalog entry.")] = None,
) -> list[ExecutionOut]:
    """Recorded executions, newest first, with their outputs (sealed at rest). A user key lists its
    own user's executions (including those of its approved requests); an admin key lists all."""
    found = catalog.executions.list(limit, offset, str(catalog_id) if catalog_id else None,
                                                 owner=user.owner_filter())
    return [ExecutionOut.of(x) for x in found]


@router.get("/executions/{execution_id}", response_model=ExecutionOut,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503), summary="Get an execution")
def get_execution(execution_id: UUID, user: CurrentPrincipal, catalog: Catalog) -> ExecutionOut:
    """One execution: the caller's own (another user's is 404), any for an admin key."""
    return ExecutionOut.of(catalog.executions.get(str(execution_id), user.owner_filter()))


@router.get("/{entry_id}", response_model=CatalogCommand, responses=error_responses(*AUTH_ERRORS, 404, 422, 503),
            summary="Get a catalog command")
def get_command(entry_id: UUID, user: CurrentPrincipal, catalog: Catalog) -> CatalogCommand:
    return CatalogCommand.of(catalog.entries.get(str(entry_id)))


@router.post("", status_code=201, response_model=CatalogCommand,
             responses={**error_responses(400, *AUTH_ERRORS, 409, 413, 422, 503), **ADMIN_ONLY},
             summary="Create a catalog command",
             description=(
                 "Add a command to the catalog (**admin key only**: any other role is 403 `FORBIDDEN`); the "
                 "response is the stored entry. `name` and `command` must not be "
                 "blank; `name` is unique regardless of case (409 `CONFLICT` when taken). An unknown `category`, "
                 "`risk_level` or `os` is 422 with `details.fields` naming the allowed values. `requires_approval` "
                 "defaults to false and is forced to true for risk `high` and `critical`. `network` (default "
                 "false) lets the command use the network in its sandbox.\n\n" + VALUE_SETS))
def create_command(body: CatalogCreate, user: AdminPrincipal, catalog: Catalog) -> CatalogCommand:
    spec = spec_of(body.name, body.description, body.command, body.category, body.risk_level, body.os,
                   body.requires_approval, body.network)
    return CatalogCommand.of(catalog.create(spec, str(user.user_id)))


@router.post(
    "/{entry_id}/execute",
    response_model=ExecutionOut | ApprovalRequired,
    responses={
        200: {"description": "The execution; or, for an entry that requires approval, the approval request "
                             "(`status: approval_required`): nothing ran."},
        **error_responses(*AUTH_ERRORS, 404, 409, 422, 503),
        409: {"model": ErrorEnvelope, "description": "The entry is for another OS than the server's (CONFLICT; "
                                                     "details.entry_os, details.server_os): nothing ran and no "
                                                     "approval was requested."},
    },
    summary="Execute a catalog command",
)
def execute_command(entry_id: UUID, user: CurrentPrincipal, catalog: Catalog) -> ExecutionOut | ApprovalRequired:
    """Run the command now through the server's shell (`/bin/sh -c`; `cmd.exe /c` on Windows) and
    answer 200 with the recorded execution: `status` completed | failed | timed_out, `exit_code`,
    `stdout`, `stderr`, `duration_ms`, `truncated`. The run is bounded by
    `commands.execution_timeout_secs` (default 30; the whole process group is killed) and each of
    stdout and stderr keeps its first `commands.max_output_bytes` (default 65,536). A failing
    command is a 200 with `status: failed`, not an error. A user or admin key may execute; the
    execution belongs to the caller's user.

    When the entry has `requires_approval` true, nothing runs: an approval request of the
    caller's user is created and the answer is **200** `{status: "approval_required",
    approval_id, catalog_id, message, approval}`; an admin other than the requester approves it
    with `POST /v1/approvals/{approval_id}/approve`. An entry whose `os` is neither `any` nor the
    server's OS is 409 `CONFLICT`."""
    result = catalog.execute(str(entry_id), str(user.user_id))
    if result.approval is not None:
        approval = result.approval
        return ApprovalRequired(
            approval_id=approval.id, catalog_id=approval.catalog_id or "",
            message=f"{approval.catalog_name!r} requires approval: nothing ran; an admin other than you decides "
                    f"with POST /v1/approvals/{approval.id}/approve",
            approval=ApprovalOut.of(approval),
        )
    return ExecutionOut.of(result.execution)  # type: ignore[arg-type]


@router.delete("/{entry_id}", status_code=204, response_class=Response,
               responses={**error_responses(*AUTH_ERRORS, 404, 422, 503), **ADMIN_ONLY},
               summary="Delete a catalog command")
def delete_command(entry_id: UUID, user: AdminPrincipal, catalog: Catalog) -> Response:
    """Remove the entry (**admin key only**: any other role is 403 `FORBIDDEN`; a default entry
    too: it does not come back at a restart). Its pending approval requests are denied; its
    executions and audit events are kept."""
    catalog.delete(str(entry_id), str(user.user_id))
    return Response(status_code=204)
