"""ToolApprovals with real stores: a gated call's request, approval running the tool as the requester
(result, tool run, note), a failing or vanished tool, denial, and the rules of deciding."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

from assistant.catalog.approvals import ApprovalKind, ApprovalStatus, ApprovalStore
from assistant.chat.approvals import ToolApprovals
from assistant.chat.conversations import ConversationStore
from assistant.chat.tool_runs import ToolRunStore
from assistant.crypto import Sealer
from assistant.errors import ConflictError, ForbiddenError
from assistant.llm.base import ToolCall
from assistant.storage.db import Database
from assistant.tools.base import ToolContext, ToolRegistry, tool
from assistant.tools.catalog import Toolbox

ALICE, ADMIN = str(uuid4()), str(uuid4())
RAN: list[tuple[str, str]] = []


@tool("test")
def greet(ctx: ToolContext, name: str) -> dict:
    """Greets."""
    RAN.append((str(ctx.user_id), name))
    return {"greeting": f"hello {name}"}


@tool("test")
def explode(ctx: ToolContext) -> str:
    """Fails."""
    raise RuntimeError("backend down")


@pytest.fixture
def env(tmp_path: Path):  # noqa: ANN201
    db = Database(tmp_path / "a.db")
    sealer = Sealer(bytes(32))
    conversations = ConversationStore(db, sealer)
    conversation_id, message_id, _ = conversations.record_exchange(
        user_id=ALICE, conversation_id=None, user_message="greet Bob", reply="waiting", model="m",
        prompt_tokens=1, completion_tokens=1)
    approvals = ToolApprovals(ApprovalStore(db, sealer), Toolbox(ToolRegistry([greet, explode])), conversations,
                              ToolRunStore(db, sealer))
    RAN.clear()
    yield approvals, approvals.gate(ALICE, conversation_id, message_id), conversation_id
    db.close()


def test_approve_runs_the_tool_as_the_requester_once(env) -> None:
    approvals, gate, conversation_id = env
    approval_id = gate(ToolCall("c1", "greet", {"name": "Bob"}))
    pending = approvals.store.get(approval_id, ALICE)
    assert pending.kind is ApprovalKind.TOOL_CALL and pending.status is ApprovalStatus.PENDING
    assert pending.arguments == {"name": "Bob"} and pending.requested_by == ALICE and RAN == []
    with pytest.raises(ForbiddenError):
        approvals.approve(approval_id, ALICE)
    done = approvals.approve(approval_id, ADMIN)
    assert RAN == [(ALICE, "Bob")]
    assert done.status is ApprovalStatus.EXECUTED and done.result == {"greeting": "hello Bob"} and done.tool_run_id
    (run,) = [r for r in approvals.tool_runs.list(ALICE) if r.id == done.tool_run_id]
    assert run.status == "ok" and run.result == {"greeting": "hello Bob"}
    note = approvals.conversations.history(conversation_id, 10)[-1]
    assert note.role == "user" and f"approved by admin {ADMIN}" in note.content and "hello Bob" in note.content
    with pytest.raises(ConflictError):
        approvals.approve(approval_id, ADMIN)
    assert RAN == [(ALICE, "Bob")]


@pytest.mark.parametrize(("name", "error"), [("explode", "explode failed: RuntimeError: backend down"),
                                             ("vanished", "the tool vanished is no longer available")])
def test_a_failing_or_vanished_tool_is_the_outcome_not_an_error(env, name: str, error: str) -> None:
    approvals, gate, conversation_id = env
    done = approvals.approve(gate(ToolCall("c1", name, {})), ADMIN)
    assert done.status is ApprovalStatus.EXECUTED and done.error == error and done.result is None
    assert f"and it failed: {error}" in approvals.conversations.history(conversation_id, 10)[-1].content


def test_deny_runs_nothing_and_tells_the_conversation(env) -> None:
    approvals, gate, conversation_id = env
    denied = approvals.deny(gate(ToolCall("c1", "greet", {"name": "Eve"})), ADMIN, "  no  ")
    assert denied.status is ApprovalStatus.DENIED and denied.reason == "no" and RAN == []
    note = approvals.conversations.history(conversation_id, 10)[-1].content
    assert note.endswith(f"was denied by admin {ADMIN} (no). It did not run.")


def test_arguments_and_results_are_sealed_at_rest(env) -> None:
    approvals, gate, _ = env
    approvals.approve(gate(ToolCall("c1", "greet", {"name": "Zebediah"})), ADMIN)
    row = approvals.store.db.one("SELECT arguments_sealed, result_sealed FROM command_approvals")
    assert b"Zebediah" not in bytes(row["arguments_sealed"]) and b"Zebediah" not in bytes(row["result_sealed"])
