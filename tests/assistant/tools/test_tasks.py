"""The task tools over a fake TaskProvider: ordering, due dates, priorities, unknown ids; the
VTODO conversion of the CalDAV backend."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone

import icalendar
import pytest

from assistant.tools import tasks
from assistant.tools.base import CapabilityDeps, ToolContext, ToolError
from assistant.tools.tasks import (
    CalDAVTasks,
    Task,
    _component_to_task,
    _task_to_ical,
    complete_task,
    create_task,
    list_tasks,
)


class FakeTasks:
    """A TaskProvider over a dict; returns completed tasks too, as some servers do."""

    def __init__(self, *items: Task):
        self.items = {t.id: t for t in items}

    def tasks(self, include_completed: bool) -> list[Task]:
        return list(self.items.values())

    def create_task(self, task: Task) -> Task:
        self.items[task.id] = task
        return task

    def complete_task(self, task_id: str) -> Task | None:
        if task_id not in self.items:
            return None
        self.items[task_id] = replace(self.items[task_id], status="completed")
        return self.items[task_id]


def _ctx(fake: FakeTasks) -> ToolContext:
    return ToolContext("u1", {"tasks": fake})


def test_pending_tasks_come_first_by_due_date_then_priority() -> None:
    fake = FakeTasks(
        Task("someday", "Learn the cello"),
        Task("done", "Old chore", date(2020, 1, 1), "completed"),
        Task("later", "File taxes", date(2024, 5, 31), priority=5),
        Task("urgent", "Pay rent", date(2024, 5, 31), priority=1),
        Task("utc", "Call bank", datetime(2024, 5, 2, 7, 0, tzinfo=UTC)),
        Task("floating", "Water plants", datetime(2024, 5, 2, 6, 0)),
        Task("cancelled", "Party", date(2024, 5, 1), "cancelled"),
    )
    assert [t["id"] for t in list_tasks(_ctx(fake), {})] == ["floating", "utc", "urgent", "later", "someday"]
    everything = list_tasks(_ctx(fake), {"include_completed": True})
    assert [t["id"] for t in everything][-2:] == ["done", "cancelled"]
    assert everything[0] == {"id": "floating", "title": "Water plants", "due": "2024-05-02T06:00:00",
                             "status": "needs-action", "priority": None}


def test_created_tasks_keep_dates_floating_times_and_utc() -> None:
    fake = FakeTasks()
    made = create_task(_ctx(fake), {"title": " File taxes ", "due": "2024-05-31", "priority": 1,
                                    "description": "Receipts"})
    assert made == {"id": made["id"], "title": "File taxes", "due": "2024-05-31", "status": "needs-action",
                    "priority": 1}
    assert fake.items[made["id"]].description == "Receipts"
    floating = create_task(_ctx(fake), {"title": "Plants", "due": "2024-05-02T18:00"})
    assert fake.items[floating["id"]].due == datetime(2024, 5, 2, 18, 0)  # no zone: floating
    aware = create_task(_ctx(fake), {"title": "Call", "due": "2024-05-02T18:00:00+02:00"})
    assert fake.items[aware["id"]].due == datetime(2024, 5, 2, 16, 0, tzinfo=UTC)
    bare = create_task(_ctx(fake), {"title": "Someday"})
    assert (bare["due"], bare["priority"]) == (None, None)


@pytest.mark.parametrize(("arguments", "message"), [
    ({"title": "x", "priority": 0}, "invalid arguments for create_task: priority"),
    ({"title": "x", "priority": 10}, "invalid arguments for create_task: priority"),
    ({"title": ""}, "invalid arguments for create_task: title"),
    ({"title": "   "}, "title: give the task a title"),
    ({"title": "x", "due": "end of May"}, "due: 'end of May' is not an ISO 8601 date"),
])
def test_bad_task_arguments_are_tool_errors(arguments: dict, message: str) -> None:
    fake = FakeTasks()
    with pytest.raises(ToolError, match=message):
        create_task(_ctx(fake), arguments)
    assert fake.items == {}


def test_completing_a_task_and_an_unknown_id() -> None:
    fake = FakeTasks(Task("t1", "Pay rent"))
    assert complete_task(_ctx(fake), {"task_id": " t1 "})["status"] == "completed"
    assert list_tasks(_ctx(fake), {}) == []
    with pytest.raises(ToolError, match="no task with id 'Pay rent'"):
        complete_task(_ctx(fake), {"task_id": "Pay rent"})


def test_a_task_round_trips_through_a_vtodo() -> None:
    task = Task("t-1", "File taxes", date(2024, 5, 31), "needs-action", 1, "Receipts")
    text = _task_to_ical(task)
    assert "DUE;VALUE=DATE:20240531" in text and "PRIORITY:1" in text and "STATUS:NEEDS-ACTION" in text
    vtodo, = icalendar.Calendar.from_ical(text).walk("VTODO")
    assert _component_to_task(vtodo) == task
    floating = _task_to_ical(Task("t-2", "Plants", datetime(2024, 5, 2, 18, 0)))
    assert "DUE:20240502T180000\r\n" in floating


def test_vtodo_status_and_priority_defaults() -> None:
    def parse(lines: str) -> Task:
        return _component_to_task(icalendar.Todo.from_ical(f"BEGIN:VTODO\r\nUID:x\r\n{lines}END:VTODO\r\n"))

    assert parse("") == Task("x", "(no title)")
    assert parse("COMPLETED:20240101T000000Z\r\n").status == "completed"
    assert parse("STATUS:IN-PROCESS\r\nPRIORITY:0\r\n") == Task("x", "(no title)", status="in-process")
    due = parse("DUE:20240502T180000Z\r\n").due
    assert due == datetime(2024, 5, 2, 18, 0, tzinfo=timezone(timedelta(0)))


def test_the_capability_is_configured_by_url_and_lazy(make_settings) -> None:
    assert not tasks.CAPABILITY.configured(make_settings())
    settings = make_settings(tasks={"url": "http://127.0.0.1:9/", "task_list": "Chores"})
    backend = tasks.CAPABILITY.create(CapabilityDeps(settings))
    assert isinstance(backend, CalDAVTasks) and backend.collection.name == "Chores"
    backend.close()


def test_completing_needs_an_id_a_listing_or_creation_returned() -> None:
    import json

    from assistant.chat.prerequisites import Dependency, dependencies, missing
    from assistant.llm.base import ChatMessage, ToolCall

    deps = dependencies([list_tasks.spec, create_task.spec, complete_task.spec])
    assert deps == [Dependency("complete_task", "task_id", "list_tasks", others=("create_task",), field="id")]
    fake = FakeTasks(Task("3f2a-rent", "Pay rent"))
    listed = ChatMessage("tool", json.dumps(list_tasks(_ctx(fake), {})), name="list_tasks")
    assert missing(ToolCall("c", "complete_task", {"task_id": "3f2a-rent"}), deps, [listed]) is None
    assert missing(ToolCall("c", "complete_task", {"task_id": "Pay rent"}), deps, [listed]) == deps[0]
    created = create_task(_ctx(fake), {"title": "Buy milk"})
    made = ChatMessage("tool", json.dumps(created), name="create_task")
    assert missing(ToolCall("c", "complete_task", {"task_id": created["id"]}), deps, [made]) is None
