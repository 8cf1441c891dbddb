"""Approval requests of the command catalog: list, get, approve (runs the command once), deny.

Requests are server-wide like the catalog: any key may list them; approving and denying need a
full key (a read-only key gets 403). The requester may approve their own request: approval is a
deliberate second step by a person, not a separation of duties. Each decision is audited.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query

from api.deps import CurrentPrincipal, Limit, Offset
from api.routes.catalog import Catalog
from api.schemas.catalog import ApprovalOut, Decision, ExecutionOut
from api.schemas.common import AUTH_ERRORS, ErrorEnvelope, error_responses
from assistant.catalog import ApprovalStatus

router = APIRouter(prefix="/v1/approvals", tags=["approvals"])

DECIDED = {409: {"model": ErrorEnvelope, "description": "The request was already decided (CONFLICT; details.status is its status)."}}


@router.get("", response_model=list[ApprovalOut], responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="List approval requests")
def list_approvals(
    user: CurrentPrincipal,
    catalog: Catalog,
    status: Annotated[ApprovalStatus | None, Query(description="Only requests in this status.")] = None,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[ApprovalOut]:
    """Approval requests, newest first. `status`: `pending` (waiting for a decision), `approved`
    (approved, the command is running), `denied`, `executed` (approved and run: `execution_id`
    names the execution). Deleting a catalog entry denies its pending requests."""
    return [ApprovalOut.of(a) for a in catalog.approvals.list(status, limit, offset)]


@router.get("/{approval_id}", response_model=ApprovalOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503),
            summary="Get an approval request")
def get_approval(approval_id: UUID, user: CurrentPrincipal, catalog: Catalog) -> ApprovalOut:
    return ApprovalOut.of(catalog.approvals.get(str(approval_id)))


@router.post("/{approval_id}/approve", response_model=ExecutionOut,
             responses={**error_responses(400, *AUTH_ERRORS, 404, 409, 422, 503), **DECIDED},
             summary="Approve and run")
def approve(approval_id: UUID, user: CurrentPrincipal, catalog: Catalog,
            body: Decision | None = None) -> ExecutionOut:
    """Approve a pending request: its command (the text shown in the request) runs once, now, with
    the same bounds as `execute`, and the answer is the execution (`approval_id` set). The request
    becomes `executed`. A request already decided is 409 and nothing runs. The body is optional:
    `{reason}` is recorded in the audit log."""
    _, execution = catalog.approve(str(approval_id), str(user.user_id), body.reason if body else None)
    return ExecutionOut.of(execution)


@router.post("/{approval_id}/deny", response_model=ApprovalOut,
             responses={**error_responses(400, *AUTH_ERRORS, 404, 409, 422, 503), **DECIDED},
             summary="Deny")
def deny(approval_id: UUID, user: CurrentPrincipal, catalog: Catalog,
         body: Decision | None = None) -> ApprovalOut:
    """Deny a pending request: nothing runs, and the request is `denied` for good. A request
    already decided is 409. The body is optional: `{reason}` is kept with the request and audited."""
    return ApprovalOut.of(catalog.deny(str(approval_id), str(user.user_id), body.reason if body else None))
