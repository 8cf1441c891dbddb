"""Structured commands and the natural-language command parser."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas.common import NOT_BLANK, one_of_ignoring_case
from assistant.commands.parser import MAX_INPUT_CHARS, CommandType
from assistant.commands.service import COMMANDS, CommandResult, Status

COMMAND_NAMES = ", ".join(f"`{name}`" for name in COMMANDS)
PARSED_TYPES = ", ".join(f"`{t.value}`" for t in CommandType)


class CommandRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: str = Field(max_length=100, description=f"One of {COMMAND_NAMES} (case-insensitive).",
                         json_schema_extra={"pattern": one_of_ignoring_case(list(COMMANDS), padding=True)})
    args: dict[str, Any] | None = Field(
        None, description="The command's arguments: `weather` takes `location` (string), `calendar` `days` "
                          "(integer 1..366, default 1), `emails` `count` (integer 1..50, default 10), `briefing` "
                          "an optional `location`, `help` none. Unknown names, wrong types and values out of range "
                          "are 422.",
        examples=[{"days": 7}],
    )


class CommandResultOut(BaseModel):
    command: str = Field(description="The command that ran.")
    status: Literal["completed", "partial"] = Field(
        description="`completed`: every part that could run, ran. `partial` (briefing only): some capability "
                    "failed; `result.errors` lists `{capability, error}`.")
    result: dict[str, Any] = Field(description="Depends on the command (see the route's description).")
    executed_at: str = Field(description="When the command started (ISO 8601 UTC).")

    @classmethod
    def of(cls, r: CommandResult) -> CommandResultOut:
        return cls(command=r.command, status=Status(r.status).value, result=r.result, executed_at=r.executed_at)


class ParseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS,
                       description=f"A sentence, 1 to {MAX_INPUT_CHARS:,} characters, not blank.",
                       json_schema_extra={"pattern": NOT_BLANK},
                       examples=["add meeting with Bob tomorrow at 3pm for an hour"])

    @field_validator("input")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value


class ParsedCommandBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str = Field(description=f"One of {PARSED_TYPES}; the other fields depend on it (see the route).")


class ParsedCommandOut(BaseModel):
    parsed: bool = Field(description="False when nothing was understood (`command.type` is then `unknown`).")
    command: ParsedCommandBody
    confidence: float = Field(ge=0.0, le=1.0, description="0.95 for a quick pattern, 0.6 for a pattern missing a "
                                                          "part; for the model, its estimate clipped to 0..0.9 "
                                                          "times the share of its answer the sentence contains; "
                                                          "0 when not understood.")
    requires_approval: bool = Field(description="True for types that change something: `calendar_event`, "
                                                "`reminder`, `task`, `send_email`.")
    source: Literal["pattern", "model"] | None = Field(
        None, description="What understood the sentence: a quick `pattern`, the `model`, or null.")
