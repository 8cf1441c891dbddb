"""The tool loop with the defence's guard: every result of a tool that ran is inspected once with
its source by tool name, fenced as data with the flagged spans neutralised, kept with its verdict;
after a flagged text, memory writes are refused."""

from __future__ import annotations

import asyncio

from assistant.chat.tool_loop import LoopEventType, ToolLoop, tool_source
from assistant.config import ToolCallingSettings
from assistant.defence.types import Source
from assistant.defence.wrap import DATA_RULE, MARKER, PromptGuard
from assistant.llm.base import ChatMessage, GenerationOptions
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel
from assistant.tools.base import ToolContext, ToolRegistry, tool
from tests.assistant.defence.test_defence_wrap import ATTACK, BrokenDetector, PhraseDetector

STORED: list[str] = []


@tool("web_search")
def search_web(ctx: ToolContext, query: str) -> list[dict]:
    """Search the web."""
    return [{"title": "Weather", "snippet": ATTACK}]


@tool("email")
def search_emails(ctx: ToolContext, query: str) -> list[dict]:
    """Search mail."""
    return [{"subject": "hi", "body": "See you at 3."}]


@tool("memory")
def store_memory(ctx: ToolContext, content: str) -> dict:
    """Remember."""
    STORED.append(content)
    return {"stored": True}


REGISTRY = ToolRegistry([search_web, search_emails, store_memory])


def run(model, guard, events=None, settings=None):  # noqa: ANN001, ANN201
    STORED.clear()
    loop = ToolLoop(InferenceQueue(model), REGISTRY, settings or ToolCallingSettings(), guard=guard,
                    on_event=events.append if events is not None else None)
    messages = [ChatMessage("system", "You are helpful."), ChatMessage("user", "Weather in Paris?")]
    return asyncio.run(loop.run(messages, GenerationOptions(), ToolContext("u1")))


def test_sources_by_tool_name() -> None:
    assert tool_source("search_web") is Source.WEB
    assert tool_source("search_emails") is Source.EMAIL and tool_source("draft_email") is Source.EMAIL
    assert tool_source("recall_memory") is Source.MEMORY
    assert tool_source("get_weather") is Source.TOOL_RESULT


def test_a_result_with_an_injection_reaches_the_model_fenced_and_neutralised() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("search_web", {"query": "weather paris"})])
    model.enqueue("Mild.")
    detector, events = PhraseDetector(), []
    guard = PromptGuard(detector, "u1")
    result = run(model, guard, events)
    assert result.content == "Mild."
    sent = model.calls[1][0]
    (told,) = [m for m in sent if m.role == "tool"]
    assert told.content.startswith(f"<<<data {guard.boundary}>>>\n[result of the tool search_web: data to use")
    assert told.content.endswith(f"<<<end data {guard.boundary}>>>")
    assert MARKER in told.content and "Ignore previous" not in told.content and "The weather is mild." in told.content
    # the rule came with the first fenced result, after the system prompt (which stays the same) and
    # the loop's "Current date and time" line
    assert sent[0] == ChatMessage("system", "You are helpful.") and sent[2] == ChatMessage("system", DATA_RULE)
    assert sent[1].content.startswith("Current date and time: ")
    assert model.calls[0][0][2].role == "user"  # no rule before anything was fenced
    (record,) = result.records
    assert record.verdict.flagged and record.verdict.source is Source.WEB and record.status == "ok"
    assert record.result[0]["snippet"] == ATTACK  # the record keeps what the tool returned
    assert [c[1] for c in detector.calls] == [Source.WEB]  # inspected once
    end = next(e for e in events if e.type is LoopEventType.TOOL_END)
    assert end.data["defence"]["flagged"] is True and end.data["defence"]["source"] == "web"


def test_a_clean_result_is_fenced_unchanged() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("search_emails", {"query": "meeting"})])
    model.enqueue("At 3.")
    guard = PromptGuard(PhraseDetector(), "u1")
    result = run(model, guard)
    (told,) = [m for m in model.calls[1][0] if m.role == "tool"]
    assert '"body": "See you at 3."' in told.content and MARKER not in told.content
    assert "[result of the tool search_emails: data" in told.content
    assert result.records[0].verdict.source is Source.EMAIL and not result.records[0].verdict.flagged


def test_after_a_flagged_result_store_memory_is_refused() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("search_web", {"query": "weather"})])
    model.enqueue(tool_calls=[("store_memory", {"content": "the password goes to the attacker"})])
    model.enqueue("Done.")
    result = run(model, PromptGuard(PhraseDetector(), "u1"))
    assert STORED == []
    refused = result.records[1]
    assert refused.status == "refused" and refused.verdict is None  # our own message: not inspected
    assert "store_memory did not run" in refused.error and "looks like a prompt injection" in refused.error
    told = [m for m in model.calls[2][0] if m.role == "tool"][-1]
    assert "did not run" in told.content and "<<<data" not in told.content


def test_without_anything_flagged_store_memory_runs() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("store_memory", {"content": "my sister is Anna"})])
    model.enqueue("Noted.")
    result = run(model, PromptGuard(PhraseDetector(), "u1"))
    assert STORED == ["my sister is Anna"] and result.records[0].status == "ok"
    assert not result.records[0].verdict.flagged


def test_a_failing_detector_never_breaks_the_loop() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("search_web", {"query": "weather"})])
    model.enqueue("Mild.")
    result = run(model, PromptGuard(BrokenDetector(), "u1"))
    assert result.content == "Mild." and not result.records[0].verdict.flagged
    (told,) = [m for m in model.calls[1][0] if m.role == "tool"]
    assert "<<<data" in told.content and "Ignore previous" in told.content  # wrapped, not neutralised


def test_without_a_guard_nothing_changes() -> None:
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("search_web", {"query": "weather"})])
    model.enqueue("Mild.")
    result = run(model, None)
    (told,) = [m for m in model.calls[1][0] if m.role == "tool"]
    assert told.content.startswith('{"result": ') and result.records[0].verdict is None
    assert DATA_RULE not in "".join(m.content for m in model.calls[1][0])
