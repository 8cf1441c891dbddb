"""Dream mode's requests and answers: sessions, journal entries, insights, status, and the bodies of the
control routes. The values come from :mod:`assistant.dream.types` (``to_json``); the models state them
for the OpenAPI document.

Enumerated query parameters (journal ``phase``, ``operation``, ``status``; insight ``type``, ``status``)
are read ignoring case (the spec writes ``NREM``/``REM`` in the journal and ``Pattern`` in the insight
types, lower case in JSON): :func:`choice` turns one into its enum or a 422 naming the values allowed.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from api.schemas.common import NOT_BLANK, ONE_LINE, one_of_ignoring_case
from assistant.dream.insights import MAX_TITLE_CHARS
from assistant.dream.types import (
    DreamSession,
    EntryStatus,
    Insight,
    InsightStatus,
    InsightType,
    JournalEntry,
    Operation,
    Phase,
    SessionStatus,
)
from assistant.errors import ValidationFailed
from assistant.memory.records import MAX_CONTENT_CHARS

ISO = "ISO 8601, UTC."
E = TypeVar("E", bound=StrEnum)


def names(enum: type[StrEnum]) -> list[str]:
    return [member.value for member in enum]


def pattern_of(enum: type[StrEnum]) -> str:
    """The JSON Schema ``pattern`` of an enum's values in any case."""
    return one_of_ignoring_case(names(enum))


def choice(field: str, value: str | None, enum: type[E], shown: list[str] | None = None) -> E | None:
    """``value`` as a member of ``enum`` ignoring case (None stays None); 422 naming the values otherwise
    (``shown``: as the API writes them, when not the enum's values)."""
    if value is None:
        return None
    folded = value.strip().lower()
    for member in enum:
        if member.value.lower() == folded:
            return member
    got = value if len(value) <= 40 else value[:40] + "..."
    error = f"must be one of {', '.join(shown or names(enum))} (ignoring case) (got {got!r})"
    raise ValidationFailed(f"request validation failed: {field}: {error}", [{"field": field, "error": error}])


# --- sessions -------------------------------------------------------------------------------------


SESSION_EXAMPLE = {
    "id": "0f8f2c1e-4d0a-4b9e-9a53-2c1d5e6f7a80", "user_id": "6d1c4a3b-9e2f-4c5d-8a7b-1e2f3a4b5c6d",
    "status": "running", "current_cycle": 1, "total_cycles": 5, "phase": "nrem",
    "created_at": "2026-11-25T00:00:00Z", "started_at": "2026-11-25T00:00:00Z", "completed_at": None,
    "trigger": "manual", "paused_reason": None, "reason": None, "counts": {}, "updated_at": "2026-11-25T00:00:00Z",
}


class DreamSessionOut(BaseModel):
    """A dream session (spec "Dream session", plus what this service adds: trigger, reasons, counts)."""

    model_config = ConfigDict(json_schema_extra={"examples": [SESSION_EXAMPLE]})

    id: str = Field(description="The session's id (a UUID).")
    user_id: str = Field(description="Its user: always the caller's.")
    status: SessionStatus = Field(
        description="`pending` (created by the schedule, waiting for the idle gate), `running`, `paused`, "
                    "`completed`, `failed` (with `reason`).")
    current_cycle: int = Field(ge=0, description="The cycle under way or last run, 1..`total_cycles` (0: not "
                                                 "started).")
    total_cycles: int = Field(ge=1, description="`dream.max_cycles` when the session was created.")
    phase: Phase = Field(
        description="The phase under way or last run: `nrem` (consolidation) or `rem` (synthesis).")
    created_at: str = Field(description=ISO)
    started_at: str | None = Field(description=f"When it started running (null while pending). {ISO}")
    completed_at: str | None = Field(description=f"When it completed or failed. {ISO}")
    trigger: str = Field(description="`manual` (POST /v1/dream/trigger) or `schedule` (the cron `dream.schedule` "
                                     "and the idle gate).")
    paused_reason: str | None = Field(description="While paused: `user_returned` (it resumes by itself after "
                                                  "`dream.re_idle_secs` of new idleness) or `requested` (POST "
                                                  "/v1/dream/pause: resumes only on request).")
    reason: str | None = Field(description="Why it failed (`cancelled`, the time cap, a server restart, an error).")
    counts: dict[str, int] = Field(description="Operations applied so far, by journal operation "
                                               "(`MemoryConsolidated`: 3, ...); `failed`: operations or steps "
                                               "that failed.")
    updated_at: str | None = Field(description=ISO)

    @classmethod
    def of(cls, session: DreamSession) -> DreamSessionOut:
        return cls(**session.to_json())




class DreamSessionList(BaseModel):
    sessions: list[DreamSessionOut] = Field(description="Newest first.")
    total: int = Field(ge=0, description="All of the caller's sessions (not only this page).")
    limit: int = Field(description="The page size asked for.")
    offset: int = Field(description="The items skipped.")


class DreamStatusOut(BaseModel):
    session: DreamSessionOut | None = Field(description="The active session (pending, running or paused), else "
                                                        "the latest; null before the caller's first.")
    enabled: bool = Field(description="`dream.enabled` (always true here: a disabled dream mode answers 503).")
    schedule: str = Field(description="`dream.schedule`: the 6-field cron (seconds first) that creates sessions.")
    idle_seconds: float | None = Field(description="Seconds since the caller was last active (a chat message, a "
                                                   "memory written or deleted, a voice exchange); null: never.")
    idle_threshold_secs: int = Field(description="`dream.idle_threshold_secs`: the idleness a scheduled session "
                                                 "waits for (a trigger skips it).")


class TriggerRequest(BaseModel):
    """Optional: with no body (or `{}`) the session is the caller's."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"user_id": "6d1c4a3b-9e2f-4c5d-8a7b-1e2f3a4b5c6d"}, {}]})

    user_id: UUID = Field(None, description="The user to dream for: it must be the key's own user. Another user's "
                                            "id is 404 `NOT_FOUND`, exactly as an unknown user.")

    @field_validator("user_id", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be a UUID; omit the field to dream for the key's user")
        return value


class NoBody(BaseModel):
    """These routes take no body: send none, or an empty JSON object (any field is 422)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{}]})


# --- journal --------------------------------------------------------------------------------------


class JournalEntryOut(BaseModel):
    """One operation of a session, written before it was applied (spec "Dream journal entry")."""

    id: str = Field(description="The entry's id (a UUID).")
    session_id: str
    seq: int = Field(ge=0, description="Order within the session (entries are listed by it).")
    cycle_number: int = Field(ge=1, description="The cycle, 1..`total_cycles`.")
    phase: Literal["NREM", "REM"] = Field(description="The phase that wrote it.")
    operation: Operation = Field(
        description="One of the spec's 12 operations.")
    status: EntryStatus = Field(
        description="`pending` (written, not applied yet: a crash replays it), `applied`, `failed` (nothing of it "
                    "stayed; `error` says why), `skipped` (already done).")
    details: dict[str, Any] = Field(description="What the operation did (its own keys: similarity, reason, weights...).")
    affected_memory_ids: list[str]
    affected_node_ids: list[str]
    affected_edge_ids: list[str]
    error: str | None = Field(description="Why it failed (status `failed`).")
    created_at: str = Field(description=ISO)
    before_snapshot: dict[str, Any] | None = Field(
        None, description="What it changed, as it was (sealed at rest); null when "
                          "`dream.journal.store_before_after_snapshots` is off or `snapshots=false`.")
    after_snapshot: dict[str, Any] | None = Field(None, description="The same, after the change.")

    @classmethod
    def of(cls, entry: JournalEntry, snapshots: bool) -> JournalEntryOut:
        return cls(**entry.to_json(snapshots=snapshots))


class JournalPage(BaseModel):
    entries: list[JournalEntryOut] = Field(description="In the order they were written (`seq`).")
    total: int = Field(ge=0, description="All entries of the session that match the filters (not only this page).")
    limit: int
    offset: int


# --- insights -------------------------------------------------------------------------------------


class InsightOut(BaseModel):
    """A dream insight (spec "Dream insight"); title and content are sealed at rest."""

    id: str = Field(description="The insight's id (a UUID).")
    insight_type: InsightType = Field(
        description="`pattern`, `connection`, `suggestion` or `hypothesis`.")
    title: str
    content: str
    confidence: float = Field(ge=0.0, le=1.0)
    status: InsightStatus = Field(
        description="`active`; `confirmed` and `dismissed` (by the user) and `expired` (a hypothesis without "
                    "evidence for `dream.hypothesis_ttl_days`) are outcomes.")
    evidence_count: int = Field(ge=0, description="Later memories that supported it (hypotheses).")
    source_memory_ids: list[str] = Field(description="The memories it was drawn from.")
    created_at: str = Field(description=ISO)
    session_id: str | None = Field(description="The session that found it.")
    updated_at: str | None = Field(description=ISO)
    last_evidence_at: str | None = Field(description=f"When evidence last raised it. {ISO}")
    memory_id: str | None = Field(description="The `DreamInsight` memory it was merged into (null: not merged).")

    @classmethod
    def of(cls, insight: Insight) -> InsightOut:
        return cls(**insight.to_json())


class InsightList(BaseModel):
    insights: list[InsightOut] = Field(description="Newest first.")
    total: int = Field(ge=0, description="All of the caller's insights that match the filters (not only this page).")
    limit: int
    offset: int


STATUSES = ", ".join(f"`{s}`" for s in names(InsightStatus))


class InsightUpdate(BaseModel):
    """Only the fields present change; `null` is refused (omit a field to keep it); at least one field."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "minProperties": 1, "examples": [{"title": "Runs on Sundays", "content": "You run most Sundays at 7."},
                                         {"status": "dismissed"}]})

    title: str = Field(None, description=f"1 to {MAX_TITLE_CHARS} characters, one line, not blank.",
                       json_schema_extra={"maxLength": MAX_TITLE_CHARS, "pattern": ONE_LINE})
    content: str = Field(None, description=f"Not blank, at most {MAX_CONTENT_CHARS:,} characters (embedded again).",
                         json_schema_extra={"maxLength": MAX_CONTENT_CHARS, "pattern": NOT_BLANK})
    status: str = Field(None, description=f"One of {STATUSES} (ignoring case), where the insight machine allows it "
                                          "from the current status: `active` -> `confirmed` (as POST .../confirm) "
                                          "or `dismissed`; `expired` -> `dismissed`. Any other change is 409 "
                                          "`CONFLICT` naming the current status (`details.allowed` lists what "
                                          "it allows).",
                        json_schema_extra={"pattern": pattern_of(InsightStatus)})

    @field_validator("title", "content", "status", mode="before")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("must be a string; omit the field to leave it unchanged")
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("must not be blank")
        if len(value) > MAX_TITLE_CHARS:
            raise ValueError(f"must be at most {MAX_TITLE_CHARS} characters")
        if any(c in value for c in "\n\r\u2028\u2029") or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
            raise ValueError("must be one line without control characters")
        return value

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        if len(value) > MAX_CONTENT_CHARS:
            raise ValueError(f"must be at most {MAX_CONTENT_CHARS:,} characters")
        return value

    @field_validator("status")
    @classmethod
    def _status(cls, value: str) -> str:
        folded = value.strip().lower()
        if folded not in names(InsightStatus):
            raise ValueError(f"must be one of {', '.join(names(InsightStatus))} (ignoring case)")
        return folded

    @model_validator(mode="after")
    def _something(self) -> InsightUpdate:
        if not self.model_fields_set:
            raise ValueError("nothing to update: give title, content, status or several")
        return self

    def changes(self) -> dict[str, Any]:
        """The fields sent, ``status`` as an :class:`InsightStatus`."""
        found = self.model_dump(exclude_unset=True)
        if "status" in found:
            found["status"] = InsightStatus(found["status"])
        return found
