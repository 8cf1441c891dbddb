"""Memory types, their names in requests, responses and stats, and the Memory value."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from assistant.errors import ValidationFailed


class MemoryType(StrEnum):
    FACT = "Fact"
    PREFERENCE = "Preference"
    CORRECTION = "Correction"
    TOOL_RESULT = "ToolResult"
    CONTEXT = "Context"
    DREAM_INSIGHT = "DreamInsight"
    HYPOTHESIS = "Hypothesis"
    ARCHIVED = "Archived"
    QUARANTINED = "Quarantined"

    @property
    def display_name(self) -> str:
        """The stats view's name: ``Tool Result``, ``Dream Insight``."""
        return {"ToolResult": "Tool Result", "DreamInsight": "Dream Insight"}.get(self.value, self.value)

    @property
    def request_value(self) -> str:
        """The lower-case name clients send: ``tool_result``."""
        return {"ToolResult": "tool_result", "DreamInsight": "dream_insight"}.get(self.value, self.value.lower())

    @classmethod
    def parse(cls, value: str) -> MemoryType:
        """Accept the request form (``tool_result``) or the stored form (``ToolResult``)."""
        for member in cls:
            if value in (member.request_value, member.value):
                return member
        raise ValidationFailed(
            f"unknown memory_type {value!r}",
            [{"field": "memory_type", "error": f"must be one of {', '.join(m.request_value for m in CREATABLE)}"}],
        )


# What clients may create through the API.
CREATABLE = (MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.TOOL_RESULT, MemoryType.CORRECTION, MemoryType.CONTEXT)


@dataclass
class Memory:
    id: str
    user_id: str
    content: str
    summary: str
    memory_type: MemoryType
    importance: float
    tags: list[str] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""
    accessed_at: str = ""
    access_count: int = 0
    conversation_id: str | None = None
    original_memory_type: MemoryType | None = None
    archived_at: str | None = None
    archived_by_session: str | None = None
    quarantined_at: str | None = None
    quarantine_reason: str | None = None
    decayed_at: str | None = None


@dataclass(frozen=True)
class ScoredMemory:
    memory: Memory
    similarity: float  # dense cosine
    keyword: float  # BM25, normalised to 0..1
    freshness: float
    relevance: float
    fused: float = 0.0  # the retrieval similarity (dense and keyword fused), used for rag_threshold
    score: float = 0.0  # what ranked it (rank_by="similarity"): fused plus neighbour context, dates, ...
