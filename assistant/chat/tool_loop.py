"""The tool-calling loop: reason, act, observe, until a final answer.

A run sends the conversation and the tool schemas to the model; a reply with tool calls (native,
or JSON in the content) is executed — in parallel when ``parallel_tool_execution`` — and the
results are appended as tool-role messages; the loop repeats until the model answers in text,
``max_iterations`` model turns have run, or a timeout passes. Calls named in
``require_approval_for`` are not run: each becomes an approval request, stored through the loop's
:class:`ApprovalGate` (the chat's: a record an admin decides through ``/v1/approvals``), and the
model is told that the call waits for approval. Without a gate (a run nobody can approve, such as
an agentic sub-agent) such a call is refused as an error. The decision's outcome reaches the model
in the conversation's next turn (see :mod:`assistant.chat.approvals`).
With a :class:`~assistant.defence.wrap.PromptGuard` (chat's), the result of every tool that ran is
inspected once (its source by tool name: :data:`TOOL_SOURCES`), kept with its verdict in the
``ToolRecord`` and reaches the model fenced as data with the flagged spans neutralised; once anything
flagged was seen in the turn (the user's message, a memory, a result), calls of
:data:`PERSISTENT_WRITES` are refused (status ``refused``) with a tool-role message saying why.
A malformed call, an unknown or disabled tool, bad arguments and a tool that raises are reported
back to the model as that call's result; they never fail the request. Every step is an event
(``LoopEvent``) given to ``on_event``; every tool run is kept as a ``ToolRecord``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from assistant.chat.call_review import CallReviewer, ToolCallCounters, after_leading_system
from assistant.chat.loop_events import LoopEvent, LoopEventType, timeline  # noqa: F401 (re-exported)
from assistant.config import ToolCallingSettings
from assistant.defence.types import Source, Verdict
from assistant.defence.wrap import DATA_RULE, PromptGuard
from assistant.errors import ServiceUnavailableError
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, TokenUsage, ToolCall, ToolCalls
from assistant.llm.queue import InferenceQueue
from assistant.llm.tool_format import ANSWER, CALL, UNDECIDED, classify_start, parse_tool_calls
from assistant.tools.base import ToolContext, ToolError, ToolRegistry

MAX_RESULT_CHARS = 4000
# Tools whose writes the model would later read back as trusted context (a memory is "a known fact"):
# refused in a turn where something flagged was seen. No tool writes agent profiles or snippets.
PERSISTENT_WRITES = frozenset({"store_memory"})
# Where a tool's result comes from, for the detector (anything else: a plain tool result).
TOOL_SOURCES = {"search_emails": Source.EMAIL, "search_web": Source.WEB, "recall_memory": Source.MEMORY}
ANSWER_NOW = "Answer my question now, in plain words, using the tool results above."
MALFORMED_FEEDBACK = (
    "Your last reply looked like a tool call but it is not valid JSON of the form "
    '{"name": "<tool name>", "arguments": {...}}. Call a tool with exactly that, or answer in plain text.'
)


@dataclass(frozen=True)
class ToolRecord:
    iteration: int
    call: ToolCall
    result: Any
    error: str | None
    duration_ms: float
    status: str = "ok"  # ok | error | approval_required | refused
    verdict: Verdict | None = None  # the defence's verdict on the result (None: not inspected)
    # What the loop did to the call's arguments before it ran (assistant/chat/arguments.Review.as_dict(),
    # plus "prerequisite"/"repaired" notes), for the explain view; None: nothing checked.
    review: dict[str, Any] | None = None


@dataclass(frozen=True)
class ApprovalRequest:
    id: str
    call: ToolCall


class ApprovalGate(Protocol):
    def __call__(self, call: ToolCall) -> str:
        """Store an approval request for ``call`` (its arguments are valid); returns its id."""
        ...


@dataclass
class LoopResult:
    content: str
    model: str
    usage: TokenUsage
    iterations: int
    finish_reason: str  # stop | length | max_iterations | timeout
    records: list[ToolRecord] = field(default_factory=list)
    approvals: list[ApprovalRequest] = field(default_factory=list)
    generation_ms: float = 0.0  # time spent waiting for the model (the rest is loop overhead)


@dataclass
class _Turn:
    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    finished: Finished | None = None
    state: str = UNDECIDED
    timed_out: bool = False


_DONE = object()
MALFORMED = "(malformed call)"


class ToolLoop:
    def __init__(
        self,
        queue: InferenceQueue,
        registry: ToolRegistry,
        settings: ToolCallingSettings,
        *,
        on_event: Callable[[LoopEvent], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        approvals: ApprovalGate | None = None,
        guard: PromptGuard | None = None,
        now: Callable[[], datetime] | None = None,
        counters: ToolCallCounters | None = None,
        conversation_date: datetime | None = None,
    ):
        self.now = now  # None: the wall clock in settings.timezone
        self.counters = counters
        self.conversation_date = conversation_date
        self.approvals = approvals
        self.guard = guard
        self.queue = queue
        self.registry = registry
        self.settings = settings
        self.on_event = on_event or (lambda event: None)
        self.clock = clock

    def _event(self, kind: LoopEventType, iteration: int, **data: Any) -> LoopEvent:
        event = LoopEvent(kind, iteration, data)
        self.on_event(event)
        return event

    async def run(self, messages: list[ChatMessage], options: GenerationOptions, context: ToolContext,
                  enabled: Iterable[str] | None = None) -> LoopResult:
        """Run to the end; the result of the last event."""
        async for event in self.stream(messages, options, context, enabled):
            if event.type is LoopEventType.RUN_END:
                return event.data["result"]
        raise RuntimeError("the tool loop ended without a run-end event")  # pragma: no cover

    async def _model_turn(self, messages: list[ChatMessage], options: GenerationOptions, timeout: float,
                          turn: _Turn) -> AsyncIterator[str]:
        """Run one model turn, yielding the answer's text as soon as it is known to be an answer.
        The generation runs in its own task so a deadline can stop it between any two tokens."""
        events: asyncio.Queue[Any] = asyncio.Queue()

        async def produce() -> None:
            try:
                async for event in self.queue.stream(messages, options):
                    events.put_nowait(event)
            except Exception as exc:  # handed to the consumer, raised there
                events.put_nowait(exc)
            events.put_nowait(_DONE)

        if not options.tools:
            turn.state = ANSWER  # no tools offered this turn: whatever comes is the answer
        task = asyncio.create_task(produce())
        deadline = self.clock() + timeout
        try:
            while True:
                try:
                    item = await asyncio.wait_for(events.get(), max(deadline - self.clock(), 0.0))
                except TimeoutError:
                    turn.timed_out = True
                    return
                if item is _DONE:
                    break
                if isinstance(item, Exception):
                    raise item
                if isinstance(item, Delta):
                    turn.text += item.text
                    if turn.state == UNDECIDED:
                        turn.state = classify_start(turn.text)
                        if turn.state == ANSWER:
                            yield turn.text
                    elif turn.state == ANSWER:
                        yield item.text
                elif isinstance(item, ToolCalls):
                    turn.calls.extend(item.calls)
                else:
                    turn.finished = item
            if turn.state == UNDECIDED and turn.text.strip() and not turn.calls:
                turn.state = CALL if parse_tool_calls(turn.text) else ANSWER
                if turn.state == ANSWER:
                    yield turn.text
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stream(self, messages: list[ChatMessage], options: GenerationOptions, context: ToolContext,
                     enabled: Iterable[str] | None = None) -> AsyncIterator[LoopEvent]:
        """The run as events; ``message-delta`` events carry the final answer as it is generated and
        the last event, ``run-end``, carries the :class:`LoopResult` under ``result``."""
        s = self.settings
        tools = self.registry.tools(enabled)
        allowed = {t.name for t in tools}
        now = self.now() if self.now is not None else datetime.now(ZoneInfo(s.timezone))
        reviewer = CallReviewer([t.spec for t in tools], s, now, self.counters, self.conversation_date)
        messages = reviewer.prompt_messages(list(messages))
        threshold = options.call_threshold
        if threshold is None and s.decoding == "constrained":
            threshold = s.call_threshold
        options = replace(options, tools=reviewer.shown, call_threshold=threshold)
        deadline = self.clock() + s.total_timeout_secs
        result = LoopResult("", options.model or "", TokenUsage(), 0, "stop")
        usage = TokenUsage()
        answer: list[str] = []
        seen: list[ToolCall] = []  # calls already answered in this run
        failed: list[ToolCall] = []  # calls that ran into an error: the same call again is a repeat
        turn_options = options
        next_options: GenerationOptions | None = None  # one turn with other options (a forced call, no tools)
        yield self._event(LoopEventType.RUN_START, 0, tools=sorted(allowed))
        for iteration in range(1, s.max_iterations + 1):
            remaining = deadline - self.clock()
            if remaining <= 0:
                result.finish_reason = "timeout"
                break
            result.iterations = iteration
            turn_options, next_options = next_options or turn_options, None
            yield self._event(LoopEventType.MODEL_START, iteration)
            turn = _Turn()
            started = time.perf_counter()
            async for text in self._model_turn(messages, turn_options, min(s.iteration_timeout_secs, remaining),
                                               turn):
                answer.append(text)
                yield self._event(LoopEventType.MESSAGE_DELTA, iteration, delta=text)
            result.generation_ms += (time.perf_counter() - started) * 1000
            if turn.finished is not None and turn.finished.finish_reason == "timeout":
                raise ServiceUnavailableError(  # the engine's own request deadline, as in plain chat
                    f"generation passed the request timeout of {self.queue.request_timeout_secs:g} s"
                )
            if turn.finished is not None:
                usage = TokenUsage(usage.prompt + turn.finished.usage.prompt,
                                   usage.completion + turn.finished.usage.completion,
                                   usage.cached_prompt + turn.finished.usage.cached_prompt)
                result.model = turn.finished.model
            calls = turn.calls or (list(parse_tool_calls(turn.text, prefix=f"call_{iteration}"))
                                   if turn.state == CALL else [])
            yield self._event(LoopEventType.MODEL_END, iteration, content=turn.text, timeout=turn.timed_out,
                              tool_calls=[{"name": c.name, "arguments": c.arguments} for c in calls])
            if turn.timed_out:
                result.finish_reason = "timeout"
                break
            if turn.state == CALL and not calls:  # looked like a call but is not one: tell the model
                record = ToolRecord(iteration, ToolCall(f"call_{iteration}_malformed", MALFORMED, {}), None,
                                    f"not a valid tool call: {turn.text[:300]!r}", 0.0, "error")
                result.records.append(record)
                yield self._event(LoopEventType.TOOL_END, iteration, id=record.call.id, name=MALFORMED,
                                  result=None, error=record.error, duration_ms=0.0)
                reviewer.counters.add("malformed")
                messages += [ChatMessage("assistant", turn.text), ChatMessage("user", MALFORMED_FEEDBACK)]
                continue
            if not calls:
                result.content = "".join(answer)
                result.finish_reason = turn.finished.finish_reason if turn.finished else "stop"
                break
            if all(any(_repeats(c, earlier) for earlier in seen) or any((c.name, c.arguments) == (f.name, f.arguments) for f in failed) for c in calls):
                # The model asks again for what it already has (small models loop like this): no
                # new run; the next turn offers no tools, so it answers from the results it has.
                yield self._event(LoopEventType.TOOL_END, iteration, id=calls[0].id, name=calls[0].name,
                                  result=None, error="repeated call: the result is already in the conversation",
                                  duration_ms=0.0)
                messages.append(ChatMessage("user", ANSWER_NOW))
                turn_options = replace(options, tools=())
                continue
            turn_options = options
            decisions = [reviewer.decide(c, messages) for c in calls]
            calls = [d.call for d in decisions]
            runnable = [d for d in decisions if d.action == "run"]
            messages.append(ChatMessage("assistant", "" if turn.state == CALL else turn.text,
                                        tool_calls=tuple(calls)))
            by_id: dict[str, ToolRecord] = {}
            for d in decisions:
                if d.action == "run":
                    continue
                status = "error" if d.action == "error" else d.action
                by_id[d.call.id] = ToolRecord(iteration, d.call, None, d.message, 0.0, status, review=d.review)
                yield self._event(LoopEventType.TOOL_END, iteration, id=d.call.id, name=d.call.name, result=None,
                                  error=d.message, duration_ms=0.0, status=status)
                if d.next_choice is not None and next_options is None:
                    next_options = replace(options, tool_choice=d.next_choice)
            ran: list[ToolRecord] = []
            async for event in self._execute(iteration, [d.call for d in runnable], allowed, context, result,
                                             deadline, ran, {d.call.id: d.review for d in runnable if d.review}):
                yield event
            by_id.update((r.call.id, r) for r in ran)
            # what ran is "already answered"; a call that failed may be asked again (with its fix)
            seen.extend(r.call for r in ran if r.status == "ok")
            failed.extend(r.call for r in ran if r.status != "ok")
            records = [by_id[c.id] for c in calls if c.id in by_id]
            for record in records:
                payload = {"error": record.error} if record.error else {"result": record.result}
                text = _dump(payload)
                if record.verdict is not None and self.guard is not None:
                    text = self.guard.data(text, record.verdict, _label(record.call.name))
                    with_data_rule(messages)
                messages.append(ChatMessage("tool", text, tool_call_id=record.call.id, name=record.call.name))
            result.records.extend(records)
        else:
            result.finish_reason = "max_iterations"
        result.usage = usage
        if not result.content:
            if answer:
                result.content = "".join(answer)
            else:
                done = [r.call.name for r in result.records]
                result.content = (
                    f"I could not finish: the tool loop stopped ({result.finish_reason}) after "
                    f"{result.iterations} model turn(s)" + (f"; tools run: {', '.join(done)}." if done else ".")
                )
                answer.append(result.content)
                yield self._event(LoopEventType.MESSAGE_DELTA, result.iterations, delta=result.content)
        yield self._event(LoopEventType.RUN_END, result.iterations, finish_reason=result.finish_reason,
                          result=result)

    async def _execute(self, iteration: int, calls: list[ToolCall], allowed: set[str], context: ToolContext,
                       result: LoopResult, deadline: float, records: list[ToolRecord],
                       reviews: dict[str, dict[str, Any]] | None = None) -> AsyncIterator[LoopEvent]:
        """Run the calls (concurrently when ``parallel_tool_execution``), yielding their events;
        the records are appended to ``records`` in call order."""
        s = self.settings
        gated = set(s.require_approval_for)
        events: asyncio.Queue[LoopEvent] = asyncio.Queue()

        def emit(kind: LoopEventType, **data: Any) -> None:
            events.put_nowait(self._event(kind, iteration, **data))

        async def one(call: ToolCall) -> ToolRecord:
            start = time.perf_counter()
            emit(LoopEventType.TOOL_START, id=call.id, name=call.name, arguments=call.arguments)
            value: Any = None
            error: str | None = None
            status = "ok"
            ran = False  # the tool itself ran: what came back is outside content
            tool = self.registry.get(call.name)
            locked = self.guard.locked if self.guard is not None and call.name in PERSISTENT_WRITES else None
            if tool is None or call.name not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                error = f"unknown or disabled tool {call.name!r}; available: {known}"
            elif "_unparsed" in call.arguments:
                error = f"the arguments of {call.name} are not valid JSON: {str(call.arguments['_unparsed'])[:200]}"
            elif locked is not None:
                error, status = f"{call.name} did not run: {locked}", "refused"
            elif call.name in gated:
                try:
                    tool.validate(call.arguments)  # an approver approves a call that can run
                    if self.approvals is None:
                        raise ToolError(f"{call.name} needs an approval, which cannot be requested here; "
                                        "it did not run")
                    request = ApprovalRequest(self.approvals(call), call)
                except ToolError as exc:
                    error = str(exc)
                except Exception as exc:  # the request could not be stored: the call did not run
                    error = f"{call.name} needs an approval that could not be requested: {exc}"
                else:
                    result.approvals.append(request)
                    status = "approval_required"
                    value = {"status": "approval_required", "approval_id": request.id,
                             "message": f"{call.name} needs an administrator's approval before it runs; it did "
                                        f"not run. Tell the user it waits for approval {request.id}; the outcome "
                                        "will be in this conversation once it is decided."}
                    emit(LoopEventType.APPROVAL_REQUIRED, id=call.id, name=call.name, approval_id=request.id,
                         arguments=call.arguments)
            else:
                timeout = max(min(s.iteration_timeout_secs, deadline - self.clock()), 0.001)
                ran = True
                try:
                    value = await asyncio.wait_for(asyncio.to_thread(tool, context, call.arguments), timeout)
                except TimeoutError:
                    error = f"{call.name} did not finish within {timeout:.3g} s"
                except ToolError as exc:
                    error = str(exc)
                except Exception as exc:  # a failing tool is the model's information, not a crash
                    error = f"{call.name} failed: {type(exc).__name__}: {exc}"
            if error is not None and status != "refused":
                status = "error"
            verdict = None
            # An error is the service's own sentence (a validation message, a timeout), not content
            # from outside: "must be an ISO 8601 date" read as an instruction refused memory writes.
            if ran and error is None and self.guard is not None:
                seen = _dump({"result": value})
                verdict = await asyncio.to_thread(self.guard.inspect, seen, tool_source(call.name), _label(call.name),
                                                  call.id)
            review = (reviews or {}).get(call.id)
            record = ToolRecord(iteration, call, value, error, (time.perf_counter() - start) * 1000, status, verdict,
                                review)
            emit(LoopEventType.TOOL_END, id=call.id, name=call.name, result=value, error=error,
                 duration_ms=round(record.duration_ms, 3), defence=verdict.as_dict() if verdict else None,
                 status=status, review=review)
            return record

        async def run_all() -> list[ToolRecord]:
            if s.parallel_tool_execution:
                return list(await asyncio.gather(*(one(c) for c in calls)))
            return [await one(c) for c in calls]

        task = asyncio.create_task(run_all())
        while not task.done() or not events.empty():
            getter = asyncio.ensure_future(events.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        records.extend(task.result())


def _repeats(call: ToolCall, earlier: ToolCall) -> bool:
    """The same tool with the same arguments, or with one call's arguments a subset of the other's
    (a small model re-asks for the journey it has, adding a departure time it made up)."""
    if call.name != earlier.name:
        return False
    a, b = call.arguments, earlier.arguments
    smaller, larger = (a, b) if len(a) <= len(b) else (b, a)
    return all(key in larger and larger[key] == value for key, value in smaller.items())


def with_data_rule(messages: list[ChatMessage]) -> None:
    """Make sure a system message tells the model that fenced data carries no instructions: when
    none does yet, :data:`DATA_RULE` becomes a system message after the leading ones (the first
    system message, where templates put the tool list, stays the same: its KV cache is reused)."""
    if any(m.role == "system" and DATA_RULE in m.content for m in messages):
        return
    messages.insert(after_leading_system(messages), ChatMessage("system", DATA_RULE))


def tool_source(name: str) -> Source:
    """The source of a tool's result: :data:`TOOL_SOURCES`, any other mail tool an e-mail, else a tool result."""
    return TOOL_SOURCES.get(name) or (Source.EMAIL if "email" in name else Source.TOOL_RESULT)


def _label(name: str) -> str:
    return f"result of the tool {name}"


def _dump(payload: Any) -> str:
    text = json.dumps(payload, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "... (truncated)"
