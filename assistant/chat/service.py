"""The chat service: builds the prompt, runs the model through the queue, persists the exchange.

``chat`` returns the whole reply; ``stream`` yields typed events (``message`` deltas, then one
``done``) that the API turns into Server-Sent Events.

With tool calling enabled and tools registered, a free-form message goes through the tool loop
(:mod:`assistant.chat.tool_loop`): the final answer still streams as ``message`` deltas, and what the
tools did is kept (:mod:`assistant.chat.tool_runs`) and returned with ``done``. Calls that need
approval become approval requests of the chat's user (:mod:`assistant.chat.approvals`). A message that
starts with ``/`` is a command, not a question, and never reaches a tool; ``enabled_tools: []``
turns tools off for one request.

``use_memories=False`` keeps the user's memories out of the prompt and ``learn=False`` learns nothing
from the exchange (the exchange itself is still stored in its conversation): the voice pipeline sets
both for a speaker it has not confidently identified (:mod:`assistant.voice.service`).

Agent profiles (:mod:`assistant.agents.profiles`): the profiles a message names — its
``mentioned_profile_ids`` in order, then its ``@name`` mentions in order, each once — apply to
that message only. The first is primary. Its system block (rendered template, style, skills,
autonomy; other profiles add one line each) is appended to the system prompt (the request's
``system_prompt`` or the configured one), never replacing it. Generation options: a request value
wins over the primary profile's override, which wins over its verbosity's max_tokens hint, which
wins over the configuration. Tools: the request's ``enabled_tools`` when given; otherwise, when
some of the primary profile's skills name registered tools, only those tools; otherwise all —
narrowed to the ones the message is about only with ``[tool_calling] selection = "auto"``.
A request resolves its profiles once (:meth:`ChatService.resolve_profiles`, one store query) into
one :class:`ProfileApplication` that validation, the prompt, the options and the tools all read.

The prompt-injection defence (``defence``, a :class:`~assistant.defence.types.Detector`; build_services
sets it, :class:`NoDefence` by default) acts through one :class:`~assistant.defence.wrap.PromptGuard`
per request. The user's message is inspected and never blocked. Retrieved memories (each inspected
once, verdicts cached by user, memory id and content hash), surfaced dream insights and every tool
result reach the model fenced as data with the flagged spans neutralised, and the system prompt then
carries :data:`~assistant.defence.wrap.DATA_RULE`. Once anything flagged was seen in the turn, memory
writes by tools are refused (:mod:`assistant.chat.tool_loop`), and the exchange is not learned
(:func:`assistant.memory.learning.learning_refusal`). What was flagged outside a tool is recorded with
the reply's tool runs as a ``(defence)`` run (:mod:`assistant.chat.tool_runs`), and the turn's summary
is the reply's ``defence``.

Explanations (:mod:`assistant.extended.explain`; build_services sets ``explanations`` while
``sovereign_intelligence.enabled``): each turn gets a :class:`~assistant.extended.explain.TurnRecorder`
that notes what really happened (the defence, the embedding, the precache, every memory in the
running with its scores and whether it was injected or cut, insights, the cognitive load, the
prompt's sections and sizes, each model turn, tool call and approval, the learning, the timings);
the explanation is stored with the answer, keyed by its message id. Without a store nothing is
recorded (:data:`~assistant.extended.explain.NO_RECORDING`).

Cognitive load (:mod:`assistant.extended.cognitive`; ``cognitive`` while ``cognitive_load.enabled``):
the user's load is estimated before the prompt is built; its answer format's instruction (none for
Narrative) opens the second part of the system prompt (:func:`~assistant.chat.recall.system_messages`),
and ``load_signal`` (the signal bus's ``CognitiveLoadEstimate``) is told the estimate of each answer.

Precache (``precache``, a :class:`~assistant.chat.recall.PrecacheLookup`): asked before retrieval;
a hit's ``(context, used)`` stands for :meth:`MemoryStore.retrieve_for_prompt`'s.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import numpy as np

from assistant.agents.profiles import ProfileApplication, ProfileStore
from assistant.chat.approvals import ToolApprovals
from assistant.chat.call_review import ToolCallCounters
from assistant.chat.conversations import ConversationStore
from assistant.chat.recall import (
    PrecacheLookup,
    TurnMemory,
    UsedMemory,
    insight_block,
    memory_block,
    system_messages,
)
from assistant.chat.tool_loop import LoopEventType, LoopResult, ToolLoop, ToolRecord
from assistant.chat.tool_runs import DEFENCE_TOOL, ToolRun, ToolRunStore
from assistant.config import InferenceSettings, MemorySettings, ToolCallingSettings
from assistant.defence.types import Detector, NoDefence, Source
from assistant.defence.wrap import DATA_RULE, Inspected, PromptGuard, VerdictCache
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.extended.cognitive import CognitiveLoad, LoadEstimate
from assistant.extended.explain import NO_RECORDING, StepKind, TurnRecorder, candidate
from assistant.extended.explain_store import ExplanationStore
from assistant.guarded import EmbedderUnavailable
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, TokenUsage, ToolCall
from assistant.llm.queue import InferenceQueue
from assistant.memory.learning import learning_refusal
from assistant.memory.scoring import CONTEXT_BUDGET_CHARS, INJECTED, PREAMBLE
from assistant.memory.store import MemoryStore
from assistant.observability.metrics import Metrics
from assistant.storage.analytics import Analytics
from assistant.tools.catalog import Toolbox
from assistant.tools.selection import ToolSelector

log = logging.getLogger("assistant.chat")


@dataclass(frozen=True)
class ChatRequest:
    message: str
    conversation_id: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    mentioned_profile_ids: tuple[str, ...] = ()
    enabled_tools: tuple[str, ...] | None = None
    use_memories: bool = True  # False: no memory reaches the prompt (a voice speaker not confidently identified)
    learn: bool = True  # False: nothing of the exchange is learned into the user's memories


@dataclass(frozen=True)
class ChatReply:
    id: str
    conversation_id: str
    content: str
    model: str
    usage: TokenUsage
    created_at: str
    role: str = "assistant"
    finish_reason: str = "stop"
    tool_runs: tuple[ToolRun, ...] = ()
    defence: dict[str, Any] | None = None  # the turn's defence summary (ChatService._defence_summary)
    memories: tuple[UsedMemory, ...] = ()  # the memories that reached the prompt


class ChatEventType(StrEnum):
    MESSAGE = "message"
    DONE = "done"


@dataclass(frozen=True)
class MessageEvent:
    delta: str
    type: ChatEventType = field(default=ChatEventType.MESSAGE, init=False)


@dataclass(frozen=True)
class DoneEvent:
    usage: TokenUsage
    message_id: str
    conversation_id: str
    model: str
    finish_reason: str
    created_at: str
    tool_runs: tuple[ToolRun, ...] = ()
    defence: dict[str, Any] | None = None
    memories: tuple[UsedMemory, ...] = ()  # the memories that reached the prompt
    type: ChatEventType = field(default=ChatEventType.DONE, init=False)


ChatEvent = MessageEvent | DoneEvent


class ChatService:
    def __init__(
        self,
        queue: InferenceQueue,
        conversations: ConversationStore,
        settings: InferenceSettings,
        metrics: Metrics,
        analytics: Analytics | None = None,
        *,
        profiles: ProfileStore | None = None,
        memory: MemoryStore | None = None,
        memory_settings: MemorySettings | None = None,
        toolbox: Toolbox | None = None,
        tool_settings: ToolCallingSettings | None = None,
        tool_runs: ToolRunStore | None = None,
        approvals: ToolApprovals | None = None,
    ):
        self.approvals = approvals
        self.memory = memory
        self.memory_settings = memory_settings or MemorySettings()
        self.toolbox = toolbox
        self.tool_settings = tool_settings or ToolCallingSettings()
        self.selector = ToolSelector(memory.embedder if memory is not None else None,
                                     self.tool_settings.selection_threshold, self.tool_settings.max_offered_tools)
        self.tool_runs = tool_runs
        self.profiles = profiles
        self.queue = queue
        self.conversations = conversations
        self.settings = settings
        self.metrics = metrics
        self.analytics = analytics
        # Dream mode (build_services): who was active when (the idle gate), and the "Did you know?"
        # context of confirmed insights: (user, message, query vector, characters left) -> text.
        self.activity: Callable[[str], None] | None = None
        self.surfacing: Callable[[str, str, np.ndarray | None, int], str] | None = None
        # The prompt-injection defence (build_services sets it from [defence]); ``neutralise`` is
        # [defence] neutralise; memory verdicts are cached across requests.
        self.defence: Detector = NoDefence()
        self.neutralise = True
        self.memory_verdicts = VerdictCache()
        # What the tool loop did to calls (prerequisites, repairs, changed arguments), for /metrics.
        self.tool_counters = ToolCallCounters()
        # Extended features (build_services sets them; None: off). Explanations recorded per answer, the
        # cognitive load estimate and its signal (user id, estimate, answer's message id), the precache.
        self.explanations: ExplanationStore | None = None
        self.cognitive: CognitiveLoad | None = None
        self.load_signal: Callable[[str, LoadEstimate, str], None] | None = None
        self.precache: PrecacheLookup | None = None
        # The user's active LoRA adapter (a GGUF path; None: the base model), applied to that user's
        # answers and tool-loop calls through GenerationOptions.adapter (build_services sets it to
        # TrainingService.active_gguf when LoRA training is on; engines without adapters ignore it).
        self.adapter_for: Callable[[str], Path | None] | None = None

    @property
    def tool_names(self) -> list[str]:
        return self.toolbox.registry.names() if self.toolbox is not None else []

    def uses_tools(self, request: ChatRequest) -> bool:
        """Whether this request goes through the tool loop (see the module docstring)."""
        return (
            self.tool_settings.enabled
            and bool(self.tool_names)
            and request.enabled_tools != ()
            and not request.message.lstrip().startswith("/")
        )

    def offered_tools(self, request: ChatRequest, profile_tools: tuple[str, ...] | None = None,
                      query_vector: Any = None) -> tuple[str, ...] | None:
        """The tools this message is offered, or None for the plain chat flow. Named tools
        (``enabled_tools``) are offered as asked; otherwise those of the primary profile's skills or
        all registered (``selection = "all"``, the default), or with ``selection = "auto"`` only the
        ones the message is about (:mod:`assistant.tools.selection`)."""
        if not self.uses_tools(request):
            return None
        if request.enabled_tools is not None:
            return request.enabled_tools
        if self.tool_settings.selection == "all":
            return profile_tools if profile_tools is not None else tuple(self.tool_names)
        candidates = self.toolbox.registry.tools(profile_tools)
        chosen = self.selector.select(request.message, candidates, query_vector)
        return tuple(chosen) if chosen else None

    def validate(self, request: ChatRequest, profiles: ProfileApplication | None = None) -> None:
        """Refuse references to things that do not exist, naming each one: unknown tools, and the
        profile ids ``profiles`` (:meth:`resolve_profiles`) did not find among the user's profiles
        (another user's profile is unknown). Without ``profiles`` every named id is unknown."""
        fields = []
        names = set(self.tool_names)
        for tool in request.enabled_tools or ():
            if tool not in names:
                known = ", ".join(sorted(names)) or "none are registered"
                fields.append({"field": "enabled_tools", "error": f"unknown tool {tool!r} (registered: {known})"})
        unknown = profiles.unknown if profiles is not None else tuple(dict.fromkeys(request.mentioned_profile_ids))
        for profile in unknown:
            fields.append({"field": "mentioned_profile_ids", "error": f"unknown agent profile {profile!r}"})
        limit = self.settings.context_length
        if request.max_tokens is not None and request.max_tokens > limit:
            fields.append({"field": "max_tokens", "error": f"must be at most the context length {limit}"})
        if fields:
            raise ValidationFailed("request validation failed: " + "; ".join(f["error"] for f in fields), fields)

    def resolve_profiles(self, user_id: UUID | str, request: ChatRequest) -> ProfileApplication:
        """The profiles ``request`` names (ids, then ``@name`` mentions), applied to its message,
        with the ids that are not the user's in ``unknown``: one visit to the store per request."""
        if self.profiles is None:
            return ProfileApplication(unknown=tuple(dict.fromkeys(request.mentioned_profile_ids)))
        return self.profiles.for_message(user_id, request.mentioned_profile_ids, request.message,
                                         registered_tools=self.tool_names)

    def _prompt(self, user_id: UUID | str, request: ChatRequest, memory_context: str = "",
                separate_context: bool = False, profiles: ProfileApplication | None = None,
                data_rule: bool = False, instruction: str = "",
                sections: dict[str, int] | None = None) -> list[ChatMessage]:
        """System prompt (+ profiles, + memories), history, the message. ``instruction`` is the
        cognitive load's answer format (:mod:`assistant.extended.cognitive`); ``sections``, when
        given, receives the size in characters of each part (the explanation). With ``separate_context``
        the memories are a second system message: chat templates put the tool list right after the
        first one, so the long prefix of system prompt and tools stays the same from request to
        request and is served from llama.cpp's KV cache instead of being evaluated again. With
        ``data_rule`` (fenced memories follow) :data:`DATA_RULE` precedes the memories; the tool loop
        adds it the same way when the first fenced tool result reaches the prompt."""
        base = system = request.system_prompt if request.system_prompt is not None else self.settings.system_prompt
        if profiles is not None and profiles.system:
            system = "\n\n".join(part for part in (system, profiles.system) if part)
        messages = system_messages(system, memory_context, separate=separate_context, data_rule=data_rule,
                                   instruction=instruction)
        history: list[ChatMessage] = []
        if request.conversation_id is not None:
            history = self.conversations.history(request.conversation_id, self.settings.history_messages)
            messages += history
        messages.append(ChatMessage("user", request.message))
        if sections is not None:
            sections.update({
                "system_prompt": len(base or ""), "profile_block": len(profiles.system or "") if profiles else 0,
                "cognitive_load": len(instruction), "data_rule": len(DATA_RULE) if data_rule else 0,
                "memory_context": 0, "insights": 0,  # filled in from the turn by the caller
                "history": sum(len(m.content or "") for m in history), "message": len(request.message)})
        return messages

    def _options(self, request: ChatRequest, profiles: ProfileApplication | None = None,
                 user_id: UUID | str | None = None) -> GenerationOptions:
        """Request values, else the primary profile's, else the configuration's; with ``user_id``,
        the user's active LoRA adapter (``adapter_for``)."""
        options = GenerationOptions(temperature=self.settings.temperature, max_tokens=self.settings.max_tokens)
        if profiles is not None:
            options = profiles.options(options, self.settings.context_length)
        adapter = self.adapter_for(str(user_id)) if self.adapter_for is not None and user_id is not None else None
        return replace(
            options,
            model=options.model if request.model is None else request.model,
            temperature=options.temperature if request.temperature is None else request.temperature,
            max_tokens=options.max_tokens if request.max_tokens is None else request.max_tokens,
            adapter=str(adapter) if adapter is not None else options.adapter,
        )

    async def stream(self, user_id: UUID | str, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        """Yield ``MessageEvent``s then one ``DoneEvent``; the exchange is stored (and learned
        from, unless ``request.learn`` is False) before ``done``. Relevant memories are injected into
        the system prompt, unless ``request.use_memories`` is False."""
        rec = self.recorder()
        profiles = self.resolve_profiles(user_id, request)
        self.validate(request, profiles)
        self.touch(user_id)
        if request.conversation_id is not None:
            self.conversations.get(user_id, request.conversation_id)  # 404 before any model work
        recall_start = time.perf_counter()
        turn = await self.recall(user_id, request.message, use_memories=request.use_memories, learn=request.learn,
                                 recorder=rec)
        rec.time("recall_ms", recall_start)
        enabled = None
        if not turn.degraded:
            try:
                enabled = self.offered_tools(request, profiles.tools, turn.query_vector)
            except EmbedderUnavailable as exc:
                log.warning("chat without memories: %s", exc.message)
                turn.drop()
        if turn.degraded:  # answer without memories (and with every tool)
            enabled = (request.enabled_tools or profiles.tools or tuple(self.tool_names)) \
                if self.uses_tools(request) else None
        guard, context = turn.guard, turn.context
        use_tools = enabled is not None
        before_tools = list(guard.seen)
        load = self.estimate_load(user_id, request, rec)
        sections: dict[str, int] | None = {} if rec.on else None
        with rec.span(StepKind.PROMPT, "prompt built") as data:
            messages = self._prompt(user_id, request, context, separate_context=use_tools, profiles=profiles,
                                    data_rule=bool(context), instruction=load.instruction if load else "",
                                    sections=sections)
            if sections is not None:
                sections.update(memory_context=turn.memory_chars, insights=turn.insight_chars)
                data.update(sections=[{"name": k, "chars": v} for k, v in sections.items()],
                            chars=sum(len(m.content or "") for m in messages), messages=len(messages),
                            tools=list(enabled) if enabled is not None else [])
        options = self._options(request, profiles, user_id)
        start = time.perf_counter()
        parts: list[str] = []
        finished: Finished | None = None
        loop_result: LoopResult | None = None
        ok = False
        # Known before the run, so that tool-call approval requests can name the reply and its conversation.
        conversation_id, reply_id = request.conversation_id or str(uuid4()), str(uuid4())
        try:
            if use_tools:
                gate = self.approvals.gate(user_id, conversation_id, reply_id) if self.approvals is not None else None
                loop = ToolLoop(self.queue, self.toolbox.registry, self.tool_settings, approvals=gate, guard=guard,
                                counters=self.tool_counters)
                context_for_tools = self.toolbox.context(user_id)
                async for event in loop.stream(messages, options, context_for_tools, enabled):
                    rec.loop_event(event)
                    if event.type is LoopEventType.MESSAGE_DELTA:
                        parts.append(event.data["delta"])
                        yield MessageEvent(event.data["delta"])
                    elif event.type is LoopEventType.RUN_END:
                        loop_result = event.data["result"]
                finished = Finished(loop_result.model or options.model or self.settings.model, loop_result.usage,
                                    loop_result.finish_reason)
            else:
                async for event in self.queue.stream(messages, options):
                    if isinstance(event, Delta):
                        rec.token()
                        parts.append(event.text)
                        yield MessageEvent(event.text)
                    elif isinstance(event, Finished):
                        finished = event
                if rec.on and finished is not None:
                    rec.add(StepKind.GENERATION, "answer", start, time.perf_counter(), {
                        "engine": self.settings.backend, "model": finished.model,
                        "prompt_tokens": finished.usage.prompt, "completion_tokens": finished.usage.completion,
                        "cached_prompt_tokens": finished.usage.cached_prompt,
                        "first_token_ms": rec.timings.get("first_token_ms"), "finish_reason": finished.finish_reason})
            if finished is None:
                raise ServiceUnavailableError("the inference engine ended without finishing the answer")
            if finished.finish_reason == "timeout" and loop_result is None:
                raise ServiceUnavailableError(
                    f"generation passed the request timeout of {self.queue.request_timeout_secs:g} s"
                )
            ok = True
        finally:
            self.account(options, start, finished, ok)
        rec.time("generation_ms", start)
        reply = "".join(parts)
        conversation_id, message_id, created_at = self.conversations.record_exchange(
            user_id=user_id,
            conversation_id=conversation_id,
            reply_id=reply_id,
            user_message=request.message,
            reply=reply,
            model=finished.model,
            prompt_tokens=finished.usage.prompt,
            completion_tokens=finished.usage.completion,
        )
        runs: tuple[ToolRun, ...] = ()
        records = _flagged_records(before_tools) + (loop_result.records if loop_result is not None else [])
        if records and self.tool_runs is not None:
            runs = tuple(self.tool_runs.record(user_id, conversation_id, message_id, records))
        learning = time.perf_counter()
        with rec.span(StepKind.LEARNING, "learning") as data:
            refusal = await self.learn_from(user_id, turn, request.message, reply, conversation_id)
            data.update(learned=turn.learned, refused=refusal, allowed=turn.learn)
        rec.time("learning_ms", learning)
        defence = _defence_summary(guard, refusal)
        if rec.on:
            if loop_result is not None:
                rec.tool_records(loop_result.records)
            self.save_explanation(user_id, rec, message_id, conversation_id, created_at, finished, defence, guard)
        if load is not None and self.load_signal is not None:
            try:
                self.load_signal(str(user_id), load, message_id)
            except Exception:  # a signal never fails an answer
                log.exception("the cognitive load signal failed")
        yield DoneEvent(
            finished.usage, message_id, conversation_id, finished.model, finished.finish_reason, created_at, runs,
            defence, turn.memories,
        )

    async def chat(self, user_id: UUID | str, request: ChatRequest) -> ChatReply:
        parts: list[str] = []
        async for event in self.stream(user_id, request):
            if isinstance(event, MessageEvent):
                parts.append(event.delta)
            else:
                done = event
        return ChatReply(
            id=done.message_id,
            conversation_id=done.conversation_id,
            content="".join(parts),
            model=done.model,
            usage=done.usage,
            created_at=done.created_at,
            finish_reason=done.finish_reason,
            tool_runs=done.tool_runs,
            defence=done.defence,
            memories=done.memories,
        )

    def recorder(self) -> TurnRecorder:
        """The recorder of a new turn: a real one while explanations are kept, else the null one."""
        return TurnRecorder() if self.explanations is not None else NO_RECORDING

    def estimate_load(self, user_id: UUID | str, request: ChatRequest,
                      rec: TurnRecorder = NO_RECORDING) -> LoadEstimate | None:
        """The user's cognitive load before this message is answered (None while off, or when the
        estimate fails: the answer then keeps the configured prompt)."""
        if self.cognitive is None:
            return None
        with rec.span(StepKind.COGNITIVE_LOAD, "cognitive load estimated") as data:
            try:
                estimate = self.cognitive.estimate(user_id, request.message, request.conversation_id)
            except Exception:
                log.exception("cognitive load not estimated")
                return None
            if rec.on:
                data.update(estimate.as_dict())
        return estimate

    def save_explanation(self, user_id: UUID | str, rec: TurnRecorder, message_id: str, conversation_id: str,
                         created_at: str, finished: Finished, defence: dict[str, Any], guard: PromptGuard) -> None:
        """Store the turn's explanation; a failure is logged, never the answer's."""
        try:
            explanation = rec.finish(
                message_id=message_id, conversation_id=conversation_id, created_at=created_at,
                engine=self.settings.backend, model=finished.model, usage=finished.usage,
                finish_reason=finished.finish_reason,
                defence={**defence, "verdicts": [i.as_dict() for i in guard.seen]})
            self.explanations.save(user_id, explanation)
        except Exception:
            log.exception("the explanation of message %s was not recorded", message_id)

    def account(self, options: GenerationOptions, start: float, finished: Finished | None, ok: bool,
                user: str | None = None) -> None:
        """Count one generation begun at ``start`` (``time.perf_counter``) in the metrics and the
        analytics table; ``user`` (an OpenAI client's ``user`` field) is counted under ``openai_user``."""
        duration_ms = (time.perf_counter() - start) * 1000
        tokens = finished.usage.total if finished else 0
        self.metrics.observe_inference(duration_ms, tokens, ok)
        if self.analytics is not None:
            self.analytics.record("inference", options.model or self.settings.model, duration_ms, ok, tokens)
            if user:
                self.analytics.record("openai_user", user[:256], duration_ms, ok, tokens)

    def touch(self, user_id: UUID | str) -> None:
        """Tell dream mode the user is active (its idle gate)."""
        if self.activity is not None:
            self.activity(str(user_id))

    def new_guard(self, user_id: UUID | str) -> PromptGuard:
        """The defence of one turn: the configured detector, the memory verdicts cached across turns."""
        return PromptGuard(self.defence, str(user_id), self.neutralise, self.memory_verdicts)

    async def recall(self, user_id: UUID | str, message: str, *, use_memories: bool = True,
                     learn: bool = True, recorder: TurnRecorder = NO_RECORDING) -> TurnMemory:
        """The memory steps before the model runs (:mod:`assistant.chat.recall`): the turn's guard
        inspects ``message``; with memory on it is embedded once, and (with ``use_memories`` and
        ``enable_rag``) the user's relevant memories (from the precache when it has them) and surfaced
        insights become the fenced memory context. An unavailable embedder degrades the turn (no
        memories, nothing learned). ``recorder`` notes each step (the explanation)."""
        rec = recorder
        memory_on = self.memory is not None and self.memory_settings.enabled
        retrieve = memory_on and self.memory_settings.enable_rag and use_memories
        turn = TurnMemory(self.new_guard(user_id), learn=memory_on and self.memory_settings.enable_learning and learn)
        guard = turn.guard
        with rec.span(StepKind.DEFENCE, "user message inspected") as data:
            verdict = await asyncio.to_thread(guard.inspect, message, Source.USER, "user message")
            if rec.on:
                data.update(verdict.as_dict())
        try:
            if retrieve or turn.learn:
                with rec.span(StepKind.EMBEDDING, "message embedded") as data:
                    turn.query_vector = (await asyncio.to_thread(self.memory.embedder.embed, [message]))[0]
                    data["dimensions"] = len(turn.query_vector)
            if retrieve:
                hit = None
                if self.precache is not None:
                    with rec.span(StepKind.PRECACHE, "precache lookup") as data:
                        hit = await asyncio.to_thread(self.precache.lookup, str(user_id), message, turn.query_vector)
                        data["hit"] = hit is not None
                    rec.precache_hit = hit is not None
                candidates: list | None = [] if rec.on and hit is None else None
                with rec.span(StepKind.MEMORIES, "memories retrieved") as data:
                    if hit is not None:
                        context, used = hit
                    elif candidates is not None:
                        context, used = await asyncio.to_thread(
                            partial(self.memory.retrieve_for_prompt, candidates=candidates),
                            str(user_id), message, turn.query_vector)
                    else:
                        context, used = await asyncio.to_thread(
                            self.memory.retrieve_for_prompt, str(user_id), message, turn.query_vector
                        )
                    left = CONTEXT_BUDGET_CHARS - max(0, len(context) - len(PREAMBLE) - 1)
                    context = await asyncio.to_thread(memory_block, guard, used) if context else ""
                    turn.memory_chars = len(context)
                    if rec.on:
                        data.update(self._retrieval_data(used, candidates, hit is not None, guard, len(context)))
                if self.surfacing is not None:
                    with rec.span(StepKind.INSIGHTS, "insights surfaced") as data:
                        extra = await asyncio.to_thread(self.surfacing, str(user_id), message, turn.query_vector,
                                                        left)
                        lines = extra.split("\n")[1:] if extra else []
                        extra = await asyncio.to_thread(insight_block, guard, extra) if extra else ""
                        turn.insight_chars = len(extra)
                        data.update(insights=[line for line in lines if line.strip()], chars=len(extra),
                                    budget_left=left)
                    context = "\n\n".join(part for part in (context, extra) if part)
                turn.context, turn.used = context, used
        except EmbedderUnavailable as exc:
            log.warning("chat without memories: %s", exc.message)
            now = time.perf_counter()
            rec.add(StepKind.EMBEDDING, "embedder unavailable: answered without memories", now, now,
                    {"error": exc.message})
            turn.drop()
        return turn

    def _retrieval_data(self, used: list, candidates: list | None, from_precache: bool, guard: PromptGuard,
                        context_chars: int) -> dict[str, Any]:
        """The memories step of the explanation: the settings that decided, then every memory in the
        running with its scores, what became of it, and (injected ones) the defence's verdict."""
        s = self.memory_settings
        tuned = self.memory.params_for(guard.user_id or "")  # the user's tuned retrieval parameters, if any
        weights = tuned.weights
        pairs = candidates if candidates is not None else [(m, INJECTED) for m in used]
        flagged = {i.ref: i.verdict.flagged for i in guard.seen if i.source is Source.MEMORY and i.ref}
        entries = []
        for scored, status in pairs:
            entry = candidate(scored, status, weights)
            if status == INJECTED:
                entry["flagged"] = flagged.get(entry["id"], False)
            entries.append(entry)
        return {"threshold": tuned.rag_threshold, "threshold_mode": s.rag_threshold_mode, "rag_limit": tuned.rag_limit,
                "budget_chars": CONTEXT_BUDGET_CHARS, "context_chars": context_chars, "precache": from_precache,
                "candidates": entries}

    async def learn_from(self, user_id: UUID | str, turn: TurnMemory, message: str, reply: str,
                         conversation_id: str | None) -> str | None:
        """Learn the exchange when the turn may (memory on, not degraded, nothing flagged by the
        defence); returns why it was not learned because of the defence, or None."""
        guard = turn.guard
        refusal = learning_refusal(bool(guard.flagged(indirect=False)), bool(guard.flagged(indirect=True)))
        if turn.learn and refusal is not None:
            log.info("nothing learned from this exchange: %s", refusal)
        elif turn.learn:
            try:
                await asyncio.to_thread(
                    self.memory.learn, str(user_id), message, reply,
                    conversation_id=conversation_id, query_vector=turn.query_vector,
                )
                turn.learned = True
            except EmbedderUnavailable as exc:  # the exchange is stored; only the learning is skipped
                log.warning("nothing learned from this exchange: %s", exc.message)
        return refusal


def _flagged_records(before_tools: list[Inspected]) -> list[ToolRecord]:
    """What the defence flagged before the tool loop (the user's message, a memory, an insight), as
    ``(defence)`` runs of iteration 0, so that they are kept with the reply's tool runs."""
    flagged = [i for i in before_tools if i.verdict.flagged]
    return [ToolRecord(0, ToolCall(f"defence_{n}", DEFENCE_TOOL, {"source": i.source.value, "label": i.label,
                                                                   "ref": i.ref}),
                       None, None, 0.0, "flagged", i.verdict) for n, i in enumerate(flagged)]


def _defence_summary(guard: PromptGuard, learning_refused: str | None) -> dict[str, Any]:
    """The turn's defence in one object: whether anything was flagged, the verdict on the user's
    message, the flagged indirect texts, how many texts were inspected and why nothing was learned."""
    user = next((i for i in guard.seen if i.source is Source.USER), None)
    return {
        "flagged": bool(guard.flagged()),
        "user": user.verdict.as_dict() if user is not None else None,
        "indirect": [i.as_dict() for i in guard.flagged(indirect=True)],
        "inspected": len(guard.seen),
        "learning_refused": learning_refused,
    }

