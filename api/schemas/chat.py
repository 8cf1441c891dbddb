from __future__ import annotations

from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas.common import NOT_BLANK
from api.schemas.tools import ToolRun

MAX_MESSAGE_CHARS = 32_000
MAX_TOKENS = 131_072  # the largest context length the settings allow


class ChatRequestBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(max_length=MAX_MESSAGE_CHARS, json_schema_extra={"pattern": NOT_BLANK},
                         description="The user's message (1 to 32,000 characters, not blank).")
    conversation_id: UUID | None = Field(None, description="Continue this conversation (404 if unknown).")
    mentioned_profile_ids: list[str] | None = Field(None, description="Agent profile ids mentioned with @.")
    enabled_tools: list[str] | None = Field(
        None, description="Restrict tool calling to these registered tools; omitted or null = all registered."
    )
    system_prompt: str | None = Field(None, max_length=MAX_MESSAGE_CHARS, description="Overrides the system prompt.")
    model: str | None = Field(None, min_length=1, description="Overrides the default model (see /v1/system/models).")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Sampling temperature, 0.0 to 2.0.")
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS,
                                   description="Maximum response tokens (up to the context length).")

    @field_validator("message")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class Tokens(BaseModel):
    prompt: int
    completion: int
    total: int


class UsedMemoryOut(BaseModel):
    id: str
    memory_type: str
    content: str
    relevance: float = Field(description="The memory's relevance score when it was retrieved (0 to 1).")
    similarity: float = Field(description="Its retrieval similarity to the message (dense and keyword fused).")


class ChatResponse(BaseModel):
    id: str
    conversation_id: str
    role: str = "assistant"
    content: str
    model: str
    tokens: Tokens
    created_at: str
    tool_runs: list[ToolRun] = Field(
        default_factory=list,
        description="Addition to the spec: the tool calls made for this answer (empty when none); "
        "also listed later by GET /v1/tools/runs.",
    )
    memories: list[UsedMemoryOut] = Field(
        default_factory=list,
        description="Addition to the spec: the user's memories that reached the prompt of this answer, most "
        "relevant first as the prompt ordered them (empty when none did, or with memory off).",
    )
