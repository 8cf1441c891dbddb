"""Explanations: the provenance of an answer, recorded while it is made (``GET /api/chat/{id}/explain``).

The chat service (:meth:`assistant.chat.service.ChatService.stream`) gives each turn a
:class:`TurnRecorder` when recording is on (``sovereign_intelligence.enabled``; otherwise
:data:`NO_RECORDING`, whose methods do nothing). The recorder notes what really happened, with times
in milliseconds from the turn's start, as :class:`Step` s:

========================  ==========================================================================
kind                      ``data``
========================  ==========================================================================
``defence``               the defence's verdict on the user's message (flagged, score, layers, hits)
``embedding``             the message embedded once (for retrieval and learning): ``dimensions``
``precache``              the precache asked for the memory context: ``hit``
``memories``              retrieval: ``threshold``, ``threshold_mode``, ``rag_limit``, ``budget_chars``,
                          ``context_chars``, ``candidates`` (each: id, type, preview, ``status``
                          injected / cut_budget / over_limit / below_threshold, ``similarity``,
                          ``cosine``, ``keyword``, ``importance``, ``freshness``, the weighted
                          ``parts`` and the final ``relevance``; an injected one its defence ``flagged``)
``insights``              dream insights surfaced into the prompt: ``insights`` (their lines), ``chars``
``cognitive_load``        the estimate: ``load``, ``components``, ``weights``, ``format``, ``details``
``prompt``                the prompt's ``sections`` (``name``, ``chars``), ``messages``, ``tools`` offered
``generation``            one model turn: engine, model, tokens, ``first_token_ms``, finish reason (with
                          tools, one per turn of the loop: the tools it asked for)
``tool``                  one tool call: ``tool``, ``arguments``, ``status``, ``duration_ms``, ``error``,
                          ``result_preview``, the defence's verdict on the result
``approval``              an approval requested for a tool call: ``approval_id``, ``tool``, ``arguments``
``learning``              the exchange learned or not: ``learned``, ``refused`` (the defence's reason)
========================  ==========================================================================

The :class:`Explanation` adds the engine and model, the token counts, the timings (recall, first
token, generation, learning, total), whether the precache served the memories, the turn's defence
summary (every text inspected and its verdict) and a summary of short sentences (:func:`summarise`).
It is stored sealed per user, keyed by the answer's message id (:mod:`assistant.extended.explain_store`).

Recording is cheap by construction: the numbers are the ones the turn computes anyway (retrieval
hands over its candidates, the tool loop its events); one sealed row is written per answer
(``benchmarks/explain_overhead.py`` measures the cost).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from assistant.memory.scoring import ARCHIVED_FACTOR, CUT_BUDGET, INJECTED, RelevanceWeights

PREVIEW_CHARS = 160
RESULT_PREVIEW_CHARS = 300


class StepKind(StrEnum):
    DEFENCE = "defence"
    EMBEDDING = "embedding"
    PRECACHE = "precache"
    MEMORIES = "memories"
    INSIGHTS = "insights"
    COGNITIVE_LOAD = "cognitive_load"
    PROMPT = "prompt"
    GENERATION = "generation"
    TOOL = "tool"
    APPROVAL = "approval"
    LEARNING = "learning"


@dataclass(frozen=True)
class Step:
    kind: StepKind
    label: str
    started_ms: float  # from the turn's start
    duration_ms: float
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "label": self.label, "started_ms": self.started_ms,
                "duration_ms": self.duration_ms, "data": self.data}

    @classmethod
    def of(cls, d: dict[str, Any]) -> Step:
        return cls(StepKind(d["kind"]), d["label"], d["started_ms"], d["duration_ms"], d.get("data") or {})


TIMINGS = ("recall_ms", "first_token_ms", "generation_ms", "learning_ms", "total_ms")


@dataclass(frozen=True)
class Explanation:
    message_id: str
    conversation_id: str
    created_at: str
    engine: str
    model: str
    tokens: dict[str, int]  # prompt, completion, total, cached_prompt
    timings: dict[str, float | None]  # TIMINGS, ms from the turn's start or long
    steps: tuple[Step, ...]
    summary: tuple[str, ...]
    precache_hit: bool | None = None  # None: no precache was asked
    finish_reason: str = "stop"
    defence: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "conversation_id": self.conversation_id,
                "created_at": self.created_at, "engine": self.engine, "model": self.model, "tokens": self.tokens,
                "timings": self.timings, "precache_hit": self.precache_hit, "finish_reason": self.finish_reason,
                "defence": self.defence, "steps": [s.as_dict() for s in self.steps], "summary": list(self.summary)}

    @classmethod
    def of(cls, d: dict[str, Any]) -> Explanation:
        return cls(d["message_id"], d["conversation_id"], d["created_at"], d["engine"], d["model"], d["tokens"],
                   d["timings"], tuple(Step.of(s) for s in d["steps"]), tuple(d["summary"]), d.get("precache_hit"),
                   d.get("finish_reason", "stop"), d.get("defence"))

    def step(self, kind: StepKind | str) -> list[Step]:
        return [s for s in self.steps if s.kind == kind]


def candidate(scored: Any, status: str, weights: RelevanceWeights) -> dict[str, Any]:
    """One memory in the running (a :class:`~assistant.memory.types.ScoredMemory`): the relevance
    formula term by term, so that ``(parts.similarity + parts.importance + parts.freshness) ×
    parts.factor`` is its ``relevance``. ``similarity`` is the one the formula used (the fused
    retrieval similarity, with neighbour context and date grounding), ``cosine`` and ``keyword`` what
    it was fused from."""
    m = scored.memory
    kind = getattr(m.memory_type, "value", m.memory_type)
    factor = ARCHIVED_FACTOR if kind == "Archived" else 1.0
    importance = weights.importance * float(m.importance)
    fresh = weights.freshness * float(scored.freshness)
    similar = float(scored.relevance) / factor - importance - fresh
    return {
        "id": str(m.id), "memory_type": str(kind), "preview": " ".join(m.content.split())[:PREVIEW_CHARS],
        "status": status,
        "similarity": round(similar / weights.similarity, 4) if weights.similarity else round(float(scored.fused), 4),
        "cosine": round(float(scored.similarity), 4), "keyword": round(float(scored.keyword), 4),
        "importance": round(float(m.importance), 4), "freshness": round(float(scored.freshness), 4),
        "parts": {"similarity": round(similar, 4), "importance": round(importance, 4), "freshness": round(fresh, 4),
                  "factor": factor},
        "relevance": round(float(scored.relevance), 4),
    }


def _preview(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= RESULT_PREVIEW_CHARS else text[:RESULT_PREVIEW_CHARS] + "…"


class TurnRecorder:
    """Collects the steps of one turn (see the module docstring); ``clock`` is ``time.perf_counter``
    (the tool loop's events carry the same clock)."""

    on = True

    def __init__(self, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.t0 = clock()
        self.steps: list[Step] = []
        self.timings: dict[str, float | None] = dict.fromkeys(TIMINGS)
        self.precache_hit: bool | None = None
        self.first_token: float | None = None
        self._model: dict[int, float] = {}
        self._tools: dict[str, tuple[float, Any]] = {}

    def ms(self, at: float) -> float:
        return round((at - self.t0) * 1000, 3)

    def add(self, kind: StepKind, label: str, start: float, end: float, data: dict[str, Any] | None = None) -> None:
        self.steps.append(Step(kind, label, self.ms(start), round(max(end - start, 0.0) * 1000, 3), data or {}))

    @contextmanager
    def span(self, kind: StepKind, label: str, data: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """A step from entering to leaving the block; fill the yielded dict with its data."""
        start, found = self.clock(), data if data is not None else {}
        try:
            yield found
        finally:
            self.add(kind, label, start, self.clock(), found)

    def time(self, name: str, start: float, end: float | None = None) -> None:
        """A timing: ``name`` (one of :data:`TIMINGS`) lasted from ``start`` to ``end`` (now)."""
        self.timings[name] = round(((self.clock() if end is None else end) - start) * 1000, 3)

    def token(self) -> None:
        """The first piece of the answer arrived (later calls change nothing)."""
        if self.first_token is None:
            self.first_token = self.clock()
            self.timings["first_token_ms"] = self.ms(self.first_token)

    def loop_event(self, event: Any) -> None:
        """One event of the tool loop (:class:`~assistant.chat.loop_events.LoopEvent`) as steps."""
        kind, d, at = event.type.value, event.data, event.at
        if kind == "model-start":
            self._model[event.iteration] = at
        elif kind == "message-delta":
            self.token()
        elif kind == "model-end":
            calls = d.get("tool_calls") or []
            self.add(StepKind.GENERATION, f"model turn {event.iteration}", self._model.pop(event.iteration, at), at,
                     {"iteration": event.iteration, "tool_calls": [c["name"] for c in calls],
                      "answered": not calls, "timeout": bool(d.get("timeout"))})
        elif kind == "tool-start":
            self._tools[d["id"]] = (at, d.get("arguments"))
        elif kind == "tool-end":
            start, arguments = self._tools.pop(d["id"], (at, None))
            self.add(StepKind.TOOL, d["name"], start, at, {
                "id": d["id"], "iteration": event.iteration, "tool": d["name"], "arguments": arguments,
                "status": d.get("status") or ("error" if d.get("error") else "ok"), "error": d.get("error"),
                "duration_ms": d.get("duration_ms", 0.0), "result_preview": _preview(d.get("result")),
                "defence": d.get("defence")})
        elif kind == "approval-required":
            self.add(StepKind.APPROVAL, f"approval for {d['name']}", at, at,
                     {"approval_id": d["approval_id"], "tool": d["name"], "arguments": d.get("arguments"),
                      "call_id": d["id"]})

    def tool_records(self, records: list[Any]) -> None:
        """Fill in what the loop's events leave out (the arguments and status of a call that was
        not run) from its records (:class:`~assistant.chat.tool_loop.ToolRecord`)."""
        by_id = {r.call.id: r for r in records}
        for i, s in enumerate(self.steps):
            r = by_id.get(s.data.get("id")) if s.kind is StepKind.TOOL else None
            if r is not None:
                self.steps[i] = Step(s.kind, s.label, s.started_ms, s.duration_ms, {
                    **s.data, "arguments": r.call.arguments, "status": r.status,
                    "duration_ms": round(r.duration_ms, 3), "review": r.review})

    def finish(self, *, message_id: str, conversation_id: str, created_at: str, engine: str, model: str,
               usage: Any, finish_reason: str, defence: dict[str, Any] | None) -> Explanation:
        self.timings["total_ms"] = self.ms(self.clock())
        tokens = {"prompt": usage.prompt, "completion": usage.completion, "total": usage.total,
                  "cached_prompt": getattr(usage, "cached_prompt", 0)}
        steps = tuple(sorted(self.steps, key=lambda s: s.started_ms))
        draft = Explanation(message_id, conversation_id, created_at, engine, model, tokens, dict(self.timings), steps,
                            (), self.precache_hit, finish_reason, defence)
        return replace(draft, summary=tuple(summarise(draft)))


class NullRecorder(TurnRecorder):
    """Recording off: every method does nothing (one shared instance, :data:`NO_RECORDING`)."""

    on = False

    def __init__(self) -> None:
        self.steps, self.timings, self.precache_hit, self.first_token = [], {}, None, None

    def add(self, *args: Any, **kwargs: Any) -> None:
        return None

    @contextmanager
    def span(self, kind: StepKind, label: str, data: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        yield {}

    def time(self, *args: Any, **kwargs: Any) -> None:
        return None

    def token(self) -> None:
        return None

    def loop_event(self, event: Any) -> None:
        return None

    def tool_records(self, records: list[Any]) -> None:
        return None


NO_RECORDING = NullRecorder()


def waterfall(e: Explanation) -> list[dict[str, Any]]:
    """The steps as ``{kind, label, start_ms, end_ms}`` rows in the order they began, for a waterfall
    (Gantt) chart of where an answer's time went; the last row is the whole turn (``total``)."""
    rows = [{"kind": s.kind.value, "label": s.label, "start_ms": s.started_ms,
             "end_ms": round(s.started_ms + s.duration_ms, 3)} for s in e.steps]
    total = e.timings.get("total_ms")
    if total is not None:
        rows.append({"kind": "total", "label": "the whole turn", "start_ms": 0.0, "end_ms": total})
    return rows


def _ms(value: float | None) -> str:
    return "?" if value is None else (f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms")


def summarise(e: Explanation) -> list[str]:
    """Short sentences a person reads first: the model and its tokens, the memories (in, cut, the
    threshold), insights, tools and approvals, the defence, the answer format and the learning."""
    out = [f"Answered by {e.model} ({e.engine}) in {_ms(e.timings.get('total_ms'))}: {e.tokens['prompt']} prompt "
           f"and {e.tokens['completion']} completion tokens"
           + (f", first token after {_ms(e.timings['first_token_ms'])}." if e.timings.get("first_token_ms") else ".")]
    for s in e.step(StepKind.MEMORIES):
        c = s.data.get("candidates", [])
        injected = [x for x in c if x["status"] == INJECTED]
        cut = [x for x in c if x["status"] == CUT_BUDGET]
        source = " (from the precache)" if s.data.get("precache") else ""
        if injected or cut:
            line = f"{len(injected)} memor{'y' if len(injected) == 1 else 'ies'} reached the prompt{source}"
            if injected:
                top = max(injected, key=lambda x: x["relevance"])
                line += f", the most relevant at {top['relevance']:.2f}"
            if cut:
                line += f"; {len(cut)} cut by the {s.data.get('budget_chars', 2000):,}-character budget"
            out.append(line + ".")
        else:
            out.append(f"No memory passed the retrieval threshold {s.data.get('threshold', '?')}{source}.")
    if e.precache_hit:
        out.append("The memory context came from the precache.")
    for s in e.step(StepKind.INSIGHTS):
        n = len(s.data.get("insights", []))
        if n:
            out.append(f"{n} dream insight{'' if n == 1 else 's'} surfaced.")
    tools = e.step(StepKind.TOOL)
    if tools:
        out.append("Tools: " + ", ".join(f"{t.data['tool']} ({t.data['status']}, {_ms(t.data.get('duration_ms'))})"
                                         for t in tools) + ".")
    approvals = e.step(StepKind.APPROVAL)
    if approvals:
        out.append(f"{len(approvals)} approval{'' if len(approvals) == 1 else 's'} requested: "
                   + ", ".join(a.data["tool"] for a in approvals) + ".")
    if e.defence is not None:
        if e.defence.get("flagged"):
            what = [i.get("label") or i.get("source") for i in e.defence.get("indirect", [])]
            if (e.defence.get("user") or {}).get("flagged"):
                what.insert(0, "the user's message")
            out.append("The defence flagged " + ", ".join(what) + ".")
        else:
            seen = e.defence.get("inspected", 0)
            out.append(f"The defence flagged nothing ({seen} text{'' if seen == 1 else 's'} inspected).")
    for s in e.step(StepKind.COGNITIVE_LOAD):
        out.append(f"Cognitive load {s.data['load']:.2f}: answer format {s.data['format']}.")
    for s in e.step(StepKind.LEARNING):
        if s.data.get("learned"):
            out.append("The exchange was learned into the user's memories.")
        elif s.data.get("refused"):
            out.append(f"Nothing was learned: {s.data['refused']}.")
    return out
