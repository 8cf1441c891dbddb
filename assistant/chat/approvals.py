"""Approvals of tool calls: requested by the chat's tool loop, decided through ``/v1/approvals``.

A call of a tool named in ``tool_calling.require_approval_for`` does not run: the loop stores an
approval request (kind ``tool_call``, in the same table as the catalog's, requested by the chat's
user, with the tool, its arguments sealed, the conversation and the reply that asked) and tells the
model the call waits for approval. An admin other than the requester then decides it:

- approving runs the tool once, with the stored arguments, as the requester (through the
  :class:`~assistant.tools.catalog.Toolbox`); the result (or the tool's error) is kept with the
  request (sealed), recorded as a tool run of the reply that asked, and appended to the
  conversation as a ``tool`` message;
- denying runs nothing and appends "denied by admin <user id>" (and the reason) the same way.

The next turn of that conversation gives the model that message (as a note, see
:meth:`ConversationStore.history`), so it can report the result or the denial.
"""

from __future__ import annotations

import json
import time
from typing import Any
from uuid import UUID

from assistant.catalog.approvals import Approval, ApprovalKind, ApprovalStatus, ApprovalStore, clean_reason
from assistant.catalog.audit import AuditAction, AuditLog
from assistant.chat.conversations import ConversationStore
from assistant.chat.tool_loop import ApprovalGate, ToolRecord
from assistant.chat.tool_runs import ToolRunStore
from assistant.errors import ConflictError
from assistant.llm.base import ToolCall
from assistant.tools.base import ToolError
from assistant.tools.catalog import Toolbox

MAX_NOTE_RESULT_CHARS = 4000


class ToolApprovals:
    def __init__(self, store: ApprovalStore, toolbox: Toolbox | None, conversations: ConversationStore,
                 tool_runs: ToolRunStore | None = None, audit: AuditLog | None = None):
        self.store = store
        self.toolbox = toolbox
        self.conversations = conversations
        self.tool_runs = tool_runs
        self.audit = audit

    def gate(self, user_id: UUID | str, conversation_id: str, message_id: str) -> ApprovalGate:
        """The tool loop's gate for one chat turn: requests belong to ``user_id`` and name the
        conversation and the reply (``message_id``) the turn will be stored as."""

        def request(call: ToolCall) -> str:
            approval = self.store.request_tool_call(str(user_id), call.name, call.arguments, conversation_id,
                                                    message_id)
            self._audit(AuditAction.APPROVAL_REQUESTED, str(user_id), approval,
                        f"the tool call {call.name} needs approval")
            return approval.id

        return request

    def approve(self, approval_id: str, user_id: str, reason: str | None = None) -> Approval:
        """Approve a pending tool-call request and run the tool once; the request, ``executed``,
        with its result. ConflictError if already decided or not a tool call; ForbiddenError if
        ``user_id`` requested it."""
        reason = clean_reason(reason)
        self._check_kind(approval_id)
        approval = self.store.decide(approval_id, user_id, ApprovalStatus.APPROVED, reason)
        self._audit(AuditAction.APPROVED, user_id, approval, _verb("approved", approval, reason))
        result, error, duration_ms = self._run(approval)
        run_id = self._record_run(approval, result, error, duration_ms)
        done = self.store.tool_executed(approval.id, run_id, result, error)
        outcome = f"and it failed: {error}" if error else f"and it ran. Result: {_text(result)}"
        self._tell(done, f"was approved by admin {user_id} {outcome}")
        return done

    def deny(self, approval_id: str, user_id: str, reason: str | None = None) -> Approval:
        """Deny a pending tool-call request: nothing runs; the conversation is told."""
        reason = clean_reason(reason)
        self._check_kind(approval_id)
        approval = self.store.decide(approval_id, user_id, ApprovalStatus.DENIED, reason)
        self._audit(AuditAction.DENIED, user_id, approval, _verb("denied", approval, reason))
        self._tell(approval, f"was denied by admin {user_id}" + (f" ({reason})" if reason else "")
                   + ". It did not run.")
        return approval

    def _check_kind(self, approval_id: str) -> None:
        if self.store.get(approval_id).kind is not ApprovalKind.TOOL_CALL:
            raise ConflictError(f"approval {approval_id} is not a tool call")

    def _run(self, approval: Approval) -> tuple[Any, str | None, float]:
        started = time.perf_counter()
        tool = self.toolbox.registry.get(approval.tool_name or "") if self.toolbox is not None else None
        result: Any = None
        error: str | None = None
        if tool is None:
            error = f"the tool {approval.tool_name} is no longer available"
        else:
            try:
                result = tool(self.toolbox.context(approval.requested_by or ""), dict(approval.arguments or {}))
            except ToolError as exc:
                error = str(exc)
            except Exception as exc:  # a failing tool is the outcome of the call, not a server error
                error = f"{approval.tool_name} failed: {type(exc).__name__}: {exc}"
        return result, error, (time.perf_counter() - started) * 1000

    def _record_run(self, approval: Approval, result: Any, error: str | None, duration_ms: float) -> str | None:
        if self.tool_runs is None or approval.conversation_id is None or approval.message_id is None:
            return None
        call = ToolCall(f"approval_{approval.id}", approval.tool_name or "", dict(approval.arguments or {}))
        record = ToolRecord(0, call, result, error, duration_ms, "error" if error else "ok")
        (run,) = self.tool_runs.record(approval.requested_by or "", approval.conversation_id, approval.message_id,
                                       [record])
        return run.id

    def _tell(self, approval: Approval, outcome: str) -> None:
        if approval.conversation_id is None or approval.requested_by is None:
            return
        arguments = json.dumps(approval.arguments or {}, ensure_ascii=False, default=str)
        note = (f"[approval {approval.id}] The tool call {approval.tool_name}({arguments}) that waited for "
                f"approval {outcome}")
        self.conversations.add_note(approval.requested_by, approval.conversation_id, note)

    def _audit(self, action: AuditAction, user_id: str | None, approval: Approval, detail: str) -> None:
        if self.audit is not None:
            self.audit.record(action, user_id, detail, approval_id=approval.id)


def _verb(verb: str, approval: Approval, reason: str | None) -> str:
    return f"{verb} the tool call {approval.tool_name}" + (f": {reason}" if reason else "")


def _text(result: Any) -> str:
    text = json.dumps(result, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_NOTE_RESULT_CHARS else text[:MAX_NOTE_RESULT_CHARS] + "... (truncated)"
