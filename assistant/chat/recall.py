"""The memory and defence steps of one chat turn, shared by ``/v1/chat`` (:class:`ChatService.stream`)
and the OpenAI-compatible endpoint (:mod:`assistant.chat.completions`).

Before the model runs (:meth:`ChatService.recall`): one :class:`~assistant.defence.wrap.PromptGuard`
for the turn inspects the user's message (never blocking it); the message is embedded once; the
user's relevant memories (:meth:`MemoryStore.retrieve_for_prompt`) and the surfaced dream insights
become the memory context, fenced as data (:func:`memory_block`, :func:`insight_block`). An
unavailable embedder degrades the turn: no memories, nothing learned (:meth:`TurnMemory.drop`).

After the answer (:meth:`ChatService.learn_from`): nothing is learned when the defence flagged
the user's message or anything the reply was built on
(:func:`~assistant.memory.learning.learning_refusal`); otherwise the exchange is learned
(:meth:`MemoryStore.learn`).

A precache (:class:`PrecacheLookup`, :mod:`assistant.extended.precache`) may hold the memory context
of a predicted query: when it answers, its ``(context, used)`` stands for retrieval's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from assistant.defence.types import Source
from assistant.defence.wrap import DATA_RULE, PromptGuard, neutralised
from assistant.llm.base import ChatMessage
from assistant.memory.scoring import PREAMBLE


@dataclass(frozen=True)
class UsedMemory:
    """A memory that reached the prompt of an answer: its id, type, content (the user's own text) and
    the relevance and retrieval similarity that let it in (:meth:`MemoryStore.retrieve_for_prompt`)."""

    id: str
    memory_type: str
    content: str
    relevance: float
    similarity: float

    @classmethod
    def of(cls, scored: Any) -> UsedMemory:
        m = scored.memory
        kind = getattr(m.memory_type, "value", m.memory_type)
        return cls(str(m.id), str(kind), m.content, round(float(scored.relevance), 4), round(float(scored.fused), 4))


class PrecacheLookup(Protocol):
    def lookup(self, user_id: str, message: str, query_vector: Any = None) -> tuple[str, list] | None:
        """The memory context precached for ``message`` of ``user_id``, exactly as
        :meth:`MemoryStore.retrieve_for_prompt` would return it (``(context, used)``), or None."""
        ...


@dataclass
class TurnMemory:
    """What one turn knows of the user's memories: the guard of the turn, whether the exchange may
    be learned, the message's vector, the fenced memory context and the memories in it."""

    guard: PromptGuard
    learn: bool = False
    query_vector: Any = None
    context: str = ""
    used: list = field(default_factory=list)
    degraded: bool = False  # the embedder was unavailable: no memories, nothing learned
    memory_chars: int = 0  # the size of the memory block in ``context`` (the explanation's prompt sections)
    insight_chars: int = 0  # the size of the insights block in ``context``
    learned: bool = False  # the exchange was learned (set by ChatService.learn_from)

    def drop(self) -> None:
        """Degrade the turn: answer without memories and learn nothing."""
        self.learn, self.query_vector, self.context, self.used, self.degraded = False, None, "", [], True
        self.memory_chars = self.insight_chars = 0

    @property
    def memories(self) -> tuple[UsedMemory, ...]:
        return tuple(UsedMemory.of(m) for m in self.used)


def memory_block(guard: PromptGuard, used: list) -> str:
    """The retrieved memories as the prompt sees them: the preamble, then the memories (one
    line each, flagged spans neutralised) in one data fence. Each memory is inspected once; its
    verdict is cached by (user, memory id, content hash)."""
    lines = []
    for scored in used:
        memory = scored.memory
        verdict = guard.inspect(memory.content, Source.MEMORY, "remembered fact", memory.id, memory.id)
        text = neutralised(memory.content, verdict) if guard.neutralise else memory.content
        lines.append("- " + " ".join(text.split()))
    return f"{PREAMBLE}\n" + guard.data("\n".join(lines), None, "remembered facts about the user")


def insight_block(guard: PromptGuard, extra: str) -> str:
    """Surfaced dream insights: their header line, then the insights fenced as data."""
    header, _, body = extra.partition("\n")
    if not body:
        return extra
    fenced, _ = guard.wrap(body, Source.MEMORY, "insights the user confirmed")
    return f"{header}\n{fenced}"


def system_messages(system: str, memory_context: str, *, separate: bool, data_rule: bool,
                    instruction: str = "") -> list[ChatMessage]:
    """The leading system messages: the system prompt and the memory context, in one message or (with
    ``separate``) two: chat templates put the tool list right after the first one, so the long prefix
    of system prompt and tools stays the same from request to request (llama.cpp's KV cache). With
    ``data_rule`` (fenced data follows) :data:`DATA_RULE` precedes the memories. ``instruction`` (the
    answer format of the cognitive load, :mod:`assistant.extended.cognitive`) opens the second part,
    so that it changing leaves the first message as it was."""
    if data_rule:  # fenced data (memories, tool results) may follow: it never carries instructions
        memory_context = "\n\n".join(part for part in (DATA_RULE, memory_context) if part)
    if instruction:
        memory_context = "\n\n".join(part for part in (instruction, memory_context) if part)
    if separate:
        return [ChatMessage("system", part) for part in (system, memory_context) if part]
    system = "\n\n".join(part for part in (system, memory_context) if part)
    return [ChatMessage("system", system)] if system else []
