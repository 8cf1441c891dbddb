"""Fakes for agentic-task tests: a ChatModel that answers by reading the messages (so the order in
which concurrent sub-agents reach the queue does not matter) and tools that record concurrency."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from assistant.agents.planner import PLAN_TOOL
from assistant.agents.tasks import SYNTHESIS_PROMPT
from assistant.llm.base import (
    ChatMessage,
    Delta,
    Finished,
    GenerationOptions,
    Health,
    ModelInfo,
    StreamEvent,
    TokenUsage,
    ToolCall,
    ToolCalls,
)
from assistant.tools.base import ToolContext, ToolRegistry, tool
from assistant.tools.catalog import Toolbox

SUB_TASK_MARK = "Your sub-task: "


@dataclass(frozen=True)
class Step:
    """One model turn of a sub-agent: text, a tool call, an error, after an optional delay (which
    stops early, like real generation, when the queue says stop)."""

    text: str | None = None
    call: tuple[str, dict[str, Any]] | None = None
    error: Exception | None = None
    delay_secs: float = 0.0


@dataclass
class AgentModel:
    """``plan`` is what the planner calls ``submit_plan`` with (a dict), or text it answers with (a
    str); ``scripts`` maps a sub-task description to its turns (default: one answer "result of
    <description>"); the synthesis answers ``synthesis`` (or raises it when it is an exception)."""

    plan: dict[str, Any] | str | None = None
    scripts: dict[str, list[Step]] = field(default_factory=dict)
    synthesis: str | Exception = "SYNTHESIS"
    id: str = "agent-fake"
    calls: list[tuple[str, str]] = field(default_factory=list)  # (kind, sub-task or "")
    prompts: list[list[ChatMessage]] = field(default_factory=list)  # the messages of every call
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def kind_of(self, messages: list[ChatMessage], options: GenerationOptions) -> tuple[str, str]:
        if any(t.name == PLAN_TOOL for t in options.tools):
            return "plan", ""
        if messages and messages[0].content == SYNTHESIS_PROMPT:
            return "synthesis", ""
        user = next(m.content for m in messages if m.role == "user")
        return "sub_agent", user.split(SUB_TASK_MARK, 1)[1].strip()

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        kind, key = self.kind_of(messages, options)
        with self._lock:
            self.calls.append((kind, key))
            self.prompts.append(list(messages))
        usage = TokenUsage(10, 5)
        if kind == "plan":
            if isinstance(self.plan, dict):
                yield ToolCalls((ToolCall("plan_1", PLAN_TOOL, self.plan),))
            elif isinstance(self.plan, str):
                yield Delta(self.plan)
            yield Finished(self.id, usage)
            return
        if kind == "synthesis":
            if isinstance(self.synthesis, Exception):
                raise self.synthesis
            yield Delta(self.synthesis)
            yield Finished(self.id, usage)
            return
        turn = sum(1 for m in messages if m.role == "assistant")
        steps = self.scripts.get(key, [])
        step = steps[turn] if turn < len(steps) else Step(text=f"result of {key}")
        deadline = time.monotonic() + step.delay_secs
        while time.monotonic() < deadline:
            if options.should_stop is not None and options.should_stop():
                yield Finished(self.id, usage, "cancelled")
                return
            time.sleep(0.005)
        if step.error is not None:
            raise step.error
        if step.call is not None:
            yield ToolCalls((ToolCall(f"call_{key[:8]}_{turn}", step.call[0], dict(step.call[1])),))
            yield Finished(self.id, usage, "tool_calls")
            return
        yield Delta(step.text or "")
        yield Finished(self.id, usage)

    def health(self) -> Health:
        return Health(True, self.id, 0)

    def models(self) -> list[ModelInfo]:
        return [ModelInfo(self.id, "Agent test model", "0", 4096, True)]


class Meter:
    """Counts how many callers are inside at once. ``enter`` waits (up to ``wait_secs``) until
    ``target`` callers are inside, so an allowed overlap really happens, and a bound that is not
    enforced shows as a maximum above it."""

    def __init__(self, target: int = 1, wait_secs: float = 1.0):
        self.target = target
        self.wait_secs = wait_secs
        self.inside = 0
        self.max_inside = 0
        self.entries = 0
        self.release = threading.Event()  # set to let ``block`` return
        self._cond = threading.Condition()

    def probe(self) -> str:
        with self._cond:
            self.inside += 1
            self.entries += 1
            self.max_inside = max(self.max_inside, self.inside)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.inside >= self.target, timeout=self.wait_secs)
        time.sleep(0.05)  # stay inside a little: an unbounded caller would pile in now
        with self._cond:
            self.inside -= 1
        return "probed"

    def block(self) -> str:
        with self._cond:
            self.inside += 1
            self.entries += 1
            self.max_inside = max(self.max_inside, self.inside)
        self.release.wait(10)
        with self._cond:
            self.inside -= 1
        return "released"


def toolbox_with(meter: Meter) -> Toolbox:
    """A toolbox with ``probe`` (counts overlap) and ``block`` (waits until released)."""

    @tool(capability="test")
    def probe(ctx: ToolContext) -> str:
        """Record that a sub-agent is inside a tool."""
        return meter.probe()

    @tool(capability="test")
    def block(ctx: ToolContext) -> str:
        """Wait until the test releases it."""
        return meter.block()

    return Toolbox(ToolRegistry([probe, block]))
