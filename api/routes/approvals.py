"""Approval requests: list, get, approve, deny.

Two kinds share these routes: `command` (executing a catalog entry that requires approval) and
`tool_call` (a chat's call of a tool named in `tool_calling.require_approval_for`). A request
belongs to its requester's user: a user key lists and gets only its own (another user's is 404);
an admin key sees every request, since admins decide them. Approving and denying need an admin
key (403 otherwise), and an admin whose user is not the requester's: a request is never decided
by its requester (403 `FORBIDDEN`). Each decision is audited.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query

from api.deps import AdminPrincipal, CurrentPrincipal, Limit, Offset, ServicesDep
from api.routes.catalog import Catalog
from api.schemas.catalog import ApprovalOut, Decision, ExecutionOut
from api.schemas.common import AUTH_ERRORS, ErrorEnvelope, error_responses
from assistant.catalog import ApprovalKind, ApprovalStatus
from assistant.chat.approvals import ToolApprovals
from assistant.errors import ServiceUnavailableError
from assistant.services import Services

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])

DECIDED = {409: {"model": ErrorEnvelope, "description": "The request was already decided (CONFLICT; details.status is its status)."}}
DECIDERS = {403: {"model": ErrorEnvelope, "description": (
    "The key's role is not admin (FORBIDDEN; details.required_role `admin`), the key is read-only, or the "
    "caller's user requested it: \"an approval must be decided by an admin other than its requester\" "
    "(FORBIDDEN; details.requested_by).")}}

TOOL_CALLS = """

**Tool calls.** A chat whose model calls a tool named in `tool_calling.require_approval_for`
does not run it: the call becomes a `tool_call` request of the chat's user (`tool_name`,
`arguments`, `conversation_id`, and `message_id`, the reply that asked), and the model is told
that the call waits for approval (the reply's tool run has status `approval_required` and its
result names the `approval_id`). Approving runs the tool once, as the requester, with the stored
arguments: the request becomes `executed` with `result` (or `error`) and `tool_run_id`, a tool
run of the asking reply is recorded (`GET /v1/tools/runs`), and a `tool` message is appended to
the conversation: "[approval <id>] The tool call <tool>(<arguments>) that waited for approval was
approved by admin <user id> and it ran. Result: <JSON>" (or "...and it failed: <error>").
Denying runs nothing and appends "...was denied by admin <user id> (<reason>). It did not run."
The next message in that conversation (`POST /v1/chat` with its `conversation_id`) gives the
model that text as part of the history, so it answers with the result or reports the denial."""


def tool_approvals(services: Services) -> ToolApprovals:
    if services.chat.approvals is None:
        raise ServiceUnavailableError("tool-call approvals are not available")
    return services.chat.approvals


LIST = """Approval requests, newest first: a user key's own, or every user's for an admin key.
`kind`: `command` or `tool_call`. `status`: `pending` (waiting for a decision), `approved`
(approved, the command or tool is running), `denied`, `executed` (approved and run:
`execution_id` names a command's execution, `tool_run_id` and `result` a tool call's outcome).
Deleting a catalog entry denies its pending requests."""

APPROVE = """Approve a pending request (**admin key only**, and not the requester's user: 403) and run
it once, now. For a `command` request, its command (the text shown in the request) runs with the
same bounds as `execute`, and the answer is the execution (`approval_id` set; it belongs to the
requester); the request becomes `executed`. For a `tool_call` request, the tool runs and the
answer is the request, `executed`, with its `result` or `error` (see below). A request already
decided is 409 and nothing runs. The body is optional: `{reason}` is recorded in the audit log."""

DENY = """Deny a pending request (**admin key only**, and not the requester's user: 403): nothing
runs, and the request is `denied` for good. A request already decided is 409. The body is
optional: `{reason}` is kept with the request and audited; for a `tool_call` request the denial
(with the reason) is told to the conversation (see below)."""


@router.get("", response_model=list[ApprovalOut], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="List approval requests", description=LIST + TOOL_CALLS)
def list_approvals(
    user: CurrentPrincipal,
    catalog: Catalog,
    status: Annotated[ApprovalStatus | None, Query(description="Only requests in this status.")] = None,
    kind: Annotated[ApprovalKind | None, Query(description="Only requests of this kind.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[ApprovalOut]:
    found = catalog.approvals.list(status, limit, offset, owner=user.owner_filter(), kind=kind)
    return [ApprovalOut.of(a) for a in found]


@router.get("/{approval_id}", response_model=ApprovalOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503),
            summary="Get an approval request")
def get_approval(approval_id: UUID, user: CurrentPrincipal, catalog: Catalog) -> ApprovalOut:
    """One request: the caller's own (another user's is 404 `NOT_FOUND`), any for an admin key."""
    return ApprovalOut.of(catalog.approvals.get(str(approval_id), user.owner_filter()))


@router.post("/{approval_id}/approve", response_model=ExecutionOut | ApprovalOut,
             responses={**error_responses(400, *AUTH_ERRORS, 404, 409, 422, 503), **DECIDED, **DECIDERS},
             summary="Approve and run", description=APPROVE + TOOL_CALLS)
def approve(approval_id: UUID, user: AdminPrincipal, catalog: Catalog, services: ServicesDep,
            body: Decision | None = None) -> ExecutionOut | ApprovalOut:
    reason = body.reason if body else None
    approval = catalog.approvals.get(str(approval_id))
    if approval.kind is ApprovalKind.TOOL_CALL:
        return ApprovalOut.of(tool_approvals(services).approve(approval.id, str(user.user_id), reason))
    _, execution = catalog.approve(approval.id, str(user.user_id), reason)
    return ExecutionOut.of(execution)


@router.post("/{approval_id}/deny", response_model=ApprovalOut,
             responses={**error_responses(400, *AUTH_ERRORS, 404, 409, 422, 503), **DECIDED, **DECIDERS},
             summary="Deny", description=DENY + TOOL_CALLS)
def deny(approval_id: UUID, user: AdminPrincipal, catalog: Catalog, services: ServicesDep,
         body: Decision | None = None) -> ApprovalOut:
    reason = body.reason if body else None
    approval = catalog.approvals.get(str(approval_id))
    if approval.kind is ApprovalKind.TOOL_CALL:
        return ApprovalOut.of(tool_approvals(services).deny(approval.id, str(user.user_id), reason))
    return ApprovalOut.of(catalog.deny(approval.id, str(user.user_id), reason))
