"""Agentic tasks: a description is planned into sub-tasks that sub-agents run concurrently.

A task is a run object that emits typed events (:class:`TaskEventType`), kept per task in SQLite
so that a late subscriber first receives what already happened, then the live events.

States (task ``status``)::

    planning --plan made--> running --work finishes--> completed
    planning --plan made, require_approval--> awaiting_approval --approve--> running
    planning | awaiting_approval | running --cancel--> cancelled
    planning | running --total timeout--> timed_out
    planning | running --no sub-agent completed, or an unexpected error--> failed
    planning | running --server stopped or restarted--> failed ("interrupted by a server restart")

``awaiting_approval`` survives a restart (the plan is stored; it can still be approved or
cancelled). Sub-agents: ``pending --> running --> completed | failed | timed_out | cancelled``; a
sub-agent waits in ``pending`` for one of ``max_concurrent_sub_agents`` slots (an
``asyncio.Semaphore``), then runs the tool loop with the user's toolbox for at most
``sub_agent_timeout_minutes``. The inference queue runs one generation at a time, so concurrent
sub-agents interleave their model turns while their tool runs overlap.

The total timeout (``total_timeout_minutes``) covers planning and running; for a task that waited
for approval the clock starts again at the approval. When it passes, running and pending
sub-agents are cancelled and the task is ``timed_out``. A cancel stops every running sub-agent
(their asyncio tasks are cancelled; generation stops between tokens through the inference queue).

The result: with one sub-agent, its result; with several, one more model call that synthesises
their results; if that call fails (or returns nothing), their results joined in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from assistant.agents.planner import Plan, make_plan
from assistant.agents.task_store import (
    AgenticTask,
    SubAgent,
    SubAgentStatus,
    TaskEvent,
    TaskEventType,
    TaskStatus,
    TaskStore,
)
from assistant.chat.tool_loop import ToolLoop
from assistant.config import AgenticSettings, InferenceSettings, Settings, ToolCallingSettings
from assistant.crypto import Sealer
from assistant.defence.types import Detector, NoDefence
from assistant.defence.wrap import PromptGuard
from assistant.errors import ConflictError, ServiceUnavailableError, ValidationFailed
from assistant.llm.base import ChatMessage, GenerationOptions
from assistant.llm.queue import InferenceQueue
from assistant.storage.db import Database
from assistant.tools.base import ToolContext, ToolRegistry

log = logging.getLogger("assistant.agents")

MAX_DESCRIPTION_CHARS = 10_000
INTERRUPTED = "interrupted by a server restart"
DISABLED = "agentic mode is disabled ([agentic] enabled = false)"
SUB_AGENT_PROMPT = (
    "You are one of several agents working on a larger task. Do only your sub-task, using tools when they "
    "help, and reply with its result: concise and self-contained. Do not ask questions."
)
# Short on purpose: asked to "combine the work of several agents ... say what could not be done",
# Qwen 0.5B answered "Could not be done." over two good results; this wording gives
# "Paris: Mild rain, 12.4 °C … / Berlin: Overcast, 7.4 °C …" on the same input.
SYNTHESIS_PROMPT = "Answer the user's task using the results below. Be brief."


class ProfileSource(Protocol):
    """What the tasks need of the agent profiles (``assistant.agents.profiles.ProfileStore``)."""

    def list(self, user_id: UUID | str, limit: int = 100, offset: int = 0) -> list[Any]: ...

    def by_name(self, user_id: UUID | str, name: str) -> Any: ...


@dataclass
class _Run:
    task: asyncio.Task[None]
    cancel_requested: bool = False


class AgenticService:
    def __init__(
        self,
        settings: AgenticSettings,
        store: TaskStore,
        queue: InferenceQueue,
        *,
        toolbox: Any = None,  # assistant.tools.catalog.Toolbox
        tool_settings: ToolCallingSettings | None = None,
        inference: InferenceSettings | None = None,
        profiles: ProfileSource | None = None,
        planner_max_tokens: int = 512,
        selector: Any = None,  # assistant.tools.selection.ToolSelector: tools a sub-task is about
    ):
        self.settings = settings
        self.store = store
        self.queue = queue
        self.toolbox = toolbox
        self.tool_settings = tool_settings or ToolCallingSettings()
        self.inference = inference or InferenceSettings()
        self.profiles = profiles
        self.planner_max_tokens = planner_max_tokens
        self.selector = selector
        self.defence: Detector = NoDefence()  # sub-agents' tool results are fenced as data (build_services)
        self._runs: dict[str, _Run] = {}
        self._subscribers: dict[str, set[asyncio.Queue[TaskEvent]]] = {}

    # --- the public operations --------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def require_enabled(self) -> None:
        if not self.enabled:
            raise ServiceUnavailableError(DISABLED)

    async def create(self, user_id: UUID | str, description: str, require_approval: bool = False) -> AgenticTask:
        """Store the task (``planning``), emit ``task_started`` and start planning in the background."""
        self.require_enabled()
        if not isinstance(description, str) or not description.strip():
            raise ValidationFailed("description must not be blank", [{"field": "description",
                                                                      "error": "must not be blank"}])
        if len(description) > MAX_DESCRIPTION_CHARS:
            error = f"must be at most {MAX_DESCRIPTION_CHARS:,} characters (got {len(description):,})"
            raise ValidationFailed(f"description {error}", [{"field": "description", "error": error}])
        task = self.store.create(user_id, description, require_approval)
        self._emit(task.id, TaskEventType.TASK_STARTED, task_id=task.id, description=description)
        self._start(task.id, str(user_id), approved=False)
        return task

    def get(self, user_id: UUID | str, task_id: UUID | str) -> AgenticTask:
        self.require_enabled()
        return self.store.get(task_id, user_id)

    def list(self, user_id: UUID | str, limit: int = 100, offset: int = 0) -> list[AgenticTask]:
        self.require_enabled()
        return self.store.list(user_id, limit, offset)

    async def approve(self, user_id: UUID | str, task_id: UUID | str) -> AgenticTask:
        """Run a plan held for approval; ConflictError unless the task is ``awaiting_approval``."""
        self.require_enabled()
        task = self.store.get(task_id, user_id)
        if not self.store.transition(task.id, TaskStatus.RUNNING, only_from=(TaskStatus.AWAITING_APPROVAL,)):
            current = self.store.get(task.id).status
            raise ConflictError(f"agentic task {task.id} is {current.value}: only a task awaiting approval can be "
                                "approved", {"status": current.value})
        self._emit(task.id, TaskEventType.PLAN_APPROVED, task_id=task.id)
        self._start(task.id, str(user_id), approved=True)
        return self.store.get(task.id)

    async def cancel(self, user_id: UUID | str, task_id: UUID | str) -> AgenticTask:
        """Cancel the task and every running sub-agent, returning once they have stopped.
        ConflictError when the task has already ended (completed, failed, cancelled, timed_out)."""
        self.require_enabled()
        task = self.store.get(task_id, user_id)
        run = self._runs.get(task.id)
        if not task.status.final:
            if run is not None and not run.task.done():
                run.cancel_requested = True
                run.task.cancel()
                await asyncio.wait({run.task})
            else:  # no run here: a plan held for approval (or a task another process left)
                self._end(task.id, TaskStatus.CANCELLED, SubAgentStatus.CANCELLED, TaskEventType.TASK_CANCELLED)
            task = self.store.get(task.id)
            if task.status is TaskStatus.CANCELLED:
                return task
        raise ConflictError(f"agentic task {task.id} has already ended ({task.status.value}): only a task that is "
                            "planning, awaiting approval or running can be cancelled", {"status": task.status.value})

    async def wait(self, task_id: str) -> AgenticTask:
        """The task once its current run has ended (or now, if nothing runs here)."""
        run = self._runs.get(task_id)
        if run is not None:
            await asyncio.wait({run.task})
        return self.store.get(task_id)

    async def run(self, user_id: UUID | str, description: str) -> AgenticTask:
        """Create a task and wait for its end (for notebooks and scripts)."""
        task = await self.create(user_id, description)
        return await self.wait(task.id)

    def subscribe(self, user_id: UUID | str, task_id: UUID | str, after: int = 0) -> AsyncIterator[TaskEvent]:
        """The task's events after sequence number ``after``: first those already stored, then the
        live ones; the iterator ends after the final event (task_completed, task_failed,
        task_cancelled, task_timed_out). NotFoundError (another user's task too) is raised here,
        before any event."""
        self.require_enabled()
        task = self.store.get(task_id, user_id)
        return self._follow(task.id, after)

    def recover(self) -> list[str]:
        """At startup: tasks left planning or running by a stopped server are marked failed with
        the error "interrupted by a server restart" (and a ``task_failed`` event). Tasks awaiting
        approval keep waiting. Returns the ids marked."""
        marked = []
        for task_id in self.store.with_status((TaskStatus.PLANNING, TaskStatus.RUNNING)):
            if task_id not in self._runs and self._end(task_id, TaskStatus.FAILED, SubAgentStatus.FAILED,
                                                      TaskEventType.TASK_FAILED, error=INTERRUPTED):
                marked.append(task_id)
        if marked:
            log.warning("%d agentic task(s) were interrupted by a restart and marked failed", len(marked))
        return marked

    # --- events ------------------------------------------------------------------------------------

    def _emit(self, task_id: str, kind: TaskEventType, /, **data: Any) -> TaskEvent:
        event = self.store.append_event(task_id, kind, data)
        for queue in self._subscribers.get(task_id, ()):
            queue.put_nowait(event)
        return event

    async def _follow(self, task_id: str, after: int) -> AsyncIterator[TaskEvent]:
        queue: asyncio.Queue[TaskEvent] = asyncio.Queue()
        self._subscribers.setdefault(task_id, set()).add(queue)  # before reading history: nothing is missed
        try:
            last = after
            for event in self.store.events(task_id, after):
                yield event
                last = event.seq
                if event.type.final:
                    return
            while True:
                # Every event after the history read is in the queue; once it is drained, stop
                # unless something here can still add to it (a run, or a plan awaiting approval).
                if queue.empty() and task_id not in self._runs and \
                        self.store.get(task_id).status is not TaskStatus.AWAITING_APPROVAL:
                    return
                event = await queue.get()
                if event.seq <= last:
                    continue
                yield event
                last = event.seq
                if event.type.final:
                    return
        finally:
            subscribers = self._subscribers.get(task_id)
            if subscribers is not None:
                subscribers.discard(queue)
                if not subscribers:
                    del self._subscribers[task_id]

    # --- a run ---------------------------------------------------------------------------------------

    def _start(self, task_id: str, user_id: str, *, approved: bool) -> None:
        task = asyncio.create_task(self._drive(task_id, user_id, approved), name=f"agentic-task-{task_id}")
        run = self._runs[task_id] = _Run(task)  # also the strong reference that keeps the task alive

        def forget(_: asyncio.Task[None]) -> None:
            if self._runs.get(task_id) is run:
                del self._runs[task_id]

        task.add_done_callback(forget)

    def _end(self, task_id: str, status: TaskStatus, sub_status: SubAgentStatus, kind: TaskEventType, /,
             **data: Any) -> bool:
        """Move an active task to a final ``status``; its open sub-agents get ``sub_status``."""
        error = data.get("error")
        if not self.store.transition(task_id, status, error=error, result=data.get("result")):
            return False
        ended = self.store.end_open_sub_agents(task_id, sub_status, error if sub_status is not
                                               SubAgentStatus.CANCELLED else None)
        if kind in (TaskEventType.TASK_CANCELLED, TaskEventType.TASK_TIMED_OUT):
            data["cancelled_sub_agents"] = ended
        self._emit(task_id, kind, task_id=task_id, **data)
        return True

    async def _drive(self, task_id: str, user_id: str, approved: bool) -> None:
        scope = asyncio.timeout(self.settings.total_timeout_minutes * 60)
        try:
            async with scope:
                result = await self._work(task_id, user_id, approved)
        except asyncio.CancelledError:
            run = self._runs.get(task_id)
            if run is not None and run.cancel_requested:
                self._end(task_id, TaskStatus.CANCELLED, SubAgentStatus.CANCELLED, TaskEventType.TASK_CANCELLED)
                return
            try:  # the server is stopping: the task ends as interrupted, never silently lost
                self._end(task_id, TaskStatus.FAILED, SubAgentStatus.FAILED, TaskEventType.TASK_FAILED,
                          error=INTERRUPTED)
            except Exception:  # noqa: BLE001 - storage may already be closed; startup recovery marks it
                log.warning("could not mark agentic task %s interrupted", task_id)
            raise
        except TimeoutError as exc:
            if scope.expired():
                minutes = f"{self.settings.total_timeout_minutes:g}"
                self._end(task_id, TaskStatus.TIMED_OUT, SubAgentStatus.CANCELLED, TaskEventType.TASK_TIMED_OUT,
                          error=f"the task passed its total timeout of {minutes} minute(s)")
            else:
                self._fail(task_id, exc)
            return
        except Exception as exc:  # noqa: BLE001 - a run ends as failed, with the reason, never silently
            self._fail(task_id, exc)
            return
        if result is not None:
            self._end(task_id, TaskStatus.COMPLETED, SubAgentStatus.CANCELLED, TaskEventType.TASK_COMPLETED,
                      result=result)

    def _fail(self, task_id: str, exc: BaseException) -> None:
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        log.warning("agentic task %s failed: %s", task_id, message)
        self._end(task_id, TaskStatus.FAILED, SubAgentStatus.FAILED, TaskEventType.TASK_FAILED, error=message)

    async def _work(self, task_id: str, user_id: str, approved: bool) -> str | None:
        """Plan (unless approved already), then run the sub-agents and synthesise; None when the
        plan is held for approval."""
        task = self.store.get(task_id)
        if not approved:
            plan = await self._plan(user_id, task.description)
            subs = self.store.save_plan(task_id, plan.summary, plan.sub_tasks)
            sub_tasks = [{"id": s.id, **s.spec.as_dict()} for s in subs]
            self._emit(task_id, TaskEventType.PLAN_CREATED, task_id=task_id, sub_tasks=sub_tasks,
                       plan_summary=plan.summary, fallback=plan.fallback)
            if task.require_approval:
                if self.store.transition(task_id, TaskStatus.AWAITING_APPROVAL, only_from=(TaskStatus.PLANNING,)):
                    self._emit(task_id, TaskEventType.APPROVAL_REQUIRED, task_id=task_id, sub_tasks=sub_tasks)
                return None
            self.store.transition(task_id, TaskStatus.RUNNING, only_from=(TaskStatus.PLANNING,))
        subs = self.store.sub_agents(task_id)
        await self._run_sub_agents(task_id, user_id, task.description, subs)
        subs = self.store.sub_agents(task_id)
        done = [s for s in subs if s.status is SubAgentStatus.COMPLETED]
        if not done:
            reasons = "; ".join(f"{s.description[:60]!r}: {s.status.value}" + (f" ({s.error})" if s.error else "")
                                for s in subs)
            raise _NoResult(f"no sub-agent completed: {reasons}")
        if len(subs) == 1:
            return done[0].result or ""
        return await self._synthesise(task.description, subs)

    async def _plan(self, user_id: str, description: str) -> Plan:
        registry = self._registry()
        tools = [(t.name, t.spec.description) for t in registry.tools()] if self.tool_settings.enabled else []
        profile_names: list[str] = []
        if self.profiles is not None:
            profile_names = [p.name for p in self.profiles.list(user_id, 1000)]
        options = GenerationOptions(temperature=min(self.inference.temperature, 0.3),
                                    max_tokens=self.planner_max_tokens)
        return await make_plan(self.queue, description, max_sub_agents=self.settings.max_sub_agents_per_task,
                               tools=tools, profile_names=profile_names, options=options)

    def _registry(self) -> ToolRegistry:
        return self.toolbox.registry if self.toolbox is not None else ToolRegistry()

    def _context(self, user_id: str) -> ToolContext:
        return self.toolbox.context(user_id) if self.toolbox is not None else ToolContext(user_id)

    async def _run_sub_agents(self, task_id: str, user_id: str, overall: str, subs: list[SubAgent]) -> None:
        slots = asyncio.Semaphore(self.settings.max_concurrent_sub_agents)
        runs = [asyncio.create_task(self._sub_agent(slots, task_id, user_id, overall, s), name=f"sub-agent-{s.id}")
                for s in subs if s.status is SubAgentStatus.PENDING]
        try:
            await asyncio.gather(*runs)
        finally:  # cancelled or timed out: stop every sub-agent and wait until they have stopped
            for run in runs:
                run.cancel()
            await asyncio.gather(*runs, return_exceptions=True)

    async def _sub_agent(self, slots: asyncio.Semaphore, task_id: str, user_id: str, overall: str,
                         sub: SubAgent) -> None:
        async with slots:
            self.store.start_sub_agent(sub.id)
            self._emit(task_id, TaskEventType.SUB_AGENT_STARTED, sub_agent_id=sub.id, description=sub.description)
            seconds = self.settings.sub_agent_timeout_minutes * 60
            scope = asyncio.timeout(seconds)
            try:
                async with scope:
                    result = await self._sub_agent_loop(user_id, overall, sub, seconds)
            except TimeoutError as exc:
                status = SubAgentStatus.TIMED_OUT if scope.expired() else SubAgentStatus.FAILED
                error = (f"the sub-agent passed its timeout of {self.settings.sub_agent_timeout_minutes:g} minute(s)"
                         if scope.expired() else f"{type(exc).__name__}: {exc}")
                self._sub_agent_ended(task_id, sub, status, error)
                return
            except Exception as exc:  # noqa: BLE001 - one sub-agent's failure is the task's information
                self._sub_agent_ended(task_id, sub, SubAgentStatus.FAILED,
                                      getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}")
                return
            if result.finish_reason == "timeout":
                self._sub_agent_ended(task_id, sub, SubAgentStatus.TIMED_OUT, "the tool loop passed its timeout")
                return
            self.store.finish_sub_agent(sub.id, SubAgentStatus.COMPLETED, result=result.content)
            self._emit(task_id, TaskEventType.SUB_AGENT_COMPLETED, sub_agent_id=sub.id, result=result.content)

    def _sub_agent_ended(self, task_id: str, sub: SubAgent, status: SubAgentStatus, error: str) -> None:
        log.info("sub-agent %s of task %s: %s (%s)", sub.id, task_id, status.value, error)
        self.store.finish_sub_agent(sub.id, status, error=error)
        self._emit(task_id, TaskEventType.SUB_AGENT_FAILED, sub_agent_id=sub.id, status=status.value, error=error)

    async def _sub_agent_loop(self, user_id: str, overall: str, sub: SubAgent, seconds: float) -> Any:
        registry = self._registry()
        base = GenerationOptions(temperature=self.inference.temperature, max_tokens=self.inference.max_tokens)
        system = SUB_AGENT_PROMPT
        enabled: tuple[str, ...] | None = sub.tools
        profile = self.profiles.by_name(user_id, sub.profile) if self.profiles is not None and sub.profile else None
        if profile is not None:
            applied = profile.apply(user_prompt=sub.description, registered_tools=registry.names())
            system = f"{SUB_AGENT_PROMPT}\n\n{applied.system}"
            base = applied.options(base, self.inference.context_length)
            enabled = enabled if enabled is not None else applied.tools
        if not self.tool_settings.enabled:
            enabled = ()
        elif enabled is None and self.selector is not None and self.tool_settings.selection == "auto":
            # as in chat: only the tools the sub-task is about (a short prompt; none = a plain answer)
            enabled = tuple(self.selector.select(sub.description, registry.tools()))
        prompt = f"Your sub-task: {sub.description}" if sub.description.strip() == overall.strip() else \
            f"The overall task: {overall}\n\nYour sub-task: {sub.description}"
        # The sub-agent's own timeout bounds it (a model turn's wait includes the other agents'
        # turns); the loop's timeouts are set past it so they never cut a sub-agent short first.
        loop_settings = self.tool_settings.model_copy(
            update={"total_timeout_secs": seconds + 5, "iteration_timeout_secs": seconds + 5})
        loop = ToolLoop(self.queue, registry, loop_settings, guard=PromptGuard(self.defence, user_id))
        return await loop.run([ChatMessage("system", system), ChatMessage("user", prompt)], base,
                              self._context(user_id), enabled)

    async def _synthesise(self, description: str, subs: list[SubAgent]) -> str:
        parts = []
        for n, s in enumerate(subs, 1):
            outcome = s.result if s.status is SubAgentStatus.COMPLETED else f"({s.status.value}: {s.error or 'no result'})"
            parts.append(f"Sub-task {n}: {s.description}\nResult: {outcome}")
        joined = "\n\n".join(parts)
        messages = [ChatMessage("system", SYNTHESIS_PROMPT),
                    ChatMessage("user", f"The task: {description}\n\nResults of the agents:\n\n{joined}")]
        options = GenerationOptions(temperature=self.inference.temperature, max_tokens=self.inference.max_tokens)
        try:
            reply = await self.queue.complete(messages, options)
        except Exception as exc:  # noqa: BLE001 - the results are still worth returning
            log.warning("the synthesis call failed (%s); returning the results joined", exc)
            return joined
        return reply.content.strip() or joined


class _NoResult(Exception):
    """Every sub-agent failed, timed out or was cancelled."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def build_agentic(settings: Settings, db: Database, sealer: Sealer, queue: InferenceQueue, toolbox: Any = None,
                  profiles: ProfileSource | None = None, selector: Any = None) -> AgenticService:
    """The service, after marking the tasks a previous server left planning or running as failed
    ("interrupted by a server restart"). Recovery runs even while agentic mode is disabled."""
    service = AgenticService(settings.agentic, TaskStore(db, sealer), queue, toolbox=toolbox,
                             tool_settings=settings.tool_calling, inference=settings.inference, profiles=profiles,
                             selector=selector)
    service.recover()
    return service
