from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas.common import NOT_BLANK, one_of_ignoring_case
from assistant.memory.store import MAX_CONTENT_CHARS, MAX_TAGS
from assistant.memory.types import CREATABLE, Memory

REQUEST_TYPES = [t.request_value for t in CREATABLE]
STORED_TYPES = [t.value for t in CREATABLE]
# Case-insensitive: "context", "Context", "CONTEXT", "tool_result", "ToolResult".
TYPE_PATTERN = one_of_ignoring_case({*REQUEST_TYPES, *(t.replace("_", "") for t in REQUEST_TYPES)})


class MemoryCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(max_length=MAX_CONTENT_CHARS, description="The memory's text (sealed at rest); not blank.",
                         json_schema_extra={"pattern": NOT_BLANK})
    summary: str = Field(max_length=MAX_CONTENT_CHARS, description="A short summary (sealed at rest).")
    memory_type: str = Field(
        "context", description=f"One of {', '.join(REQUEST_TYPES)}, ignoring case; the stored (response) form "
                               f"is accepted too ({', '.join(STORED_TYPES)}). Responses use the stored form.",
        json_schema_extra={"pattern": TYPE_PATTERN})
    importance: float = Field(0.5, ge=0.0, le=1.0, description="0.0 to 1.0.")
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("memory_type")
    @classmethod
    def _type(cls, value: str) -> str:
        folded = value.lower()
        for request, stored in zip(REQUEST_TYPES, STORED_TYPES, strict=True):
            if folded in (request, stored.lower()):
                return request
        raise ValueError(f"must be one of {', '.join(REQUEST_TYPES)} (ignoring case)")


class MemoryOut(BaseModel):
    id: str
    content: str
    summary: str
    memory_type: str = Field(description="Capitalised: Fact, Preference, Correction, ToolResult, Context, "
                                         "DreamInsight, Hypothesis, Archived, Quarantined.")
    importance: float
    access_count: int
    tags: list[str]
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, m: Memory) -> MemoryOut:
        return cls(id=m.id, content=m.content, summary=m.summary, memory_type=m.memory_type.value,
                   importance=m.importance, access_count=m.access_count, tags=m.tags, created_at=m.created_at,
                   updated_at=m.updated_at)


class RelevancePartsOut(BaseModel):
    """What each term of the relevance formula gave this hit (an addition): `relevance` =
    (`similarity` + `importance` + `freshness`) x `factor`."""

    similarity: float = Field(description="0.50 x `retrieval_similarity`.")
    importance: float = Field(description="0.20 x the memory's importance.")
    freshness: float = Field(description="0.30 x e^(-0.01 x hours since last access).")
    factor: float = Field(description="0.5 for an Archived memory (it ranks at half its relevance), else 1.0.")
    retrieval_similarity: float = Field(description="The similarity in the formula: dense cosine and BM25 fused "
                                                    "(0.7/0.3 by default), plus neighbour and date context.")


class ScoredMemoryOut(MemoryOut):
    relevance: float = Field(description="similarity x 0.50 + importance x 0.20 + freshness x 0.30")
    similarity: float = Field(description="Dense cosine similarity to the query.")
    keyword_score: float = Field(description="BM25 keyword score, normalised to the best match (0..1).")
    freshness: float = Field(description="e^(-0.01 x hours since last access)")
    relevance_parts: RelevancePartsOut = Field(description="The relevance, term by term (an addition).")


class HistoryEventOut(BaseModel):
    at: str = Field(description="When (ISO 8601 UTC).")
    kind: str = Field(description="`created`, `merged`, `dream`, `decayed`, `low`, `archived`, `quarantined`, "
                                  "`restored` or `accessed`.")
    title: str
    importance: float | None = Field(None, description="The importance the event left, when recorded.")
    details: dict[str, Any] = Field(default_factory=dict, description="Per kind: the dream journal entry "
                                    "(operation, session, details, before/after snapshots), the quarantine "
                                    "reason, the access count...")


class DecayPoint(BaseModel):
    day: float
    importance: float


class DecayOutlookOut(BaseModel):
    decay_type: str = Field(description="Whose decay parameters apply (an Archived memory's original type).")
    importance: float
    floor: float
    modifier: float
    access_count: int
    stability: float = Field(description="1 + ln(1 + access_count)")
    effective_rate: float = Field(description="Per day: base_decay_rate x modifier / stability.")
    reinforcement: float = Field(description="min(access_count x 0.005, 0.08), added each decay run.")
    hours_since_access: float
    freshness: float = Field(description="e^(-0.01 x hours since last access): relevance's freshness term.")
    last_decay_at: str | None
    low_since: str | None = Field(description="At or below memory.min_importance since (the clean-up clock).")
    archive_in_days: int | None = Field(description="Daily decay runs until the clean-up archives it if nothing "
                                                    "touches it; null: never (its floor is above min_importance).")
    projection: list[DecayPoint] = Field(description="Importance day by day from now (day 0), daily runs, no access.")


class MemoryHistoryOut(BaseModel):
    memory: MemoryOut
    events: list[HistoryEventOut] = Field(description="Oldest first.")
    decay: DecayOutlookOut | None = Field(description="Null for types that do not decay (Hypothesis, "
                                                      "Quarantined).")


class TypeCount(BaseModel):
    memory_type: str = Field(description="Display name: Fact, Preference, Correction, Tool Result, Context, ...")
    count: int


class MemoryStats(BaseModel):
    total: int
    by_type: list[TypeCount]


class DecayChange(BaseModel):
    id: str
    before: float
    after: float


class DecayResult(BaseModel):
    ran_at: str
    processed: int = Field(description="Memories the cycle looked at.")
    changed: int = Field(description="Memories whose importance changed.")
    cleaned_up: int = Field(description="Memories archived by the clean-up: at or below memory.min_importance "
                            "(with the defaults, Context and ToolResult memories at their 0.10 floor) for "
                            "memory.cleanup_after_days (30) days in a row. Archived, not deleted: memory_type "
                            "Archived, original_memory_type kept.")
    changes: list[DecayChange] = Field(description="Per-memory importance before and after (first 1,000).")


