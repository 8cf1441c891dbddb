"""Agentic tasks with a model fake that answers by reading the messages: plans, concurrency bound,
timeouts, cancel, approval, late subscribers, restart recovery, sealing and ownership."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

from assistant.agents.profiles import ProfileDraft, ProfileStore
from assistant.agents.task_store import SubAgentStatus, TaskEvent, TaskEventType, TaskStatus, TaskStore
from assistant.agents.tasks import INTERRUPTED, SUB_AGENT_PROMPT, AgenticService
from assistant.config import AgenticSettings, InferenceSettings, ToolCallingSettings
from assistant.crypto import Sealer
from assistant.errors import ConflictError, NotFoundError, ServiceUnavailableError, UpstreamError, ValidationFailed
from assistant.llm.base import ChatMessage, GenerationOptions
from assistant.llm.queue import InferenceQueue
from assistant.storage.db import Database
from assistant.tools.base import ToolContext, ToolRegistry, tool
from assistant.tools.catalog import Toolbox
from assistant.tools.selection import ToolSelector
from tests.assistant.agents.agentic_fakes import AgentModel, Meter, Step, toolbox_with

USER = "11111111-1111-1111-1111-111111111111"
OTHER = "22222222-2222-2222-2222-222222222222"
KEY = bytes(range(32))


def plan(*descriptions: str, **extra: Any) -> dict[str, Any]:
    return {"summary": "split in parts", "sub_tasks": [{"description": d, **extra} for d in descriptions]}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "agentic.db")
    yield database
    database.close()


@pytest.fixture
def make(db: Database) -> Iterator[Callable[..., AgenticService]]:
    """``make(model, toolbox=None, **agentic_settings)``: a service on the real database, sealed."""
    queues: list[InferenceQueue] = []

    def build(model: AgentModel, toolbox: Any = None, profiles: Any = None, **agentic: Any) -> AgenticService:
        queue = InferenceQueue(model)
        queues.append(queue)
        return AgenticService(AgenticSettings(**agentic), TaskStore(db, Sealer(KEY)), queue, toolbox=toolbox,
                              tool_settings=ToolCallingSettings(), inference=InferenceSettings(max_tokens=64),
                              profiles=profiles)

    yield build
    for queue in queues:
        queue.close()


def run(coro: Coroutine[Any, Any, Any], meter: Meter | None = None) -> Any:
    """Run a scenario; the generous bound only turns a hang into a failure. ``meter``'s blocked
    tools are released when the scenario ends (before the loop waits for their threads)."""
    async def bounded() -> Any:
        try:
            async with asyncio.timeout(60):
                return await coro
        finally:
            if meter is not None:
                meter.release.set()
    return asyncio.run(bounded())


async def until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def names(events: list[TaskEvent]) -> list[str]:
    return [e.type.value for e in events]


def max_running(events: list[TaskEvent]) -> int:
    """The most sub-agents between their start and end events at any point of the log."""
    running = peak = 0
    for e in events:
        if e.type is TaskEventType.SUB_AGENT_STARTED:
            running += 1
            peak = max(peak, running)
        elif e.type in (TaskEventType.SUB_AGENT_COMPLETED, TaskEventType.SUB_AGENT_FAILED):
            running -= 1
    return peak


# --- a whole run -----------------------------------------------------------------------------------


def test_a_task_is_planned_run_and_synthesised(make) -> None:
    model = AgentModel(plan=plan("find the flights", "find the hotels"))
    service = make(model)

    async def scenario():
        created = await service.create(USER, "Plan a trip to Rome")
        assert created.status is TaskStatus.PLANNING
        return created, await service.wait(created.id)

    _created, task = run(scenario())
    assert task.status is TaskStatus.COMPLETED
    assert task.result == "SYNTHESIS"
    assert task.plan_summary == "split in parts"
    assert [(s.description, s.status, s.result) for s in task.sub_agents] == [
        ("find the flights", SubAgentStatus.COMPLETED, "result of find the flights"),
        ("find the hotels", SubAgentStatus.COMPLETED, "result of find the hotels"),
    ]
    assert task.finished_at is not None and task.error is None
    events = service.store.events(task.id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert names(events)[:2] == ["task_started", "plan_created"]
    assert names(events)[-1] == "task_completed"
    assert sorted(names(events)[2:-1]) == ["sub_agent_completed"] * 2 + ["sub_agent_started"] * 2
    assert events[0].data == {"task_id": task.id, "description": "Plan a trip to Rome"}
    sub_tasks = events[1].data["sub_tasks"]
    assert [s["id"] for s in sub_tasks] == [s.id for s in task.sub_agents]
    assert events[1].data["fallback"] is False
    assert events[-1].data == {"task_id": task.id, "result": "SYNTHESIS"}
    completed = {e.data["sub_agent_id"]: e.data["result"] for e in events if e.type.value == "sub_agent_completed"}
    assert completed == {s.id: s.result for s in task.sub_agents}
    # the synthesis saw both results; each sub-agent saw the overall task and its own sub-task
    assert [k for k, _ in model.calls].count("synthesis") == 1
    synthesis = next(p for p, (k, _) in zip(model.prompts, model.calls, strict=True) if k == "synthesis")
    assert "result of find the flights" in synthesis[1].content and "result of find the hotels" in synthesis[1].content
    agent = next(p for p, (k, _) in zip(model.prompts, model.calls, strict=True) if k == "sub_agent")
    # (the tool loop puts "Current date and time" after the system prompt)
    told = [m.content for m in agent if not m.content.startswith("Current date and time:")]
    assert told[0] == SUB_AGENT_PROMPT and "Plan a trip to Rome" in told[1]


def test_one_sub_agent_is_the_result_without_a_synthesis_call(make) -> None:
    model = AgentModel(plan=plan("say hello"))
    service = make(model)
    task = run(service.run(USER, "Say hello"))
    assert task.status is TaskStatus.COMPLETED and task.result == "result of say hello"
    assert [k for k, _ in model.calls] == ["plan", "sub_agent"]


def test_an_unusable_plan_falls_back_to_the_whole_description(make) -> None:
    model = AgentModel(plan="Sure! I will do that right away.")
    service = make(model)
    task = run(service.run(USER, "Summarise my week"))
    assert task.status is TaskStatus.COMPLETED
    assert [s.description for s in task.sub_agents] == ["Summarise my week"]
    assert task.result == "result of Summarise my week"
    created = service.store.events(task.id)[1]
    assert created.type is TaskEventType.PLAN_CREATED and created.data["fallback"] is True
    assert "unusable" in task.plan_summary


def test_the_plan_is_cut_to_max_sub_agents_per_task(make) -> None:
    service = make(AgentModel(plan=plan("a", "b", "c", "d")), max_sub_agents_per_task=2)
    task = run(service.run(USER, "Four things"))
    assert [s.description for s in task.sub_agents] == ["a", "b"]


def test_the_synthesis_failing_joins_the_results(make) -> None:
    service = make(AgentModel(plan=plan("first part", "second part"), synthesis=UpstreamError("engine down")))
    task = run(service.run(USER, "Two parts"))
    assert task.status is TaskStatus.COMPLETED
    assert "first part" in task.result and "result of first part" in task.result
    assert task.result.index("result of first part") < task.result.index("result of second part")


def test_no_sub_agent_completing_fails_the_task(make) -> None:
    service = make(AgentModel(plan=plan("doomed"), scripts={"doomed": [Step(error=UpstreamError("engine broke"))]}))
    task = run(service.run(USER, "Doomed"))
    assert task.status is TaskStatus.FAILED
    assert "no sub-agent completed" in task.error and "engine broke" in task.error
    assert task.sub_agents[0].status is SubAgentStatus.FAILED
    events = service.store.events(task.id)
    assert names(events)[-2:] == ["sub_agent_failed", "task_failed"]
    assert events[-2].data["status"] == "failed" and "engine broke" in events[-2].data["error"]
    assert events[-1].data == {"task_id": task.id, "error": task.error}


# --- concurrency and timeouts ------------------------------------------------------------------------


def test_at_most_max_concurrent_sub_agents_run_at_once(make) -> None:
    meter = Meter(target=2, wait_secs=10)  # four parts in two pairs: no probe waits alone
    parts = [f"part {n}" for n in range(4)]
    model = AgentModel(plan=plan(*parts), scripts={p: [Step(call=("probe", {})), Step(text=f"done {p}")]
                                                   for p in parts})
    service = make(model, toolbox_with(meter), max_concurrent_sub_agents=2, max_sub_agents_per_task=4)
    task = run(service.run(USER, "Four parts"))
    assert task.status is TaskStatus.COMPLETED
    assert meter.entries == 4
    assert meter.max_inside == 2  # two tools overlapped, never three
    assert max_running(service.store.events(task.id)) == 2
    assert [s.result for s in task.sub_agents] == [f"done {p}" for p in parts]


def test_a_sub_agent_past_its_timeout_is_timed_out_and_the_others_finish(make) -> None:
    meter = Meter()
    model = AgentModel(plan=plan("slow", "fast"), scripts={"slow": [Step(call=("block", {}))]})
    service = make(model, toolbox_with(meter), sub_agent_timeout_minutes=0.02)
    task = run(service.run(USER, "One slow, one fast"), meter)
    assert task.status is TaskStatus.COMPLETED
    slow, fast = task.sub_agents
    assert slow.status is SubAgentStatus.TIMED_OUT and "timeout" in slow.error
    assert fast.status is SubAgentStatus.COMPLETED
    failed = [e for e in service.store.events(task.id) if e.type is TaskEventType.SUB_AGENT_FAILED]
    assert [(e.data["sub_agent_id"], e.data["status"]) for e in failed] == [(slow.id, "timed_out")]


def test_the_total_timeout_ends_the_task_and_cancels_its_sub_agents(make) -> None:
    meter = Meter()
    model = AgentModel(plan=plan("a", "b", "c"), scripts={k: [Step(call=("block", {}))] for k in "abc"})
    service = make(model, toolbox_with(meter), total_timeout_minutes=0.02, max_concurrent_sub_agents=2)
    task = run(service.run(USER, "Never ends"), meter)
    assert task.status is TaskStatus.TIMED_OUT
    assert "total timeout" in task.error
    assert [s.status for s in task.sub_agents] == [SubAgentStatus.CANCELLED] * 3
    last = service.store.events(task.id)[-1]
    assert last.type is TaskEventType.TASK_TIMED_OUT
    assert last.data["cancelled_sub_agents"] == [s.id for s in task.sub_agents]


# --- cancel ------------------------------------------------------------------------------------------


def test_cancel_mid_run_stops_every_sub_agent(make) -> None:
    meter = Meter()
    model = AgentModel(plan=plan("a", "b", "c"), scripts={k: [Step(call=("block", {}))] for k in "abc"})
    service = make(model, toolbox_with(meter), max_concurrent_sub_agents=2)

    async def scenario():
        created = await service.create(USER, "Three blocked parts")
        await until(lambda: meter.inside == 2)
        cancelled = await service.cancel(USER, created.id)
        with pytest.raises(ConflictError) as again:
            await service.cancel(USER, created.id)
        return cancelled, again.value

    task, again = run(scenario(), meter)
    assert task.status is TaskStatus.CANCELLED
    assert [s.status for s in task.sub_agents] == [SubAgentStatus.CANCELLED] * 3  # 2 running, 1 pending
    assert again.details == {"status": "cancelled"} and "already ended" in again.message
    events = service.store.events(task.id)
    assert names(events).count("sub_agent_started") == 2
    assert events[-1].type is TaskEventType.TASK_CANCELLED
    assert events[-1].data == {"task_id": task.id, "cancelled_sub_agents": [s.id for s in task.sub_agents]}
    assert service.store.get(task.id).finished_at is not None


def test_cancel_stops_generation_between_tokens_and_frees_the_queue(make) -> None:
    model = AgentModel(plan=plan("think long"), scripts={"think long": [Step(text="never", delay_secs=120)]})
    service = make(model)

    async def scenario():
        created = await service.create(USER, "Long thought")
        await until(lambda: ("sub_agent", "think long") in model.calls)
        task = await service.cancel(USER, created.id)
        # the engine is free again at once: the next generation does not wait for the long one
        async with asyncio.timeout(20):
            reply = await service.queue.complete([ChatMessage("system", "x"), ChatMessage("user",
                                   "Your sub-task: next")], GenerationOptions())
        return task, reply

    task, reply = run(scenario())
    assert task.status is TaskStatus.CANCELLED
    assert task.sub_agents[0].status is SubAgentStatus.CANCELLED
    assert reply.content == "result of next"


def test_cancelling_a_finished_task_is_a_conflict(make) -> None:
    service = make(AgentModel(plan=plan("quick")))

    async def scenario():
        task = await service.run(USER, "Quick")
        with pytest.raises(ConflictError) as err:
            await service.cancel(USER, task.id)
        return err.value

    err = run(scenario())
    assert err.details == {"status": "completed"}


# --- approval ----------------------------------------------------------------------------------------


def test_require_approval_holds_the_plan_until_approved(make) -> None:
    model = AgentModel(plan=plan("step one", "step two"))
    service = make(model)

    async def scenario():
        created = await service.create(USER, "Careful work", require_approval=True)
        held = await service.wait(created.id)
        calls_while_held = list(model.calls)
        approved = await service.approve(USER, created.id)
        with pytest.raises(ConflictError):
            await service.approve(USER, created.id)
        return held, calls_while_held, approved, await service.wait(created.id)

    held, calls_while_held, approved, done = run(scenario())
    assert held.status is TaskStatus.AWAITING_APPROVAL
    assert [s.status for s in held.sub_agents] == [SubAgentStatus.PENDING] * 2
    assert calls_while_held == [("plan", "")]  # nothing ran before the approval
    assert approved.status is TaskStatus.RUNNING
    assert done.status is TaskStatus.COMPLETED and done.result == "SYNTHESIS"
    events = names(service.store.events(done.id))
    assert events[:4] == ["task_started", "plan_created", "approval_required", "plan_approved"]
    assert events[-1] == "task_completed"


def test_approving_a_task_that_needs_no_approval_is_a_conflict(make) -> None:
    service = make(AgentModel(plan=plan("x")))

    async def scenario():
        task = await service.run(USER, "No approval")
        with pytest.raises(ConflictError) as err:
            await service.approve(USER, task.id)
        return err.value

    assert "only a task awaiting approval" in run(scenario()).message


def test_cancelling_a_held_plan(make) -> None:
    service = make(AgentModel(plan=plan("x", "y")))

    async def scenario():
        created = await service.create(USER, "Held", require_approval=True)
        await service.wait(created.id)
        return await service.cancel(USER, created.id)

    task = run(scenario())
    assert task.status is TaskStatus.CANCELLED
    assert [s.status for s in task.sub_agents] == [SubAgentStatus.CANCELLED] * 2
    assert names(service.store.events(task.id))[-1] == "task_cancelled"


# --- subscribers ------------------------------------------------------------------------------------


def test_a_late_subscriber_receives_the_history_then_the_end(make) -> None:
    service = make(AgentModel(plan=plan("a", "b")))

    async def scenario():
        task = await service.run(USER, "Done already")
        return task, [e async for e in service.subscribe(USER, task.id)]

    task, received = run(scenario())
    assert [e.seq for e in received] == [e.seq for e in service.store.events(task.id)]
    assert received[-1].type is TaskEventType.TASK_COMPLETED


def test_a_subscriber_mid_run_gets_history_then_live_events_without_gaps(make) -> None:
    meter = Meter()
    model = AgentModel(plan=plan("a", "b"), scripts={"a": [Step(call=("block", {})), Step(text="A")]})
    service = make(model, toolbox_with(meter))

    async def scenario():
        created = await service.create(USER, "Half done")
        await until(lambda: meter.inside == 1)
        stream = service.subscribe(USER, created.id)
        first = await anext(stream)  # history is read now, while "a" is blocked
        meter.release.set()
        rest = [e async for e in stream]
        return created, [first, *rest]

    task, received = run(scenario(), meter)
    stored = service.store.events(task.id)
    assert [e.seq for e in received] == [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert received[-1].type is TaskEventType.TASK_COMPLETED


def test_resuming_after_an_event_id(make) -> None:
    service = make(AgentModel(plan=plan("a")))

    async def scenario():
        task = await service.run(USER, "Resume")
        return [e.seq async for e in service.subscribe(USER, task.id, after=2)], task

    seqs, task = run(scenario())
    assert seqs == [e.seq for e in service.store.events(task.id)][2:]


def test_a_held_plan_keeps_its_stream_open_until_approved(make) -> None:
    service = make(AgentModel(plan=plan("a")))

    async def scenario():
        created = await service.create(USER, "Wait for me", require_approval=True)
        await service.wait(created.id)
        received: list[str] = []

        async def follow():
            async for event in service.subscribe(USER, created.id):
                received.append(event.type.value)

        follower = asyncio.create_task(follow())
        await until(lambda: "approval_required" in received)
        assert not follower.done()
        await service.approve(USER, created.id)
        await follower
        return received

    received = run(scenario())
    assert received[-3:] == ["sub_agent_started", "sub_agent_completed", "task_completed"]
    assert "plan_approved" in received


# --- restart, ownership, validation, sealing, profiles --------------------------------------------------


def test_restart_marks_unfinished_tasks_failed_and_keeps_held_plans(make_settings, make_services) -> None:
    settings = make_settings()
    first = make_services(settings, AgentModel(plan=plan("x")))
    store = first.agentic.store
    running = store.create(USER, "was running", False)
    store.save_plan(running.id, "one part", [])
    store.transition(running.id, TaskStatus.RUNNING)
    store.create(USER, "was planning", False)
    held = store.create(USER, "was held", True)
    store.transition(held.id, TaskStatus.AWAITING_APPROVAL)
    finished = store.create(USER, "was done", False)
    store.transition(finished.id, TaskStatus.COMPLETED, result="ok")
    first.close()

    second = make_services(settings, AgentModel(plan=plan("x")))
    tasks = {t.description: t for t in second.agentic.list(USER)}
    for description in ("was running", "was planning"):
        assert tasks[description].status is TaskStatus.FAILED
        assert tasks[description].error == INTERRUPTED
        last = second.agentic.store.events(tasks[description].id)[-1]
        assert last.type is TaskEventType.TASK_FAILED and last.data["error"] == INTERRUPTED
    assert tasks["was held"].status is TaskStatus.AWAITING_APPROVAL
    assert tasks["was done"].status is TaskStatus.COMPLETED and tasks["was done"].result == "ok"


def test_a_stopping_event_loop_marks_a_running_task_interrupted(make) -> None:
    model = AgentModel(plan=plan("a"), scripts={"a": [Step(text="never", delay_secs=120)]})
    service = make(model)

    async def scenario():
        created = await service.create(USER, "Cut short")
        await until(lambda: ("sub_agent", "a") in model.calls)
        return created  # asyncio.run then cancels the run, as a server shutdown does

    created = run(scenario())
    task = service.store.get(created.id)
    assert task.status is TaskStatus.FAILED and task.error == INTERRUPTED
    assert task.sub_agents[0].status is SubAgentStatus.FAILED
    assert names(service.store.events(task.id))[-1] == "task_failed"


def test_another_users_task_is_not_found(make) -> None:
    service = make(AgentModel(plan=plan("a")))

    async def scenario():
        task = await service.run(USER, "Mine")
        for call in (lambda: service.get(OTHER, task.id), lambda: service.subscribe(OTHER, task.id)):
            with pytest.raises(NotFoundError):
                call()
        for action in (service.cancel, service.approve):
            with pytest.raises(NotFoundError):
                await action(OTHER, task.id)
        return service.list(OTHER), service.list(USER)

    theirs, mine = run(scenario())
    assert theirs == [] and len(mine) == 1


def test_disabled_mode_refuses_everything(make) -> None:
    service = make(AgentModel(), enabled=False)
    with pytest.raises(ServiceUnavailableError, match=r"agentic mode is disabled \(\[agentic\] enabled = false\)"):
        run(service.create(USER, "No"))
    with pytest.raises(ServiceUnavailableError):
        service.get(USER, str(uuid4()))


@pytest.mark.parametrize("description", ["", "   ", "x" * 10_001])
def test_descriptions_are_validated(make, description: str) -> None:
    service = make(AgentModel())
    with pytest.raises(ValidationFailed) as err:
        run(service.create(USER, description))
    assert err.value.details["fields"][0]["field"] == "description"


def test_descriptions_plans_results_and_events_are_sealed_at_rest(make, db: Database) -> None:
    service = make(AgentModel(plan=plan("look up the SECRETPLAN")))
    task = run(service.run(USER, "Find SECRETWORD for me"))
    assert task.result == "result of look up the SECRETPLAN"
    for table in ("agentic_tasks", "agentic_sub_agents", "agentic_events"):
        for row in db.query(f"SELECT * FROM {table}"):
            for value in row.values():
                raw = value if isinstance(value, bytes) else str(value).encode()
                assert b"SECRET" not in raw, (table, row)


def test_a_sub_task_with_a_profile_uses_its_prompt(make, db: Database) -> None:
    profiles = ProfileStore(db, Sealer(KEY))
    profiles.create(USER, ProfileDraft(name="Researcher", role="finds sources",
                                       system_prompt_template="You are a meticulous researcher."))
    model = AgentModel(plan=plan("find sources", profile="researcher"))
    service = make(model, profiles=profiles)
    task = run(service.run(USER, "Research"))
    assert task.sub_agents[0].profile == "Researcher"
    planner_prompt = model.prompts[0][0].content
    assert "Researcher" in planner_prompt
    agent = next(p for p, (k, _) in zip(model.prompts, model.calls, strict=True) if k == "sub_agent")
    assert "You are a meticulous researcher." in agent[0].content


def test_with_a_selector_a_sub_agent_is_offered_only_the_tools_its_sub_task_is_about(db: Database) -> None:
    """As in chat ("auto" selection): a weather sub-task sees get_weather, a joke none."""
    @tool(capability="weather")
    def get_weather(ctx: ToolContext, location: str) -> str:
        """Current weather for a place."""
        return "mild"

    @tool(capability="web")
    def search_web(ctx: ToolContext, query: str) -> str:
        """Search the web."""
        return "found"

    seen: dict[str, list[str]] = {}

    class Recording(AgentModel):
        def stream(self, messages, options):  # noqa: ANN001, ANN202
            kind, key = self.kind_of(messages, options)
            if kind == "sub_agent":
                seen[key] = [t.name for t in options.tools]
            yield from super().stream(messages, options)

    model = Recording(plan=plan("check the weather in Paris", "tell a joke"))
    queue = InferenceQueue(model)
    service = AgenticService(AgenticSettings(), TaskStore(db, Sealer(KEY)), queue,
                             toolbox=Toolbox(ToolRegistry([get_weather, search_web])),
                             tool_settings=ToolCallingSettings(selection="auto"), inference=InferenceSettings(max_tokens=64),
                             selector=ToolSelector(None))
    try:
        task = run(service.run(USER, "Weather, then a joke"))
    finally:
        queue.close()
    assert task.status is TaskStatus.COMPLETED
    assert seen == {"check the weather in Paris": ["get_weather"], "tell a joke": []}
