"""list_tasks, create_task and complete_task: VTODOs in a CalDAV task list (capability ``tasks``).

A task's id is its iCalendar UID, stable across servers and clients. The ``[tasks]`` section has
no time zone, so a due time given without an offset is stored as a floating time (iCalendar's
"whatever the local time is", which is what "due at 17:00" means to a person) and shown back as
written; a due time with an offset is stored in UTC. Completing a recurring task completes this
occurrence only (``caldav``'s "safe" mode), the next one stays pending.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Annotated, Any, Protocol
from uuid import uuid4

from pydantic import Field

from assistant.tools.base import Capability, CapabilityDeps, ToolContext, ToolError, pick_backend, tool
from assistant.tools.dav import CalDAVCollection, iso, parse_when, shorten


@dataclass(frozen=True)
class Task:
    id: str
    title: str
    due: date | datetime | None = None
    status: str = "needs-action"  # RFC 5545 STATUS in lower case: needs-action, in-process, completed, cancelled
    priority: int | None = None  # 1 (highest) .. 9; None = undefined
    description: str | None = None

    @property
    def done(self) -> bool:
        return self.status in ("completed", "cancelled")


class TaskProvider(Protocol):
    def tasks(self, include_completed: bool) -> list[Task]: ...

    def create_task(self, task: Task) -> Task: ...

    def complete_task(self, task_id: str) -> Task | None:
        """The completed task; None when there is no task with that id."""
        ...


# --- the tools -------------------------------------------------------------------------------------


def _provider(ctx: ToolContext) -> TaskProvider:
    return ctx.backend("tasks")


def _task_dict(task: Task) -> dict[str, Any]:
    return {"id": task.id, "title": task.title, "due": iso(task.due), "status": task.status,
            "priority": task.priority}


def _sort_key(task: Task) -> tuple:
    due = task.due
    if isinstance(due, datetime) and due.tzinfo is not None:
        due = due.astimezone(UTC).replace(tzinfo=None)
    elif isinstance(due, date) and not isinstance(due, datetime):
        due = datetime(due.year, due.month, due.day)
    return (task.done, due is None, due or datetime.min, task.priority or 10, task.title.lower())


@tool("tasks", icon="✅", produces=("id",))
def list_tasks(
    ctx: ToolContext,
    include_completed: Annotated[bool, Field(description="Also list completed tasks.")] = False,
) -> list[dict]:
    """List the user's tasks (to-dos): pending first, by due date then priority."""
    found = _provider(ctx).tasks(include_completed)
    if not include_completed:
        found = [t for t in found if not t.done]
    return [_task_dict(t) for t in sorted(found, key=_sort_key)]


@tool("tasks", icon="📝", produces=("id",))
def create_task(
    ctx: ToolContext,
    title: Annotated[str, Field(min_length=1, max_length=500, description="What is to be done.")],
    due: Annotated[str | None, Field(description="ISO 8601 date (2024-05-01) or date-time (2024-05-01T17:00).")]
    = None,
    description: Annotated[str | None, Field(max_length=5000, description="Notes.")] = None,
    priority: Annotated[int | None, Field(ge=1, le=9, description="1 (highest) to 9 (lowest).")] = None,
) -> dict:
    """Add a task (to-do) to the user's task list."""
    if not title.strip():
        raise ToolError("title: give the task a title")
    when = None if due is None else parse_when(due, "due", None)
    if isinstance(when, datetime) and when.tzinfo is not None:
        when = when.astimezone(UTC)
    task = Task(str(uuid4()), title.strip(), when, "needs-action", priority, description or None)
    return _task_dict(_provider(ctx).create_task(task))


@tool("tasks", icon="☑️", requires=(("task_id", "list_tasks"), ("task_id", "create_task")))
def complete_task(
    ctx: ToolContext,
    task_id: Annotated[str, Field(min_length=1, max_length=500, description="The task's id, from list_tasks.")],
) -> dict:
    """Mark a task as done."""
    task = _provider(ctx).complete_task(task_id.strip())
    if task is None:
        raise ToolError(f"no task with id {task_id!r} (list_tasks shows the ids)")
    return _task_dict(task)


TASK_TOOLS = (list_tasks, create_task, complete_task)


# --- the CalDAV backend ----------------------------------------------------------------------------


def _component_to_task(component: Any) -> Task:
    status = str(component.get("STATUS", "")).lower()
    if not status:
        status = "completed" if "COMPLETED" in component else "needs-action"
    due = component.decoded("DUE") if "DUE" in component else None
    priority = int(component.get("PRIORITY", 0) or 0) or None
    description = shorten(str(component["DESCRIPTION"]), 500) if "DESCRIPTION" in component else None
    return Task(str(component.get("UID", "")), str(component.get("SUMMARY", "")) or "(no title)", due, status,
                priority, description)


def _task_to_ical(task: Task) -> str:
    import icalendar

    todo = icalendar.Todo()
    todo.add("UID", task.id)
    now = datetime.now(UTC)
    todo.add("DTSTAMP", now)
    todo.add("CREATED", now)
    todo.add("SUMMARY", task.title)
    todo.add("STATUS", task.status.upper())
    if task.due is not None:
        todo.add("DUE", task.due)
    if task.priority is not None:
        todo.add("PRIORITY", task.priority)
    if task.description:
        todo.add("DESCRIPTION", task.description)
    vcalendar = icalendar.Calendar()
    vcalendar.add("PRODID", "-//assistant//tasks tool//EN")
    vcalendar.add("VERSION", "2.0")
    vcalendar.add_component(todo)
    return vcalendar.to_ical().decode()


class CalDAVTasks:
    """VTODOs of a CalDAV calendar: ``task_list`` by display name, or the first accepting VTODO."""

    def __init__(self, section: Any):
        self.collection = CalDAVCollection(section, service="tasks", name=section.task_list, component="VTODO")

    def tasks(self, include_completed: bool) -> list[Task]:
        with self.collection.session() as calendar:
            found = calendar.search(todo=True, include_completed=include_completed)
            return [_component_to_task(item.icalendar_component) for item in found]

    def create_task(self, task: Task) -> Task:
        with self.collection.session() as calendar:
            calendar.add_todo(ical=_task_to_ical(task), no_overwrite=True)
        return task

    def complete_task(self, task_id: str) -> Task | None:
        from caldav.lib.error import NotFoundError

        with self.collection.session() as calendar:
            try:
                todo = calendar.get_todo_by_uid(task_id)
            except NotFoundError:
                return None
            task = _component_to_task(todo.icalendar_component)
            if task.done:
                return task
            todo.complete(handle_rrule=True)
        return replace(task, status="completed")

    def close(self) -> None:
        self.collection.close()


BACKENDS = {"caldav": CalDAVTasks}


def _create(deps: CapabilityDeps) -> TaskProvider:
    section = deps.settings.tasks
    return pick_backend("tasks", BACKENDS, section.backend)(section)


CAPABILITY = Capability(
    "tasks", TASK_TOOLS, configured=lambda settings: bool(settings.tasks.url), create=_create,
    description="the user's task list (CalDAV VTODO)",
)
