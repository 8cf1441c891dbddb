"""What the tool loop checks before a call runs (issue 20): prerequisites, grounded dates, argument
hygiene and the repair round, with the counters ``/metrics`` shows.

For each call the model asked for, :class:`CallReviewer` decides one of:

- **run** it, with the arguments :func:`assistant.chat.arguments.review_arguments` gives back (relative
  dates resolved, the user's own words kept), the changes kept for the explain view;
- **prerequisite**: the call uses a value another tool produces (a token, an id) that no earlier
  result holds (:mod:`assistant.chat.prerequisites`): it does not run, the model is told which tool
  yields the value, and its next turn is a call of that tool (``tool_choice`` = the producer, decoded
  under that tool's grammar);
- **repair**: the arguments still break the schema (an enum, a format): the model is told what is
  wrong and its next turn is a call of the same tool (one round per call by default,
  ``repair_rounds``);
- **error**: still invalid after the repair rounds: a tool-role error the model sees, never an
  exception out of the loop.

Everything decided is counted (:class:`ToolCallCounters`, by reason) for the metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from assistant.chat.arguments import ReviewOptions, review_arguments, time_context
from assistant.chat.prerequisites import Dependency, annotate, dependencies, missing
from assistant.config import ToolCallingSettings
from assistant.llm.base import ChatMessage, ToolCall, ToolSpec

# Every reason is a series from the start (0 until counted), so a dashboard's rate() has a baseline.
PROBLEM_REASONS = ("unknown_tool", "malformed", "prerequisite", "repair", "invalid_arguments", "arguments_changed")


class ToolCallCounters:
    """Thread-safe counts of what the loop did to calls, by reason (see :data:`PROBLEM_REASONS`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(PROBLEM_REASONS, 0)

    def add(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self._counts[reason] = self._counts.get(reason, 0) + n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)


@dataclass(frozen=True)
class Decision:
    call: ToolCall  # with the reviewed arguments
    action: str  # run | prerequisite | repair | error
    message: str = ""  # the tool-role text the model sees when the call does not run
    next_choice: str | None = None  # tool_choice of the model's next turn (a forced call)
    review: dict[str, Any] | None = None  # kept with the tool run (None: nothing to say)


class CallReviewer:
    """The per-run state of the checks: the offered specs, their dependencies, the clock, the repair
    rounds left per tool."""

    def __init__(self, specs: Sequence[ToolSpec], settings: ToolCallingSettings, now: datetime,
                 counters: ToolCallCounters | None = None, conversation_date: datetime | None = None):
        self.settings = settings
        self.now = now
        self.counters = counters or ToolCallCounters()
        self.specs = {s.name: s for s in specs}
        self.deps: list[Dependency] = dependencies(list(specs)) if settings.prerequisites else []
        self.shown: tuple[ToolSpec, ...] = annotate(list(specs), self.deps) if self.deps else tuple(specs)
        self.options = ReviewOptions(ground_dates=settings.ground_dates, keep_user_words=settings.argument_hygiene,
                                     check_schema=settings.argument_hygiene, conversation_date=conversation_date)
        self._repairs: dict[str, int] = {}
        self._forced: set[tuple[str, str]] = set()  # (tool, parameter) whose producer was forced once

    def prompt_messages(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """``messages`` with the current date and time as a system message after the leading ones
        (the first system message, where templates put the tool list, stays the same, so its KV
        cache is reused from request to request)."""
        if not self.settings.ground_dates:
            return list(messages)
        at = after_leading_system(messages)
        return [*messages[:at], ChatMessage("system", time_context(self.now)), *messages[at:]]

    def decide(self, call: ToolCall, messages: Sequence[ChatMessage]) -> Decision:
        spec = self.specs.get(call.name)
        if spec is None:
            self.counters.add("unknown_tool")
            return Decision(call, "run")  # the executor reports the unknown tool to the model
        if "_unparsed" in call.arguments:
            self.counters.add("malformed")
            return Decision(call, "run")
        user_text = [m.content for m in messages if m.role == "user"]
        review = review_arguments(spec, call.arguments, user_text=user_text, now=self.now, options=self.options)
        reviewed = replace(call, arguments=review.arguments)
        notes: dict[str, Any] = review.as_dict() if (review.changes or review.problems) else {}
        if review.changes:
            self.counters.add("arguments_changed")
        dep = missing(reviewed, self.deps, messages) if self.deps else None
        if dep is not None:
            self.counters.add("prerequisite")
            notes["prerequisite"] = {"parameter": dep.parameter, "producer": dep.producer}
            if (dep.tool, dep.parameter) in self._forced:  # once per run: a model that invents it again
                return Decision(reviewed, "error", _prerequisite_message(dep, again=True), None, notes)
            self._forced.add((dep.tool, dep.parameter))
            return Decision(reviewed, "prerequisite", _prerequisite_message(dep), dep.producer, notes)
        if review.problems:
            left = self._repairs.setdefault(call.name, self.settings.repair_rounds)
            problems = "; ".join(review.problems)
            if left > 0:
                self._repairs[call.name] = left - 1
                self.counters.add("repair")
                notes["repair"] = True
                return Decision(reviewed, "repair",
                                f"{call.name} did not run: invalid arguments ({problems}). Call {call.name} again "
                                "with corrected arguments.", call.name, notes)
            self.counters.add("invalid_arguments")
            return Decision(reviewed, "error", f"invalid arguments for {call.name}: {problems}", None, notes)
        return Decision(reviewed, "run", review=notes or None)


def after_leading_system(messages: Sequence[ChatMessage]) -> int:
    """Where a system message goes so that the leading ones (the first holds the tool list in chat
    templates, its KV cache reused) stay as they are: right after them."""
    return next((i for i, m in enumerate(messages) if m.role != "system"), len(messages))


def _prerequisite_message(dep: Dependency, again: bool = False) -> str:
    if again:
        return (f"{dep.tool} did not run: its argument {dep.parameter!r} is not a value {dep.producer} returned "
                "in this conversation. Use the value from its result.")
    return (f"{dep.tool} did not run: its argument {dep.parameter!r} must be the value returned by "
            f"{dep.producer}, which has not given one in this conversation. Call {dep.producer} first.")

