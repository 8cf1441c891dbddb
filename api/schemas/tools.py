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
    status: str = Field(description=(
        "`ok`; `error` (reported to the model); `approval_required` (did not run); `refused` (a write refused "
        "after flagged content); `flagged` (the `(defence)` pseudo-tool); `prerequisite` (did not run: a value "
        "it needs, such as a token or an id, must come from another tool first, which the model was then made "
        "to call); `repair` (did not run: its arguments broke the tool's schema and the model was asked "
        "once to correct them)."))
    arguments: dict[str, Any] = Field(description="The arguments the tool ran with (after the review).")
    result: Any = None
    error: str | None = None
    duration_ms: float
    created_at: str
    defence: dict[str, Any] | None = Field(None, description="The injection defence's verdict on the result.")
    review: dict[str, Any] | None = Field(None, description=(
        "What the loop did to the model's arguments before the call: `changes` [{field, before, after, "
        "reason}] (a relative date resolved, the user's own words kept, an unambiguous coercion), `problems` "
        "left against the schema, `prerequisite` {parameter, producer} and `repair`. Absent when nothing was "
        "changed."))


class ToolRunList(BaseModel):
    runs: list[ToolRun]
