"""The tool loop's events: what a run did, step by step, for a UI, a log or a timeline."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class LoopEventType(StrEnum):
    RUN_START = "run-start"
    MODEL_START = "model-start"
    MESSAGE_DELTA = "message-delta"  # a piece of the final answer, as it is generated
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
    at: float = field(default_factory=time.perf_counter)  # seconds, for timelines

    def summary(self) -> str:
        """One line for a log or a notebook."""
        d = self.data
        match self.type:
            case LoopEventType.RUN_START:
                return f"run-start: tools {', '.join(d.get('tools', [])) or 'none'}"
            case LoopEventType.MODEL_END:
                calls = ", ".join(f"{c['name']}({json.dumps(c['arguments'], ensure_ascii=False)})"
                                  for c in d.get("tool_calls", []))
                return f"[{self.iteration}] model-end: " + (f"calls {calls}" if calls else f"answer {d.get('content', '')!r}")
            case LoopEventType.TOOL_START:
                return f"[{self.iteration}] tool-start: {d['name']}({json.dumps(d['arguments'], ensure_ascii=False)})"
            case LoopEventType.TOOL_END:
                outcome = f"error {d['error']}" if d.get("error") else json.dumps(d.get("result"), default=str, ensure_ascii=False)[:200]
                return f"[{self.iteration}] tool-end: {d['name']} in {d['duration_ms']:.1f} ms -> {outcome}"
            case LoopEventType.RUN_END:
                return f"run-end: {d['finish_reason']} after {self.iteration} model turn(s)"
        return f"[{self.iteration}] {self.type.value}"


def timeline(events: Iterable[LoopEvent]) -> list[dict[str, Any]]:
    """Model turns and tool runs as ``{lane, label, start_ms, end_ms}`` rows (ms from the run's
    start), for a Gantt chart of where a run's time went."""
    events = list(events)
    if not events:
        return []
    origin = events[0].at
    rows, open_model, open_tools = [], {}, {}
    for e in events:
        ms = (e.at - origin) * 1000
        if e.type is LoopEventType.MODEL_START:
            open_model[e.iteration] = ms
        elif e.type is LoopEventType.MODEL_END and e.iteration in open_model:
            rows.append({"lane": "model", "label": f"model turn {e.iteration}", "start_ms": open_model.pop(e.iteration),
                         "end_ms": ms})
        elif e.type is LoopEventType.TOOL_START:
            open_tools[e.data["id"]] = ms
        elif e.type is LoopEventType.TOOL_END and e.data["id"] in open_tools:
            rows.append({"lane": f"tool {e.data['name']}", "label": e.data["name"],
                         "start_ms": open_tools.pop(e.data["id"]), "end_ms": ms})
    return rows
