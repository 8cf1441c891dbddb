"""Agentic tasks: create, list, get, stream the events, cancel, approve a held plan.

Every route answers 503 `SERVICE_UNAVAILABLE` "agentic mode is disabled ([agentic] enabled =
false)" while agentic mode is off (checked before the body). Another user's task is 404.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query
from sse_starlette import EventSourceResponse

from api.deps import CurrentPrincipal, Offset, service
from api.schemas.agentic import TaskCreate, TaskCreated, TaskList, TaskOut, TaskStatusOut
from api.schemas.common import AUTH_ERRORS, error_responses
from api.sse import LastEventId, event_id, event_stream
from assistant.agents.tasks import DISABLED, AgenticService

AGENTIC = service("agentic", DISABLED, AgenticService.require_enabled)  # 503 while agentic mode is disabled
Agentic = Annotated[AgenticService, AGENTIC]
router = APIRouter(prefix="/v1/agentic/tasks", tags=["agentic tasks"], dependencies=[AGENTIC])

STATES = """
**Task states** (`status`) and transitions:

| From | Trigger | To |
|---|---|---|
| (none) | `POST /v1/agentic/tasks` | `planning` (`task_started`) |
| `planning` | plan made (`plan_created`) | `running`; with `require_approval`: `awaiting_approval` (`approval_required`) |
| `awaiting_approval` | `POST .../approve` (`plan_approved`) | `running` |
| `planning`, `running` | every sub-agent ended, at least one completed | `completed` (`result` set; `task_completed`) |
| `planning`, `running` | no sub-agent completed, or an unexpected error | `failed` (`error` says why; `task_failed`) |
| `planning`, `running` | the total timeout passed | `timed_out` (running and pending sub-agents cancelled; `task_timed_out`) |
| `planning`, `awaiting_approval`, `running` | `POST .../cancel` | `cancelled` (every sub-agent cancelled; `task_cancelled`) |
| `planning`, `running` | the server stopped or restarted | `failed`, error "interrupted by a server restart" |

`completed`, `failed`, `cancelled` and `timed_out` are final. A task `awaiting_approval` keeps
waiting across restarts (its plan is stored). The total timeout (`[agentic] total_timeout_minutes`)
counts from creation, or from the approval for a held plan.

**Sub-agent states**: `pending` (waiting for one of `[agentic] max_concurrent_sub_agents` slots)
→ `running` (the tool loop with the caller's tools, at most `[agentic] sub_agent_timeout_minutes`)
→ `completed` | `failed` | `timed_out` | `cancelled` (by a cancel or the task's total timeout).

**Plan.** The model splits the description into at most `[agentic] max_sub_agents_per_task`
sub-tasks (`{description, profile?, tools?}`), decoded against a JSON schema. If its output is
unusable (no plan, no sub-task, engine error) the plan is one sub-task: the whole description
(`plan_created` then says `fallback: true`). **Result**: with one sub-agent, its result; with
several, one more model call synthesises their results; if that call fails, their results joined
in order. The inference engine runs one generation at a time: sub-agents interleave their model
turns and overlap their tool runs.
"""


CREATE = """Start a task: 201 `{task_id, status: "planning", created_at}` at once; planning and the
sub-agents run in the background (follow them with `GET .../{task_id}/stream`). Description, plan
and results are sealed at rest.
"""


@router.post("", status_code=201, response_model=TaskCreated, description=CREATE + STATES,
             responses=error_responses(400, *AUTH_ERRORS, 413, 422, 503), summary="Create an agentic task")
async def create_task(body: TaskCreate, user: CurrentPrincipal, agentic: Agentic) -> TaskCreated:
    task = await agentic.create(user.user_id, body.description, body.require_approval)
    return TaskCreated(task_id=task.id, status=task.status.value, created_at=task.created_at)


@router.get("", response_model=TaskList, responses=error_responses(*AUTH_ERRORS, 422, 503),
            summary="List agentic tasks")
def list_tasks(
    user: CurrentPrincipal,
    agentic: Agentic,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size, 1 to 500.")] = 100,
    offset: Offset = 0,
) -> TaskList:
    """The caller's tasks, newest first (by created_at), paged by `limit` and `offset`."""
    return TaskList(tasks=[TaskOut.of(t) for t in agentic.list(user.user_id, limit, offset)])


GET = """The task: `{task_id, status, description, plan_summary, sub_agents: [{id, description,
status, ...}], result, created_at}` plus `require_approval`, `error`, `updated_at` and
`finished_at`. `plan_summary` is null while planning; `result` is null until `completed`.
"""


@router.get("/{task_id}", response_model=TaskOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503),
            summary="Get an agentic task", description=GET + STATES)
def get_task(task_id: UUID, user: CurrentPrincipal, agentic: Agentic) -> TaskOut:
    return TaskOut.of(agentic.get(user.user_id, task_id))


@router.get(
    "/{task_id}/stream",
    responses={200: {"content": {"text/event-stream": {}}, "description": "Server-Sent Events"},
               **error_responses(*AUTH_ERRORS, 404, 422, 503)},
    summary="Stream an agentic task's events",
)
async def stream_task(
    task_id: UUID,
    user: CurrentPrincipal,
    agentic: Agentic,
    last_event_id: LastEventId = None,
) -> EventSourceResponse:
    """Server-Sent Events. A subscriber first receives every event that already happened (the
    log is kept per task), then the live ones; the stream ends after the final event. Each event
    has an `id` (1, 2, ... per task); send `Last-Event-ID` to resume after one.

    Events (name: data): `task_started` {task_id, description}; `plan_created` {task_id,
    sub_tasks: [{id, description, profile, tools}], plan_summary, fallback}; `approval_required`
    {task_id, sub_tasks} (with `require_approval`: the plan waits for `POST .../approve`);
    `plan_approved` {task_id}; `sub_agent_started` {sub_agent_id, description};
    `sub_agent_completed` {sub_agent_id, result}; `sub_agent_failed` {sub_agent_id, status
    (`failed` or `timed_out`), error}; and one final event: `task_completed` {task_id, result},
    `task_failed` {task_id, error}, `task_cancelled` {task_id, cancelled_sub_agents} or
    `task_timed_out` {task_id, error, cancelled_sub_agents}. A task awaiting approval keeps the
    stream open until it is approved (events continue) or cancelled.
    """
    return event_stream(agentic.subscribe(user.user_id, task_id, after=event_id(last_event_id)))


@router.post("/{task_id}/cancel", response_model=TaskStatusOut,
             responses=error_responses(*AUTH_ERRORS, 404, 409, 422, 503), summary="Cancel an agentic task")
async def cancel_task(task_id: UUID, user: CurrentPrincipal, agentic: Agentic) -> TaskStatusOut:
    """Cancel a task that is `planning`, `awaiting_approval` or `running`: every running sub-agent
    is stopped (generation stops between tokens), pending ones never start; 200 `{task_id, status:
    "cancelled"}` once they have stopped, and the stream ends with `task_cancelled`. A task that has
    already ended (`completed`, `failed`, `cancelled`, `timed_out`) is 409 `CONFLICT`, with its
    status in `details.status`."""
    task = await agentic.cancel(user.user_id, task_id)
    return TaskStatusOut(task_id=task.id, status=task.status.value)


@router.post("/{task_id}/approve", response_model=TaskStatusOut,
             responses=error_responses(*AUTH_ERRORS, 404, 409, 422, 503), summary="Approve a held plan")
async def approve_task(task_id: UUID, user: CurrentPrincipal, agentic: Agentic) -> TaskStatusOut:
    """Run the plan of a task created with `require_approval: true` once it is
    `awaiting_approval` (after `plan_created` and `approval_required`): 200 `{task_id, status:
    "running"}`, a `plan_approved` event, then the sub-agents run. The total timeout counts from
    now. Any other status is 409 `CONFLICT` (details.status); to reject a plan, cancel the task."""
    task = await agentic.approve(user.user_id, task_id)
    return TaskStatusOut(task_id=task.id, status=task.status.value)
