"""The planner of an agentic task: the model splits a description into sub-tasks.

The model is offered one tool, ``submit_plan``, whose JSON schema is the plan
(``{summary, sub_tasks: [{description, profile?, tools?}]}``, at most ``max_sub_agents`` items).
The embedded engine decodes a call under a grammar built from that schema, so its plan is always
schema-valid; other engines may answer with the call as JSON text, or with bare JSON, which is
parsed too. Whatever arrives is checked again (:func:`parse_plan`): blank descriptions are dropped,
duplicates merged, the list cut to ``max_sub_agents``, unknown tools and profiles removed.

When the output is unusable (no plan, no sub-task, an engine error) the plan falls back to one
sub-task that is the whole description (:func:`fallback_plan`); a task is never lost to a bad plan.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assistant.llm.base import (
    ChatMessage,
    GenerationOptions,
    ToolCall,
    ToolSpec,
)
from assistant.llm.queue import InferenceQueue
from assistant.llm.tool_format import parse_tool_calls

log = logging.getLogger("assistant.agents")

PLAN_TOOL = "submit_plan"
MAX_SUB_TASK_CHARS = 2000
MAX_SUMMARY_CHARS = 1000

PLANNER_PROMPT = """You plan work for a team of assistant agents.
Split the user's task into at most {limit} sub-tasks that separate agents can do at the same time.
Each sub-task description must make sense on its own, without the others. A simple task is one sub-task.
Reply only by calling {tool} with a one-sentence summary of the plan and the list of sub-tasks."""


@dataclass(frozen=True)
class SubTaskSpec:
    """One sub-task of a plan. ``tools`` None means every registered tool; ``profile`` names an
    agent profile whose prompt the sub-agent uses."""

    description: str
    profile: str | None = None
    tools: tuple[str, ...] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"description": self.description, "profile": self.profile,
                "tools": list(self.tools) if self.tools is not None else None}


@dataclass(frozen=True)
class Plan:
    summary: str
    sub_tasks: tuple[SubTaskSpec, ...]
    fallback: bool = False  # the model's plan was unusable: one sub-task, the whole description
    reason: str = ""  # why it fell back


class PlanUnusable(ValueError):
    """The model's output is not a usable plan; the message says why."""


def plan_schema(max_sub_agents: int, tool_names: Sequence[str] = (), profile_names: Sequence[str] = ()) -> dict:
    """The JSON schema of ``submit_plan``'s arguments."""
    item: dict[str, Any] = {
        "type": "object",
        "properties": {"description": {"type": "string", "description": "What this agent must do, self-contained."}},
        "required": ["description"],
        "additionalProperties": False,
    }
    if profile_names:
        item["properties"]["profile"] = {"type": "string", "enum": sorted(profile_names),
                                         "description": "The agent profile best suited to the sub-task."}
    if tool_names:
        item["properties"]["tools"] = {"type": "array", "items": {"type": "string", "enum": sorted(tool_names)},
                                       "description": "The tools this agent needs (omit for all)."}
    return {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "description": "One sentence: how the task is split."},
            "sub_tasks": {"type": "array", "items": item, "minItems": 1, "maxItems": max_sub_agents},
        },
        "required": ["summary", "sub_tasks"],
        "additionalProperties": False,
    }


# Worked examples shown before the task: a small model (Qwen2.5-Coder-0.5B) answers a bare request
# in prose, but after two example calls it starts its reply as a call, which the embedded engine
# then decodes under the plan's grammar.
EXAMPLES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("What time is it in Tokyo?",
     {"summary": "A single look-up.", "sub_tasks": [{"description": "Find the current time in Tokyo."}]}),
    ("Write a haiku about autumn and a limerick about a cat.",
     {"summary": "Two independent writing tasks.",
      "sub_tasks": [{"description": "Write a haiku about autumn."}, {"description": "Write a limerick about a cat."}]}),
)


def planner_messages(description: str, max_sub_agents: int, tools: Sequence[tuple[str, str]] = (),
                     profile_names: Sequence[str] = ()) -> list[ChatMessage]:
    """The planner's prompt: instructions, the worked examples as earlier calls, then the task.
    ``tools`` are ``(name, description)`` pairs the agents may use."""
    system = PLANNER_PROMPT.format(limit=max_sub_agents, tool=PLAN_TOOL)
    if tools:
        system += "\n\nTools the agents can use:\n" + "\n".join(f"- {name}: {text}" for name, text in tools)
    if profile_names:
        system += "\n\nAgent profiles you may assign: " + ", ".join(sorted(profile_names))
    messages = [ChatMessage("system", system)]
    for n, (request, plan) in enumerate(EXAMPLES):
        call = ToolCall(f"example_{n}", PLAN_TOOL, plan)
        messages += [ChatMessage("user", request), ChatMessage("assistant", "", tool_calls=(call,)),
                     ChatMessage("tool", '{"result": "plan accepted"}', tool_call_id=call.id, name=PLAN_TOOL)]
    return [*messages, ChatMessage("user", description)]


def _json_in_text(text: str) -> Any:
    """A plan written as text: a ``submit_plan`` call in JSON, or the bare arguments object."""
    for call in parse_tool_calls(text):
        if call.name == PLAN_TOOL:
            return call.arguments
    cleaned = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    start = min((i for i in (cleaned.find("{"), cleaned.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise PlanUnusable("the model answered in text without a plan")
    try:
        value, _ = json.JSONDecoder().raw_decode(cleaned[start:])
    except json.JSONDecodeError as exc:
        raise PlanUnusable(f"the plan is not valid JSON: {exc.msg}") from None
    if isinstance(value, dict) and value.get("name") == PLAN_TOOL and isinstance(value.get("arguments"), dict):
        return value["arguments"]
    return value


def parse_plan(arguments: Any, max_sub_agents: int, tool_names: Sequence[str] = (),
               profile_names: Sequence[str] = ()) -> Plan:
    """A checked plan from the model's arguments (an object with ``sub_tasks``, or a bare list of
    sub-tasks or descriptions). Raises :class:`PlanUnusable` when no sub-task is left."""
    if isinstance(arguments, list):
        arguments = {"sub_tasks": arguments}
    if not isinstance(arguments, dict):
        raise PlanUnusable(f"the plan is a {type(arguments).__name__}, not an object")
    if "_unparsed" in arguments:
        raise PlanUnusable("the plan's arguments are not valid JSON")
    items = arguments.get("sub_tasks")
    if not isinstance(items, list):
        raise PlanUnusable("the plan has no sub_tasks list")
    known_tools = set(tool_names)
    profiles = {p.lower(): p for p in profile_names}
    sub_tasks: list[SubTaskSpec] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, str):
            item = {"description": item}
        if not isinstance(item, dict) or not isinstance(item.get("description"), str):
            continue
        description = item["description"].strip()[:MAX_SUB_TASK_CHARS]
        if not description or description.lower() in seen:
            continue
        seen.add(description.lower())
        profile = item.get("profile")
        profile = profiles.get(profile.strip().lower()) if isinstance(profile, str) else None
        tools = item.get("tools")
        chosen = tuple(dict.fromkeys(t for t in tools if isinstance(t, str) and t in known_tools)) \
            if isinstance(tools, list) else ()
        sub_tasks.append(SubTaskSpec(description, profile, chosen or None))
    if not sub_tasks:
        raise PlanUnusable("the plan has no usable sub-task")
    kept = tuple(sub_tasks[:max_sub_agents])
    summary = arguments.get("summary")
    summary = summary.strip()[:MAX_SUMMARY_CHARS] if isinstance(summary, str) else ""
    if not summary:
        summary = f"{len(kept)} sub-task(s): " + "; ".join(s.description[:80] for s in kept)
    return Plan(summary, kept)


def fallback_plan(description: str, reason: str) -> Plan:
    """One sub-task, the whole description: what runs when the model's plan is unusable."""
    return Plan(f"One sub-task, the whole description (the planner's output was unusable: {reason}).",
                (SubTaskSpec(description),), fallback=True, reason=reason)


async def make_plan(queue: InferenceQueue, description: str, *, max_sub_agents: int,
                    tools: Sequence[tuple[str, str]] = (), profile_names: Sequence[str] = (),
                    options: GenerationOptions | None = None) -> Plan:
    """Ask the model for a plan; fall back to one sub-task when its output is unusable or the engine
    fails (the sub-agent will then meet the engine's error itself)."""
    tool_names = [name for name, _ in tools]
    spec = ToolSpec(PLAN_TOOL, "Submit the plan: the sub-tasks that together accomplish the user's task.",
                    plan_schema(max_sub_agents, tool_names, profile_names))
    run_options = GenerationOptions(temperature=0.2, max_tokens=512) if options is None else options
    messages = planner_messages(description, max_sub_agents, tools, profile_names)
    try:
        reply = await queue.complete(messages, GenerationOptions(
            model=run_options.model, temperature=run_options.temperature, max_tokens=run_options.max_tokens,
            tools=(spec,)))
    except Exception as exc:  # noqa: BLE001 - an engine failure must not lose the task
        log.warning("the planner's model call failed: %s", exc)
        return fallback_plan(description, f"the model call failed: {type(exc).__name__}: {exc}")
    try:
        calls = [c for c in reply.tool_calls if c.name == PLAN_TOOL]
        arguments = calls[0].arguments if calls else _json_in_text(reply.content)
        return parse_plan(arguments, max_sub_agents, tool_names, profile_names)
    except PlanUnusable as exc:
        log.info("the planner's output was unusable (%s): %r", exc, reply.content[:300])
        return fallback_plan(description, str(exc))
