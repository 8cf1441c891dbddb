"""Tools and what they did (tool runs)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Tool(BaseModel):
    name: str = Field(description="Unique tool identifier.")
    description: str = Field(description="Human-readable; also what the model reads.")
    icon: str | None = Field(None, description="Emoji for a UI.")


class ToolList(BaseModel):
    tools: list[Tool]


class ToolRun(BaseModel):
    """One tool call made while answering: the explanation of an answer."""

    id: str
    conversation_id: str
    message_id: str = Field(description="The assistant message this call contributed to.")
    iteration: int = Field(description="The loop's model turn (1-based) that asked for the call.")
    tool: str
    status: str = Field(description="`ok`, `error` (reported to the model) or `approval_required` (did not run).")
    arguments: dict[str, Any]
    result: Any = None
    error: str | None = None
    duration_ms: float
    created_at: str


class ToolRunList(BaseModel):
    runs: list[ToolRun]
