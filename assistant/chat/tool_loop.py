"""The tool-calling loop: reason, act, observe, until a final answer.

A run sends the conversation and the tool schemas to the model; a reply with tool calls (native,
or JSON in the content) is executed — in parallel when ``parallel_tool_execution`` — and the
results are appended as tool-role messages; the loop repeats until the model answers in text,
``max_iterations`` model turns have run, or a timeout passes. Calls named in
``require_approval_for`` are not run: each becomes an approval request the model is told about.
A malformed call, an unknown or disabled tool, bad arguments and a tool that raises are reported
back to the model as that call's result; they never fail the request. Every step is an event
(``LoopEvent``) given to ``on_event``; every tool run is kept as a ``ToolRecord``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from uuid import uuid4

from assistant.config import ToolCallingSettings
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, TokenUsage, ToolCall, ToolCalls
from assistant.llm.queue import InferenceQueue
from assistant.tools.base import ToolContext, ToolError, ToolRegistry
from assistant.tools.parsing import parse_tool_calls

MAX_RESULT_CHARS = 4000


class LoopEventType(StrEnum):
    RUN_START = "run-start"
    MODEL_START = "model-start"
    MODEL_END = "model-end"
    TOOL_START = "tool-start"
    TOOL_END = "tool-end"
    APPROVAL_REQUIRED = "approval-required"
    RUN_END = "run-end"


@dataclass(frozen=True)
class LoopEvent:
    type: LoopEventType
    iteration: int
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolRecord:
    iteration: int
    call: ToolCall
    result: Any
    error: str | None
    duration_ms: float


@dataclass(frozen=True)
class ApprovalRequest:
    id: str
    call: ToolCall


@dataclass
class LoopResult:
    content: str
    model: str
    usage: TokenUsage
    iterations: int
    finish_reason: str  # stop | max_iterations | timeout
    records: list[ToolRecord] = field(default_factory=list)
    approvals: list[ApprovalRequest] = field(default_factory=list)


class ToolLoop:
    def __init__(
        self,
        queue: InferenceQueue,
        registry: ToolRegistry,
        settings: ToolCallingSettings,
        *,
        on_event: Callable[[LoopEvent], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.queue = queue
        self.registry = registry
        self.settings = settings
        self.on_event = on_event or (lambda event: None)
        self.clock = clock

    def _emit(self, kind: LoopEventType, iteration: int, **data: Any) -> None:
        self.on_event(LoopEvent(kind, iteration, data))

    async def _model_turn(self, messages: list[ChatMessage], options: GenerationOptions):  # noqa: ANN202
        parts: list[str] = []
        calls: list[ToolCall] = []
        finished: Finished | None = None
        async for event in self.queue.stream(messages, options):
            if isinstance(event, Delta):
                parts.append(event.text)
            elif isinstance(event, ToolCalls):
                calls.extend(event.calls)
            else:
                finished = event
        return "".join(parts), calls, finished

    async def run(self, messages: list[ChatMessage], options: GenerationOptions, context: ToolContext,
                  enabled: Iterable[str] | None = None) -> LoopResult:
        s = self.settings
        messages = list(messages)
        allowed = {t.name for t in self.registry.tools(enabled)}
        options = replace(options, tools=self.registry.specs(enabled))
        deadline = self.clock() + s.total_timeout_secs
        usage = TokenUsage()
        result = LoopResult("", options.model or "", usage, 0, "stop")
        self._emit(LoopEventType.RUN_START, 0, tools=sorted(allowed))
        for iteration in range(1, s.max_iterations + 1):
            remaining = deadline - self.clock()
            if remaining <= 0:
                result.finish_reason = "timeout"
                break
            result.iterations = iteration
            self._emit(LoopEventType.MODEL_START, iteration)
            try:
                text, calls, finished = await asyncio.wait_for(
                    self._model_turn(messages, options), min(s.iteration_timeout_secs, remaining)
                )
            except TimeoutError:
                result.finish_reason = "timeout"
                self._emit(LoopEventType.MODEL_END, iteration, timeout=True)
                break
            if finished is not None:
                usage = TokenUsage(usage.prompt + finished.usage.prompt, usage.completion + finished.usage.completion)
                result.model = finished.model
            if not calls:
                calls = list(parse_tool_calls(text, prefix=f"call_{iteration}"))
            self._emit(LoopEventType.MODEL_END, iteration, content=text,
                       tool_calls=[{"name": c.name, "arguments": c.arguments} for c in calls])
            if not calls:
                result.content = text
                result.usage = usage
                self._emit(LoopEventType.RUN_END, iteration, finish_reason="stop")
                return result
            messages.append(ChatMessage("assistant", text, tool_calls=tuple(calls)))
            records = await self._execute(iteration, calls, allowed, context, result, deadline)
            for record in records:
                payload = {"error": record.error} if record.error else {"result": record.result}
                messages.append(ChatMessage("tool", _dump(payload), tool_call_id=record.call.id, name=record.call.name))
            result.records.extend(records)
        else:
            result.finish_reason = "max_iterations"
        result.usage = usage
        if not result.content:
            done = [r.call.name for r in result.records]
            result.content = (
                f"I could not finish: the tool loop stopped ({result.finish_reason}) after "
                f"{result.iterations} model turn(s)" + (f"; tools run: {', '.join(done)}." if done else ".")
            )
        self._emit(LoopEventType.RUN_END, result.iterations, finish_reason=result.finish_reason)
        return result

    async def _execute(self, iteration: int, calls: list[ToolCall], allowed: set[str], context: ToolContext,
                       result: LoopResult, deadline: float) -> list[ToolRecord]:
        s = self.settings
        gated = set(s.require_approval_for)

        async def one(call: ToolCall) -> ToolRecord:
            start = time.perf_counter()
            self._emit(LoopEventType.TOOL_START, iteration, id=call.id, name=call.name, arguments=call.arguments)
            value: Any = None
            error: str | None = None
            tool = self.registry.get(call.name)
            if tool is None or call.name not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                error = f"unknown or disabled tool {call.name!r}; available: {known}"
            elif call.name in gated:
                request = ApprovalRequest(str(uuid4()), call)
                result.approvals.append(request)
                value = {"status": "approval_required", "approval_id": request.id,
                         "message": f"{call.name} needs the user's approval before it runs; it did not run."}
                self._emit(LoopEventType.APPROVAL_REQUIRED, iteration, id=call.id, name=call.name,
                           approval_id=request.id, arguments=call.arguments)
            else:
                timeout = max(min(s.iteration_timeout_secs, deadline - self.clock()), 0.001)
                try:
                    value = await asyncio.wait_for(asyncio.to_thread(tool, context, call.arguments), timeout)
                except TimeoutError:
                    error = f"{call.name} did not finish within {timeout:.3g} s"
                except ToolError as exc:
                    error = str(exc)
                except Exception as exc:  # a failing tool is the model's information, not a crash
                    error = f"{call.name} failed: {type(exc).__name__}: {exc}"
            record = ToolRecord(iteration, call, value, error, (time.perf_counter() - start) * 1000)
            self._emit(LoopEventType.TOOL_END, iteration, id=call.id, name=call.name, result=value, error=error,
                       duration_ms=round(record.duration_ms, 3))
            return record

        if s.parallel_tool_execution:
            return list(await asyncio.gather(*(one(c) for c in calls)))
        return [await one(c) for c in calls]


def _dump(payload: Any) -> str:
    text = json.dumps(payload, default=str, ensure_ascii=False)
    return text if len(text) <= MAX_RESULT_CHARS else text[:MAX_RESULT_CHARS] + "... (truncated)"
