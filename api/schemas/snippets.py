"""Snippet request and response models. Limits are checked by assistant.snippets (one source of
truth for the API and notebooks); the schema states them for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from api.schemas.common import ONE_LINE
from assistant.snippets import MAX_CONTENT_CHARS, MAX_TITLE_CHARS, ResolvedSnippet, Snippet

TITLE = (f"1 to {MAX_TITLE_CHARS} characters after trimming (stored trimmed), one line; unique per user ignoring "
         "case and runs of whitespace (a clash is 409 CONFLICT). Sealed at rest.")
CONTENT = f"Markdown, at most {MAX_CONTENT_CHARS:,} characters. May reference other snippets with `/snippet <Title>`."


class SnippetCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(description=TITLE, json_schema_extra={"maxLength": MAX_TITLE_CHARS, "pattern": ONE_LINE})
    content: str = Field("", description=CONTENT + " Default empty.",
                         json_schema_extra={"maxLength": MAX_CONTENT_CHARS})


class SnippetUpdate(BaseModel):
    """Only the fields present change; `null` is refused (omit a field to keep it)."""

    # At least one field; each a string when present (the schema says so: no `null`).
    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})

    title: str = Field(None, description=TITLE,
                       json_schema_extra={"maxLength": MAX_TITLE_CHARS, "pattern": ONE_LINE})
    content: str = Field(None, description=CONTENT, json_schema_extra={"maxLength": MAX_CONTENT_CHARS})

    @field_validator("title", "content", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be a string; omit the field to leave it unchanged")
        return value


class SnippetOut(BaseModel):
    id: str
    title: str
    content: str
    created_at: str
    updated_at: str = Field(description="Moves only when the title or content actually changes.")

    @classmethod
    def of(cls, s: Snippet) -> SnippetOut:
        return cls(id=s.id, title=s.title, content=s.content, created_at=s.created_at, updated_at=s.updated_at)


class SnippetList(BaseModel):
    snippets: list[SnippetOut]
    total: int = Field(description="All of the caller's snippets that match (not only this page).")


class ResolvedSnippetOut(BaseModel):
    id: str
    title: str
    resolved_content: str = Field(description="The content with every `/snippet <Title>` reference expanded.")
    original_content: str = Field(description="The content as stored.")

    @classmethod
    def of(cls, r: ResolvedSnippet) -> ResolvedSnippetOut:
        return cls(id=r.id, title=r.title, resolved_content=r.resolved_content, original_content=r.original_content)
