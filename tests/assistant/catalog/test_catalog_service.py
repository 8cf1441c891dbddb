"""CommandCatalog with a fake runner: execution records, approvals (run once, deny, decide twice,
never by the requester), OS checks, deleting an entry with pending requests, the audit trail,
outputs sealed at rest, the network flag, and who owns executions and approvals."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from assistant.catalog import (
    ApprovalStatus,
    AuditAction,
    CommandCatalog,
    ExecutionStatus,
    RunOutcome,
    TargetOs,
    spec_of,
)
from assistant.config import CommandsSettings
from assistant.crypto import Sealer
from assistant.errors import ConflictError, ForbiddenError, NotFoundError, ValidationFailed
from assistant.storage.db import Database

ALICE, BOB = "7f1c8a52-5d1e-4c8e-9a43-2a1f0e7b9c01", "0b6e2d4f-9c3a-4e21-8f57-6d0a1b2c3d4e"


class FakeRunner:
    """Records every command it is asked to run and answers with ``outcome``."""

    def __init__(self, outcome: RunOutcome | None = None, error: Exception | None = None):
        self.outcome = outcome or RunOutcome(0, "secret output 42\n", "a warning\n", 5)
        self.error = error
        self.calls: list[tuple[str, float, int]] = []
        self.networks: list[bool] = []
        self.lock = threading.Lock()

    def run(self, command: str, *, timeout_secs: float, max_output_bytes: int, network: bool = False) -> RunOutcome:
        with self.lock:
            self.calls.append((command, timeout_secs, max_output_bytes))
            self.networks.append(network)
        if self.error is not None:
            raise self.error
        return self.outcome


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(tmp_path / "service.db")
    yield database
    database.close()


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture
def catalog(db: Database, runner: FakeRunner) -> CommandCatalog:
    settings = CommandsSettings(execution_timeout_secs=7, max_output_bytes=1234, seed_defaults=False)
    return CommandCatalog(db, Sealer(os.urandom(32)), settings, runner=runner, server_os=TargetOs.LINUX)


def add(catalog: CommandCatalog, name: str = "Echo", command: str = "echo hi", os_: str = "any",
        risk: str = "low", approval: bool = False, network: bool = False):
    return catalog.create(spec_of(name, "", command, "system", risk, os_, approval, network), ALICE)


def test_execute_runs_once_with_the_configured_bounds(catalog: CommandCatalog, runner: FakeRunner) -> None:
    entry = add(catalog)
    result = catalog.execute(entry.id, ALICE)
    assert result.approval is None
    execution = result.execution
    assert runner.calls == [("echo hi", 7, 1234)]
    assert execution.status is ExecutionStatus.COMPLETED and execution.exit_code == 0
    assert execution.stdout == "secret output 42\n" and execution.stderr == "a warning\n"
    assert execution.user_id == ALICE and execution.catalog_id == entry.id and execution.approval_id is None
    assert catalog.executions.get(execution.id) == execution
    assert catalog.executions.list() == [execution]


def test_outputs_and_audit_details_are_sealed_at_rest(catalog: CommandCatalog, db: Database) -> None:
    catalog.execute(add(catalog).id, ALICE)
    row = db.one("SELECT stdout_sealed, stderr_sealed FROM command_executions")
    assert b"secret output" not in bytes(row["stdout_sealed"]) and b"warning" not in bytes(row["stderr_sealed"])
    details = [bytes(r["detail_sealed"]) for r in db.query("SELECT detail_sealed FROM command_audit")]
    assert details and not any(b"Echo" in d for d in details)


@pytest.mark.parametrize(("outcome", "status"), [
    (RunOutcome(2, "", "boom", 3), ExecutionStatus.FAILED),
    (RunOutcome(None, "partial", "", 7000, timed_out=True), ExecutionStatus.TIMED_OUT),
    (RunOutcome(0, "x" * 10, "", 3, truncated=True), ExecutionStatus.COMPLETED),
])
def test_outcomes_are_recorded_as_they_were(db: Database, outcome: RunOutcome, status: ExecutionStatus) -> None:
    catalog = CommandCatalog(db, Sealer(None), runner=FakeRunner(outcome), server_os=TargetOs.LINUX)
    execution = catalog.execute(add(catalog).id, ALICE).execution
    assert execution.status is status
    assert (execution.exit_code, execution.stdout, execution.stderr, execution.duration_ms, execution.timed_out,
            execution.truncated) == (outcome.exit_code, outcome.stdout, outcome.stderr, outcome.duration_ms,
                                     outcome.timed_out, outcome.truncated)
    assert catalog.executions.get(execution.id) == execution


def test_a_runner_that_raises_gives_a_failed_execution(db: Database) -> None:
    catalog = CommandCatalog(db, Sealer(None), runner=FakeRunner(error=RuntimeError("broken")),
                             server_os=TargetOs.LINUX)
    execution = catalog.execute(add(catalog).id, ALICE).execution
    assert execution.status is ExecutionStatus.FAILED and execution.exit_code is None
    assert "broken" in execution.stderr


def test_an_entry_for_another_os_is_refused_and_nothing_is_recorded(catalog: CommandCatalog,
                                                                     runner: FakeRunner) -> None:
    for approval in (False, True):
        entry = add(catalog, name=f"win {approval}", command="ver", os_="windows", approval=approval)
        audit_before = len(catalog.audit.list())
        with pytest.raises(ConflictError) as exc:
            catalog.execute(entry.id, ALICE)
        assert "windows" in exc.value.message and "linux" in exc.value.message
        assert exc.value.details == {"entry_os": "windows", "server_os": "linux"}
        assert len(catalog.audit.list()) == audit_before
    assert runner.calls == [] and catalog.executions.list() == [] and catalog.approvals.list() == []


def test_own_os_and_any_run(catalog: CommandCatalog, runner: FakeRunner) -> None:
    catalog.execute(add(catalog, name="l", os_="linux").id, ALICE)
    catalog.execute(add(catalog, name="a", os_="any").id, ALICE)
    assert len(runner.calls) == 2


def test_unknown_entry(catalog: CommandCatalog) -> None:
    with pytest.raises(NotFoundError):
        catalog.execute("00000000-0000-0000-0000-000000000000", ALICE)


def test_approval_required_runs_nothing_until_approved_then_once(catalog: CommandCatalog,
                                                                 runner: FakeRunner) -> None:
    entry = add(catalog, command="touch /tmp/x", approval=True)
    result = catalog.execute(entry.id, ALICE)
    assert result.execution is None and runner.calls == []
    approval = result.approval
    assert approval.status is ApprovalStatus.PENDING and approval.command == "touch /tmp/x"
    assert approval.requested_by == ALICE and approval.catalog_name == "Echo" and approval.risk_level == "low"
    assert catalog.approvals.list(ApprovalStatus.PENDING) == [approval]

    done, execution = catalog.approve(approval.id, BOB, "  looks fine ")
    assert runner.calls == [("touch /tmp/x", 7, 1234)]
    assert done.status is ApprovalStatus.EXECUTED and done.execution_id == execution.id
    assert done.decided_by == BOB and done.reason == "looks fine" and done.decided_at
    # the execution is the requester's (they asked for it); the approver is the request's decided_by
    assert execution.approval_id == approval.id and execution.user_id == ALICE

    with pytest.raises(ConflictError) as exc:
        catalog.approve(approval.id, BOB)
    assert exc.value.details == {"status": "executed"}
    with pytest.raises(ConflictError):
        catalog.deny(approval.id, BOB)
    assert len(runner.calls) == 1


def test_high_risk_needs_approval_even_when_asked_not_to(catalog: CommandCatalog, runner: FakeRunner) -> None:
    entry = add(catalog, risk="critical", approval=False)
    assert entry.requires_approval
    assert catalog.execute(entry.id, ALICE).approval is not None and runner.calls == []


def test_deny_is_final(catalog: CommandCatalog, runner: FakeRunner) -> None:
    approval = catalog.execute(add(catalog, approval=True).id, ALICE).approval
    denied = catalog.deny(approval.id, BOB, "not now")
    assert denied.status is ApprovalStatus.DENIED and denied.reason == "not now" and denied.execution_id is None
    with pytest.raises(ConflictError):
        catalog.approve(approval.id, BOB)
    with pytest.raises(ConflictError):
        catalog.deny(approval.id, BOB)
    assert runner.calls == []
    assert catalog.approvals.list(ApprovalStatus.DENIED) == [denied]
    assert catalog.approvals.list(ApprovalStatus.PENDING) == []


def test_a_too_long_reason_is_a_validation_error(catalog: CommandCatalog) -> None:
    approval = catalog.execute(add(catalog, approval=True).id, ALICE).approval
    with pytest.raises(ValidationFailed):
        catalog.deny(approval.id, BOB, "x" * 1001)
    assert catalog.approvals.get(approval.id).status is ApprovalStatus.PENDING


def test_unknown_approval(catalog: CommandCatalog) -> None:
    with pytest.raises(NotFoundError):
        catalog.approve("00000000-0000-0000-0000-000000000000", BOB)


def test_concurrent_approvals_run_the_command_exactly_once(catalog: CommandCatalog, runner: FakeRunner) -> None:
    approval = catalog.execute(add(catalog, approval=True).id, ALICE).approval
    results: list[str] = []
    start = threading.Barrier(6)

    def approve() -> None:
        start.wait()
        try:
            catalog.approve(approval.id, BOB)
            results.append("ran")
        except ConflictError:
            results.append("conflict")

    threads = [threading.Thread(target=approve) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["conflict"] * 5 + ["ran"]
    assert len(runner.calls) == 1 and len(catalog.executions.list()) == 1


def test_deleting_an_entry_denies_its_pending_requests(catalog: CommandCatalog, runner: FakeRunner) -> None:
    entry = add(catalog, approval=True)
    first = catalog.execute(entry.id, ALICE).approval
    second = catalog.execute(entry.id, ALICE).approval
    catalog.deny(second.id, BOB)
    catalog.delete(entry.id, BOB)
    after = catalog.approvals.get(first.id)
    assert after.status is ApprovalStatus.DENIED and after.decided_by == BOB
    assert after.reason == "the catalog entry was deleted"
    with pytest.raises(ConflictError):
        catalog.approve(first.id, ALICE)
    assert runner.calls == []
    deleted = catalog.audit.list(action=AuditAction.DELETED)[0]
    assert "1 pending approval request(s) denied" in deleted.detail


def test_the_audit_trail_of_a_whole_flow(catalog: CommandCatalog) -> None:
    plain = add(catalog, name="Plain")
    guarded = add(catalog, name="Guarded", approval=True)
    catalog.execute(plain.id, ALICE)
    one = catalog.execute(guarded.id, ALICE).approval
    two = catalog.execute(guarded.id, ALICE).approval
    _, execution = catalog.approve(one.id, BOB)
    catalog.deny(two.id, BOB, "enough")
    catalog.delete(plain.id, ALICE)
    events = list(reversed(catalog.audit.list()))
    assert [(e.action.value, e.user_id) for e in events] == [
        ("created", ALICE), ("created", ALICE), ("execute", ALICE), ("approval_requested", ALICE),
        ("approval_requested", ALICE), ("approved", BOB), ("execute", BOB), ("denied", BOB), ("deleted", ALICE),
    ]  # the approved run is audited as the approver's act, though the execution is the requester's
    assert catalog.executions.get(execution.id).user_id == ALICE
    assert [e.action.value for e in catalog.audit.list(user_id=BOB)] == ["denied", "execute", "approved"]
    assert events[2].catalog_id == plain.id and events[2].execution_id
    assert "completed, exit code 0" in events[2].detail
    assert events[5].approval_id == one.id and events[6].execution_id == execution.id
    assert events[6].approval_id == one.id
    assert events[7].detail == "denied running 'Guarded': enough"
    assert [e.action for e in catalog.audit.list(catalog_id=guarded.id)][-1] is AuditAction.CREATED
    assert len(catalog.audit.list(limit=2, offset=1)) == 2


def test_creating_a_duplicate_is_not_audited(catalog: CommandCatalog) -> None:
    add(catalog)
    with pytest.raises(ConflictError):
        add(catalog, name="echo")
    assert len(catalog.audit.list(action=AuditAction.CREATED)) == 1


def test_the_requester_cannot_decide_their_own_request(catalog: CommandCatalog, runner: FakeRunner) -> None:
    approval = catalog.execute(add(catalog, approval=True).id, ALICE).approval
    for decide in (catalog.approve, catalog.deny):
        with pytest.raises(ForbiddenError) as exc:
            decide(approval.id, ALICE)
        assert exc.value.message == "an approval must be decided by an admin other than its requester"
    assert catalog.approvals.get(approval.id).status is ApprovalStatus.PENDING and runner.calls == []
    done, _ = catalog.approve(approval.id, BOB)
    assert done.status is ApprovalStatus.EXECUTED and len(runner.calls) == 1


def test_the_network_flag_is_stored_and_handed_to_the_runner(catalog: CommandCatalog, runner: FakeRunner) -> None:
    offline, online = add(catalog, name="Offline"), add(catalog, name="Online", network=True)
    assert (offline.network, online.network) == (False, True)
    assert catalog.entries.get(online.id).network is True
    catalog.execute(offline.id, ALICE)
    catalog.execute(online.id, ALICE)
    guarded = add(catalog, name="Guarded online", approval=True, network=True)
    catalog.approve(catalog.execute(guarded.id, ALICE).approval.id, BOB)
    assert runner.networks == [False, True, True]


def test_executions_and_approvals_belong_to_who_asked(catalog: CommandCatalog) -> None:
    mine = catalog.execute(add(catalog, name="Mine").id, ALICE).execution
    theirs = catalog.execute(add(catalog, name="Theirs").id, BOB).execution
    asked = catalog.execute(add(catalog, name="Guarded", approval=True).id, ALICE).approval
    assert catalog.executions.list(owner=ALICE) == [mine] and catalog.executions.list(owner=BOB) == [theirs]
    assert len(catalog.executions.list()) == 2  # no owner: every user's (an admin)
    assert catalog.executions.get(mine.id, ALICE) == mine
    with pytest.raises(NotFoundError):
        catalog.executions.get(mine.id, BOB)
    assert catalog.approvals.list(owner=ALICE) == [asked] and catalog.approvals.list(owner=BOB) == []
    assert catalog.approvals.get(asked.id, ALICE) == asked
    with pytest.raises(NotFoundError):
        catalog.approvals.get(asked.id, BOB)
