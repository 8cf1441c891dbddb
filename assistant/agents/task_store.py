"""Agentic tasks as records: the task, its sub-agents and its event log, in SQLite.

A task's description, plan summary and result, each sub-agent's description and result, and the
data of every event are the user's words: they are sealed at rest (XChaCha20-Poly1305) like chat
messages. Status changes are compare-and-set (:meth:`TaskStore.transition`), so a cancel and a
run's own ending can never both win.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from uuid import UUID, uuid4

from assistant.agents.planner import SubTaskSpec
from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import NotFoundError
from assistant.storage.db import Database


class TaskStatus(StrEnum):
    PLANNING = "planning"
    AWAITING_APPROVAL = "awaiting_approval"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"

    @property
    def final(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.TIMED_OUT)


ACTIVE = (TaskStatus.PLANNING, TaskStatus.AWAITING_APPROVAL, TaskStatus.RUNNING)


class SubAgentStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


class TaskEventType(StrEnum):
    """The stream's events (the spec's first variant, plus the other endings and approval)."""

    TASK_STARTED = "task_started"  # {task_id, description}
    PLAN_CREATED = "plan_created"  # {task_id, sub_tasks, plan_summary, fallback}
    APPROVAL_REQUIRED = "approval_required"  # {task_id, sub_tasks}
    PLAN_APPROVED = "plan_approved"  # {task_id}
    SUB_AGENT_STARTED = "sub_agent_started"  # {sub_agent_id, description}
    SUB_AGENT_COMPLETED = "sub_agent_completed"  # {sub_agent_id, result}
    SUB_AGENT_FAILED = "sub_agent_failed"  # {sub_agent_id, status, error}
    TASK_COMPLETED = "task_completed"  # {task_id, result}
    TASK_FAILED = "task_failed"  # {task_id, error}
    TASK_CANCELLED = "task_cancelled"  # {task_id, cancelled_sub_agents}
    TASK_TIMED_OUT = "task_timed_out"  # {task_id, error, cancelled_sub_agents}

    @property
    def final(self) -> bool:
        return self in FINAL_EVENTS


FINAL_EVENTS = frozenset({TaskEventType.TASK_COMPLETED, TaskEventType.TASK_FAILED, TaskEventType.TASK_CANCELLED,
                          TaskEventType.TASK_TIMED_OUT})


@dataclass(frozen=True)
class SubAgent:
    id: str
    task_id: str
    position: int
    description: str
    profile: str | None
    tools: tuple[str, ...] | None
    status: SubAgentStatus
    result: str | None = None
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def spec(self) -> SubTaskSpec:
        return SubTaskSpec(self.description, self.profile, self.tools)


@dataclass(frozen=True)
class AgenticTask:
    id: str
    user_id: str
    status: TaskStatus
    description: str
    require_approval: bool
    plan_summary: str | None
    result: str | None
    error: str | None
    created_at: str
    updated_at: str
    finished_at: str | None = None
    sub_agents: tuple[SubAgent, ...] = ()


@dataclass(frozen=True)
class TaskEvent:
    task_id: str
    seq: int  # 1, 2, ... per task
    type: TaskEventType
    data: dict[str, Any]
    created_at: str


class TaskStore:
    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    # Each sealed value is bound to (table, column, row id, the task's user): SealContext.

    def _seal(self, text: str | None, table: str, column: str, row_id: str, user_id: str) -> bytes | None:
        return None if text is None else self.sealer.seal(text, SealContext(table, column, row_id, user_id))

    def _open(self, value: bytes | None, table: str, column: str, row_id: str, user_id: str) -> str | None:
        return None if value is None else self.sealer.open(value, SealContext(table, column, row_id, user_id))

    def _owner(self, task_id: str) -> str:
        return self.db.scalar("SELECT user_id FROM agentic_tasks WHERE id = ?", (task_id,)) or ""

    # --- tasks -----------------------------------------------------------------------------------------

    def create(self, user_id: UUID | str, description: str, require_approval: bool) -> AgenticTask:
        now = iso()
        task_id = str(uuid4())
        self.db.execute(
            "INSERT INTO agentic_tasks (id, user_id, status, description_sealed, require_approval, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (task_id, str(user_id), TaskStatus.PLANNING.value,
             self._seal(description, "agentic_tasks", "description_sealed", task_id, str(user_id)),
             int(require_approval), now, now),
        )
        return self.get(task_id)

    def _task(self, row: dict[str, Any], with_sub_agents: bool = True) -> AgenticTask:
        def opened(column: str) -> str | None:
            return self._open(row[column], "agentic_tasks", column, row["id"], row["user_id"])

        return AgenticTask(
            id=row["id"], user_id=row["user_id"], status=TaskStatus(row["status"]),
            description=opened("description_sealed") or "", require_approval=bool(row["require_approval"]),
            plan_summary=opened("plan_summary_sealed"), result=opened("result_sealed"),
            error=row["error"], created_at=row["created_at"], updated_at=row["updated_at"],
            finished_at=row["finished_at"], sub_agents=tuple(self.sub_agents(row["id"])) if with_sub_agents else (),
        )

    def get(self, task_id: UUID | str, user_id: UUID | str | None = None) -> AgenticTask:
        """The task; with ``user_id``, only if it is that user's (another user's task is not found)."""
        row = self.db.one("SELECT * FROM agentic_tasks WHERE id = ?", (str(task_id),))
        if row is None or (user_id is not None and row["user_id"] != str(user_id)):
            raise NotFoundError(f"agentic task {task_id} not found")
        return self._task(row)

    def list(self, user_id: UUID | str, limit: int = 100, offset: int = 0) -> list[AgenticTask]:
        """The user's tasks, newest first."""
        rows = self.db.query(
            "SELECT * FROM agentic_tasks WHERE user_id = ? ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
            (str(user_id), limit, offset),
        )
        return [self._task(r) for r in rows]

    def with_status(self, statuses: Iterable[TaskStatus]) -> list[str]:
        """Ids of the tasks in any of ``statuses``, oldest first."""
        wanted = [s.value for s in statuses]
        marks = ", ".join("?" for _ in wanted)
        return [r["id"] for r in self.db.query(
            f"SELECT id FROM agentic_tasks WHERE status IN ({marks}) ORDER BY created_at",
            wanted)]

    def transition(self, task_id: str, to: TaskStatus, *, only_from: Sequence[TaskStatus] = ACTIVE,
                   error: str | None = None, result: str | None = None) -> bool:
        """Move the task to ``to`` if its status is one of ``only_from``; False when it had moved on."""
        now = iso()
        with self.db.transaction() as db:
            row = db.one("SELECT status, user_id FROM agentic_tasks WHERE id = ?", (task_id,))
            if row is None or TaskStatus(row["status"]) not in only_from:
                return False
            db.execute(
                "UPDATE agentic_tasks SET status = ?, updated_at = ?, error = COALESCE(?, error), "
                "result_sealed = COALESCE(?, result_sealed), finished_at = ? WHERE id = ?",
                (to.value, now, error, self._seal(result, "agentic_tasks", "result_sealed", task_id, row["user_id"]),
                 now if to.final else None, task_id),
            )
        return True

    # --- plan and sub-agents ---------------------------------------------------------------------------

    def save_plan(self, task_id: str, summary: str, sub_tasks: Sequence[SubTaskSpec]) -> list[SubAgent]:
        """Store the plan: its summary and one pending sub-agent per sub-task, in order."""
        now = iso()
        with self.db.transaction() as db:
            user = self._owner(task_id)
            db.execute("UPDATE agentic_tasks SET plan_summary_sealed = ?, updated_at = ? WHERE id = ?",
                       (self._seal(summary, "agentic_tasks", "plan_summary_sealed", task_id, user), now, task_id))
            for position, spec in enumerate(sub_tasks):
                sub_id = str(uuid4())
                db.execute(
                    "INSERT INTO agentic_sub_agents (id, task_id, position, description_sealed, profile, tools, "
                    "status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (sub_id, task_id, position,
                     self._seal(spec.description, "agentic_sub_agents", "description_sealed", sub_id, user), spec.profile,
                     None if spec.tools is None else json.dumps(list(spec.tools)), SubAgentStatus.PENDING.value),
                )
        return self.sub_agents(task_id)

    def sub_agents(self, task_id: str) -> list[SubAgent]:
        rows = self.db.query("SELECT s.*, t.user_id FROM agentic_sub_agents s JOIN agentic_tasks t ON t.id = s.task_id "
                             "WHERE s.task_id = ? ORDER BY s.position", (task_id,))
        return [
            SubAgent(r["id"], r["task_id"], r["position"],
                     self._open(r["description_sealed"], "agentic_sub_agents", "description_sealed", r["id"],
                                r["user_id"]) or "", r["profile"],
                     None if r["tools"] is None else tuple(json.loads(r["tools"])), SubAgentStatus(r["status"]),
                     self._open(r["result_sealed"], "agentic_sub_agents", "result_sealed", r["id"], r["user_id"]),
                     r["error"], r["started_at"], r["finished_at"])
            for r in rows
        ]

    def start_sub_agent(self, sub_agent_id: str) -> None:
        self.db.execute("UPDATE agentic_sub_agents SET status = ?, started_at = ? WHERE id = ?",
                        (SubAgentStatus.RUNNING.value, iso(), sub_agent_id))

    def finish_sub_agent(self, sub_agent_id: str, status: SubAgentStatus, *, result: str | None = None,
                         error: str | None = None) -> None:
        user = self.db.scalar("SELECT t.user_id FROM agentic_sub_agents s JOIN agentic_tasks t ON t.id = s.task_id "
                              "WHERE s.id = ?", (sub_agent_id,)) or ""
        self.db.execute(
            "UPDATE agentic_sub_agents SET status = ?, result_sealed = ?, error = ?, finished_at = ? "
            "WHERE id = ? AND status IN ('pending', 'running')",
            (status.value, self._seal(result, "agentic_sub_agents", "result_sealed", sub_agent_id, user), error, iso(),
             sub_agent_id),
        )

    def end_open_sub_agents(self, task_id: str, status: SubAgentStatus, error: str | None = None) -> list[str]:
        """Give every pending or running sub-agent of the task ``status``; their ids, in order."""
        with self.db.transaction() as db:
            ids = [r["id"] for r in db.query(
                "SELECT id FROM agentic_sub_agents WHERE task_id = ? AND status IN ('pending', 'running') "
                "ORDER BY position", (task_id,))]
            db.execute(
                "UPDATE agentic_sub_agents SET status = ?, error = ?, finished_at = ? "
                "WHERE task_id = ? AND status IN ('pending', 'running')",
                (status.value, error, iso(), task_id),
            )
        return ids

    # --- events ----------------------------------------------------------------------------------------

    def append_event(self, task_id: str, kind: TaskEventType, data: dict[str, Any]) -> TaskEvent:
        now = iso()
        with self.db.transaction() as db:
            seq = db.scalar("SELECT COALESCE(MAX(seq), 0) + 1 FROM agentic_events WHERE task_id = ?", (task_id,))
            sealed = self._seal(json.dumps(data, ensure_ascii=False, default=str), "agentic_events", "data_sealed",
                                f"{task_id}:{seq}", self._owner(task_id))
            db.execute(
                "INSERT INTO agentic_events (task_id, seq, event, data_sealed, created_at) VALUES (?, ?, ?, ?, ?)",
                (task_id, seq, kind.value, sealed, now),
            )
        return TaskEvent(task_id, seq, kind, data, now)

    def events(self, task_id: str, after: int = 0) -> list[TaskEvent]:
        """The task's events after sequence number ``after``, in order."""
        rows = self.db.query(
            "SELECT e.*, t.user_id FROM agentic_events e JOIN agentic_tasks t ON t.id = e.task_id "
            "WHERE e.task_id = ? AND e.seq > ? ORDER BY e.seq", (task_id, after)
        )
        return [TaskEvent(r["task_id"], r["seq"], TaskEventType(r["event"]),
                          json.loads(self._open(r["data_sealed"], "agentic_events", "data_sealed",
                                                f"{r['task_id']}:{r['seq']}", r["user_id"]) or "null"),
                          r["created_at"]) for r in rows]
