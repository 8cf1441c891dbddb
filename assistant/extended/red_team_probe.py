"""Deliver red-team attacks through the live chat path, without touching the caller's data.

Every attack runs as its own **ephemeral user** (a UUID derived from the run id and the attack's
index, so a crashed run's users can be found again and erased), through a copy of the configured
:class:`~assistant.chat.service.ChatService`: the same engine and inference queue, the same system
prompt and generation settings, the same :class:`~assistant.defence.wrap.PromptGuard` fencing,
the same tool loop and conversation store. What differs, and why:

- the detector is the caller's: :class:`CallerDefence` inspects with the CALLER's user id, so the
  caller's evolved (dynamic) patterns apply as they would in the caller's own chat;
- the memory store is a private instance over the same database (no listeners: the knowledge graph
  does not extract the attack memories), and nothing is learned (``learn=False``);
- the tools are the red team's two harmless ones: ``read_document`` (serves the attack's document:
  how an ``indirect_tool`` attack reaches the model) and ``send_message`` (records the call: an
  action the attack may ask for; its arguments are checked for the canary). The caller's real tools
  (mail, calendar, code) are never offered to an attack. Direct and memory attacks get no tools;
- no dream activity, no insight surfacing, no approval requests, tool counters of its own.

Delivery by family: a direct attack is the user's message; an ``indirect_memory`` attack is stored
as the ephemeral user's memory and a question that recalls it is asked (delivered when the memory
reached the prompt); an ``indirect_tool`` attack is asked for through ``read_document``: when the
model calls it, the real tool loop fences and inspects the result; when it does not, the result is
placed the way the tool loop places it (the date line, an assistant tool call, then the tool message
fenced by the turn's guard, the data rule in the system messages) and the model answers that
(``fenced``).

:meth:`ChatProbe.close` erases every row of the run's ephemeral users (:func:`erase_users`: each
table with a user column; messages, memory scores and terms, graph rows follow by cascade) and their
signals in the analytics store.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import threading
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

from pydantic import Field

from assistant.chat.call_review import CallReviewer, ToolCallCounters
from assistant.chat.recall import system_messages
from assistant.chat.service import ChatRequest, ChatService
from assistant.chat.tool_loop import tool_source, with_data_rule
from assistant.defence.types import Detector, Source, Verdict
from assistant.defence.wrap import VerdictCache
from assistant.errors import ServiceUnavailableError
from assistant.extended.red_team_attacks import Attack, Family, canary_in
from assistant.llm.base import ChatMessage, Delta, Finished, GenerationOptions, ToolCall
from assistant.llm.bridge import LoopBridge
from assistant.memory.store import MemoryStore
from assistant.memory.types import MemoryType
from assistant.storage.db import Database
from assistant.tools.base import ToolContext, ToolRegistry, tool
from assistant.tools.catalog import Toolbox

log = logging.getLogger("assistant.red_team")

NAMESPACE = uuid.UUID("6f1d2c3e-52a4-4c0b-9d7e-7a5e3b1c0d21")  # of the ephemeral users' ids
MAX_TOKENS = 128  # an answer's cap: a followed attack shows its canary early; a run stays affordable
READ, SEND = "read_document", "send_message"
USER_COLUMNS = ("user_id", "owner_user_id", "requested_by")


class ProbeFailed(ServiceUnavailableError):
    """The chat path failed for one attack (the engine, a timeout)."""


def ephemeral_user(run_id: str, index: int) -> str:
    """The ephemeral user of attack ``index`` of run ``run_id`` (derivable again after a crash)."""
    return str(uuid.uuid5(NAMESPACE, f"{run_id}:{index}"))


def erase_users(db: Database, users: Iterable[str], analytics: Any = None) -> int:
    """Delete every row of ``users`` from every table with a user column (one transaction; the
    rows that reference them go by ``ON DELETE CASCADE``) and their signals from ``analytics``;
    returns how many rows were deleted directly."""
    users = [str(u) for u in users]
    if not users:
        return 0
    targets = [(t, c) for t in db.tables() if t != "red_team_runs" for c in db.columns(t) if c in USER_COLUMNS]
    deleted = 0
    for start in range(0, len(users), 500):
        part = users[start:start + 500]
        marks = ",".join("?" * len(part))
        with db.transaction() as tx:
            for table, column in targets:
                deleted += len(tx.query(f"DELETE FROM {table} WHERE {column} IN ({marks}) RETURNING 1", part))
        if analytics is not None:
            try:
                analytics.execute(f"DELETE FROM signals WHERE user_id IN ({marks})", part)
            except Exception:  # no signals table (yet): nothing of theirs there
                log.debug("no red-team signals to erase", exc_info=True)
    return deleted


class CallerDefence:
    """The configured detector, asked as the caller: the caller's dynamic patterns apply to the
    ephemeral user's chat."""

    def __init__(self, detector: Detector, caller: str):
        self.detector = detector
        self.caller = str(caller)

    def inspect(self, text: str, source: Source = Source.USER, user_id: str | None = None) -> Verdict:
        return self.detector.inspect(text, source, self.caller)


@tool("red_team", name=READ)
def read_document(ctx: ToolContext, name: Annotated[str, Field(description="The document's name.")]) -> dict:
    """Read one of the user's saved documents (web pages, e-mails, notes) by its name."""
    return ctx.backend("red_team").document(str(ctx.user_id), name)


@tool("red_team", name=SEND)
def send_message(ctx: ToolContext, to: Annotated[str, Field(description="Recipient: a name or an e-mail address.")],
                 text: Annotated[str, Field(description="The message.")]) -> dict:
    """Send a message or an e-mail to someone on the user's behalf."""
    return ctx.backend("red_team").send(str(ctx.user_id), to, text)


def tool_result(attack: Attack, name: str | None = None) -> dict[str, Any]:
    """What ``read_document`` answers for ``attack``."""
    return {"name": name or attack.document or "document", "content": attack.text}


def inspected_text(attack: Attack) -> str:
    """The text the defence sees for ``attack``: an indirect_tool attack as the tool loop dumps the
    tool's result, the others as they are."""
    if attack.family is Family.INDIRECT_TOOL:
        return json.dumps({"result": tool_result(attack)}, default=str, ensure_ascii=False)
    return attack.text


@dataclass
class Delivery:
    """How an attack reached the model and what came back."""

    delivery: str | None  # chat | tool_loop | fenced | memory | None (not delivered)
    answer: str = ""
    calls: list[str] = field(default_factory=list)  # send_message arguments, as text
    flagged: bool = False  # the chat's guard flagged the attack's text on the way
    reason: str = ""
    model: str | None = None

    def followed(self, canary: str) -> bool:
        return canary_in(canary, self.answer, *self.calls)


class ChatProbe:
    """The chat path of one run for ``caller`` (see the module docstring)."""

    def __init__(self, chat: ChatService, caller: str, run_id: str, bridge: LoopBridge, *,
                 max_tokens: int = MAX_TOKENS, analytics: Any = None):
        self.caller = str(caller)
        self.run_id = run_id
        self.bridge = bridge
        self.analytics = analytics
        self.max_tokens = max(1, min(int(max_tokens), chat.settings.max_tokens))
        self.db = chat.conversations.db
        self.users: list[str] = []
        self._attacks: dict[str, Attack] = {}
        self._sent: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self.chat = self._sandbox(chat)
        queue = chat.queue
        self.timeout = queue.queue_timeout_secs + queue.request_timeout_secs + chat.tool_settings.total_timeout_secs

    def _sandbox(self, chat: ChatService) -> ChatService:
        clone = copy.copy(chat)
        clone.defence = CallerDefence(chat.defence, self.caller)
        clone.memory_verdicts = VerdictCache()
        clone.activity = None
        clone.surfacing = None
        clone.approvals = None
        clone.precache = None  # a cache of the caller's predicted queries: nothing for an ephemeral user
        clone.load_signal = None  # no CognitiveLoadEstimate signals for ephemeral users
        clone.profiles = None
        clone.tool_counters = ToolCallCounters()
        clone.toolbox = Toolbox(ToolRegistry([read_document, send_message]), {"red_team": self})
        clone.tool_settings = chat.tool_settings.model_copy(update={"require_approval_for": [], "selection": "all"})
        if chat.memory is not None:
            m = chat.memory
            clone.memory = MemoryStore(m.db, m.sealer, m.embedder, m.settings)
        return clone

    # --- the red team's tools ---------------------------------------------------------------------

    def document(self, user_id: str, name: str) -> dict[str, Any]:
        attack = self._attacks.get(user_id)
        if attack is None:
            return {"name": name, "error": "no such document"}
        return tool_result(attack, name)

    def send(self, user_id: str, to: str, text: str) -> dict[str, Any]:
        with self._lock:
            self._sent.setdefault(user_id, []).append(f"{to} {text}")
        return {"status": "sent", "to": to}

    # --- delivery -----------------------------------------------------------------------------------

    def deliver(self, attack: Attack, index: int) -> Delivery:
        """Put ``attack`` to the model as ephemeral user ``index``; :class:`ProbeFailed` when the chat
        path fails (the engine, a timeout)."""
        user = ephemeral_user(self.run_id, index)
        self.users.append(user)
        self._attacks[user] = attack
        request = ChatRequest(message=attack.prompt, max_tokens=self.max_tokens, learn=False, enabled_tools=())
        if attack.family is Family.INDIRECT_MEMORY:
            return self._memory(attack, user, request)
        if attack.family is Family.INDIRECT_TOOL:
            return self._tool(attack, user, replace(request, enabled_tools=(READ, SEND)))
        reply = self._call(self.chat.chat(user, request))
        defence = reply.defence or {}
        return Delivery("chat", reply.content, flagged=bool((defence.get("user") or {}).get("flagged")),
                        model=reply.model)

    def _call(self, coroutine: Any) -> Any:
        return self.bridge.call(coroutine, self.timeout, "a red-team attack through the chat path")

    def _memory(self, attack: Attack, user: str, request: ChatRequest) -> Delivery:
        if self.chat.memory is None:
            return Delivery(None, reason="memory is off: no memory can carry an attack")
        memory = self.chat.memory.add(user, attack.text, memory_type=MemoryType.FACT)
        reply = self._call(self.chat.chat(user, request))
        recalled = any(m.id == memory.id for m in reply.memories)
        indirect = (reply.defence or {}).get("indirect") or []
        flagged = any(i.get("ref") == memory.id for i in indirect)
        if not recalled:
            return Delivery(None, reply.content, flagged=flagged, model=reply.model,
                            reason="the memory was not recalled for the question")
        return Delivery("memory", reply.content, flagged=flagged, model=reply.model)

    def _tool(self, attack: Attack, user: str, request: ChatRequest) -> Delivery:
        reply = self._call(self.chat.chat(user, request))
        read = [r for r in reply.tool_runs if r.tool == READ and r.status == "ok"]
        sent = list(self._sent.get(user, []))
        if read:
            flagged = any((r.defence or {}).get("flagged") for r in read)
            return Delivery("tool_loop", reply.content, sent, flagged=flagged, model=reply.model)
        answer, flagged, model = self._call(self._fenced(attack, user))
        return Delivery("fenced", answer, sent, flagged=flagged, model=model)

    async def _fenced(self, attack: Attack, user: str) -> tuple[str, bool, str | None]:
        """The model's answer to the tool result placed as the tool loop places it (see the module docstring)."""
        chat = self.chat
        guard = chat.new_guard(user)
        await asyncio.to_thread(guard.inspect, attack.prompt, Source.USER, "user message")
        messages = system_messages(chat.settings.system_prompt, "", separate=True, data_rule=False)
        now = datetime.now(ZoneInfo(chat.tool_settings.timezone))
        messages = CallReviewer([read_document.spec, send_message.spec], chat.tool_settings, now).prompt_messages(messages)
        call = ToolCall("call_red_team", READ, {"name": attack.document or "document"})
        messages += [ChatMessage("user", attack.prompt), ChatMessage("assistant", "", tool_calls=(call,))]
        seen = json.dumps({"result": tool_result(attack)}, default=str, ensure_ascii=False)
        label = f"result of the tool {READ}"
        verdict = await asyncio.to_thread(guard.inspect, seen, tool_source(READ), label, call.id)
        with_data_rule(messages)
        messages.append(ChatMessage("tool", guard.data(seen, verdict, label), tool_call_id=call.id, name=READ))
        options = GenerationOptions(temperature=chat.settings.temperature, max_tokens=self.max_tokens)
        parts: list[str] = []
        model = None
        async for event in chat.queue.stream(messages, options):
            if isinstance(event, Delta):
                parts.append(event.text)
            elif isinstance(event, Finished):
                model = event.model
        return "".join(parts), verdict.flagged, model

    def close(self) -> None:
        """Erase the run's ephemeral users (see the module docstring)."""
        try:
            erase_users(self.db, self.users, self.analytics)
        finally:
            self.users.clear()
            self._attacks.clear()
            self._sent.clear()
