from __future__ import annotations

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


class ScoredMemoryOut(MemoryOut):
    relevance: float = Field(description="similarity x 0.50 + importance x 0.20 + freshness x 0.30")
    similarity: float = Field(description="Dense cosine similarity to the query.")
    keyword_score: float = Field(description="BM25 keyword score, normalised to the best match (0..1).")
    freshness: float = Field(description="e^(-0.01 x hours since last access)")


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


