"""Agentic tasks: the request, the task, and the small answers of create, cancel and approve."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas.common import NOT_BLANK
from assistant.agents.task_store import AgenticTask, SubAgent
from assistant.agents.tasks import MAX_DESCRIPTION_CHARS

TASK_STATUSES = "`planning`, `awaiting_approval`, `running`, `completed`, `failed`, `cancelled`, `timed_out`"
SUB_AGENT_STATUSES = "`pending`, `running`, `completed`, `failed`, `cancelled`, `timed_out`"


class TaskCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(min_length=1, max_length=MAX_DESCRIPTION_CHARS,
                             description="What to do (1 to 10,000 characters, not blank; sealed at rest).",
                             json_schema_extra={"pattern": NOT_BLANK})
    require_approval: bool = Field(False, description="Hold the plan in `awaiting_approval` until "
                                                      "`POST /v1/agentic/tasks/{task_id}/approve`.")

    @field_validator("description")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class TaskCreated(BaseModel):
    task_id: str
    status: str = Field(description="`planning`.")
    created_at: str


class TaskStatusOut(BaseModel):
    task_id: str
    status: str = Field(description=f"One of {TASK_STATUSES}.")


class SubAgentOut(BaseModel):
    id: str
    description: str
    status: str = Field(description=f"One of {SUB_AGENT_STATUSES}.")
    profile: str | None = Field(None, description="The agent profile the planner assigned, if any.")
    tools: list[str] | None = Field(None, description="The tools it may use; null = every registered tool.")
    result: str | None = Field(None, description="Its answer, once `completed`.")
    error: str | None = Field(None, description="Why it `failed` or `timed_out`.")
    started_at: str | None = None
    finished_at: str | None = None

    @classmethod
    def of(cls, s: SubAgent) -> SubAgentOut:
        return cls(id=s.id, description=s.description, status=s.status.value, profile=s.profile,
                   tools=list(s.tools) if s.tools is not None else None, result=s.result, error=s.error,
                   started_at=s.started_at, finished_at=s.finished_at)


class TaskOut(BaseModel):
    task_id: str
    status: str = Field(description=f"One of {TASK_STATUSES}.")
    description: str
    plan_summary: str | None = Field(None, description="How the planner split the task; null while `planning`.")
    sub_agents: list[SubAgentOut] = Field(description="In plan order; empty while `planning`.")
    result: str | None = Field(None, description="The final answer once `completed`; null before and otherwise.")
    created_at: str
    require_approval: bool
    error: str | None = Field(None, description="Why the task `failed` or `timed_out`.")
    updated_at: str
    finished_at: str | None = Field(None, description="When it reached a final state.")

    @classmethod
    def of(cls, t: AgenticTask) -> TaskOut:
        return cls(task_id=t.id, status=t.status.value, description=t.description, plan_summary=t.plan_summary,
                   sub_agents=[SubAgentOut.of(s) for s in t.sub_agents], result=t.result, created_at=t.created_at,
                   require_approval=t.require_approval, error=t.error, updated_at=t.updated_at,
                   finished_at=t.finished_at)


class TaskList(BaseModel):
    tasks: list[TaskOut]
