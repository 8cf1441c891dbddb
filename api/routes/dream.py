"""Dream mode: start, pause, resume and cancel the caller's session; read sessions, journal and insights;
act on insights; the configuration.

Every route needs a key (`Authorization: Bearer <key>` or `X-API-Key: <key>`, as the spec's dream
examples send it); reads need any role (`read-only` included), changes a `user` key. Everything is the
caller's: another user's session or insight is 404, exactly as an unknown one, and the trigger's
optional `user_id` must be the caller's own. While dream mode is off (`dream.enabled = false`, or the
memory store off) every route is 503 `SERVICE_UNAVAILABLE` naming the key, checked before the
parameters. The work is :class:`assistant.dream.service.DreamService`'s; this module only maps HTTP.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Body, Query

from api.deps import MAX_LIMIT, ROLE_CHANGE, ROLE_READ, CurrentPrincipal, Offset, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.dream import (
    DreamSessionList,
    DreamSessionOut,
    DreamStatusOut,
    InsightList,
    InsightOut,
    InsightUpdate,
    JournalEntryOut,
    JournalPage,
    NoBody,
    TriggerRequest,
    choice,
    names,
    pattern_of,
)
from assistant.config import DreamSettings
from assistant.dream.service import DreamService
from assistant.dream.types import EntryStatus, InsightStatus, InsightType, Operation, Phase
from assistant.errors import NotFoundError

PREFIX = "/v1/dream"
DISABLED = "dream mode is disabled (dream.enabled = false, or memory.enabled = false)"
DREAM = service("dream", DISABLED)
Dream = Annotated[DreamService, DREAM]
router = APIRouter(prefix=PREFIX, tags=["dream"], dependencies=[DREAM])

READ, CHANGE = ROLE_READ, ROLE_CHANGE
OWNER = "Only the caller's sessions and insights: another user's is 404, as an unknown one."
NO_BODY = Body(description="None, or an empty JSON object.")
Empty = Annotated[NoBody | None, NO_BODY]
READS = error_responses(*AUTH_ERRORS, 422, 503)
CONTROL = error_responses(400, *AUTH_ERRORS, 409, 413, 422, 503)

STATES = """

**States.** `pending` (the cron `dream.schedule` created it; it starts once the user has been idle
`dream.idle_threshold_secs`) → `running` ⇄ `paused` → `completed` | `failed`. A running session pauses by
itself when the user comes back (a chat message, a memory written or deleted, a voice exchange) and
resumes after `dream.re_idle_secs` of new idleness; `POST /pause` pauses it until `POST /resume`. The
operation under way always finishes first (each is journaled before it is applied). One active session
(pending, running or paused) per user."""


@router.post("/trigger", status_code=202, response_model=DreamSessionOut,
             responses=error_responses(400, *AUTH_ERRORS, 404, 409, 413, 422, 503),
             summary="Start a dream session now",
             description="Start a session for the caller now, skipping the idle gate: 202 with the session "
                         "(`running`, cycle 1, phase `nrem`); it runs in the background (poll `GET /status`). "
                         "409 `CONFLICT` while one is pending, running or paused (`details.status`, "
                         "`details.session_id`). The body is optional: `{user_id}` must name the key's own "
                         "user; another user's id is 404 `NOT_FOUND`, exactly as an unknown user (a key never "
                         "starts another user's dream)." + STATES + CHANGE)
def trigger(user: CurrentPrincipal, dream: Dream,
            body: Annotated[TriggerRequest | None, Body(description="Optional: `{user_id}` (the key's own user), "
                                                                    "`{}`, or no body.")] = None) -> DreamSessionOut:
    owner = str(user.user_id)
    if body is not None and body.user_id is not None and str(body.user_id) != owner:
        # the same answer for an unknown user and another user's id: nothing says which it was
        raise NotFoundError("user not found: `user_id` must be the key's own user (or be left out)",
                            {"field": "user_id"})
    return DreamSessionOut.of(dream.trigger(owner))


@router.post("/pause", response_model=DreamSessionOut, responses=CONTROL, summary="Pause the running session",
             description="`running` → `paused` (`paused_reason: requested`): the operation under way finishes, "
                         "then the session waits until `POST /resume` (or fails at `dream.max_duration_hours`, "
                         "paused time included). From any other state 409 `CONFLICT` naming it "
                         "(`details.status`: `paused`, `completed`, `none`...)." + STATES + CHANGE + OWNER)
def pause(user: CurrentPrincipal, dream: Dream, body: Empty = None) -> DreamSessionOut:
    return DreamSessionOut.of(dream.pause(str(user.user_id)))


@router.post("/resume", response_model=DreamSessionOut, responses=CONTROL, summary="Resume the paused session",
             description="`paused` → `running` now, whatever paused it (a request, or the user's return). From "
                         "any other state 409 `CONFLICT` naming it." + STATES + CHANGE + OWNER)
def resume(user: CurrentPrincipal, dream: Dream, body: Empty = None) -> DreamSessionOut:
    return DreamSessionOut.of(dream.resume(str(user.user_id)))


@router.post("/cancel", response_model=DreamSessionOut, responses=CONTROL, summary="Cancel the active session",
             description="Not in the spec's table (its state machine leaves cancellation from `paused` and "
                         "`pending` open): `pending`, `running` or `paused` → `failed` with `reason` "
                         "`cancelled`. A running session stops between two operations; what was applied "
                         "stays, journaled. Answers once it has stopped. With no active session 409 "
                         "`CONFLICT` naming the latest state." + STATES + CHANGE + OWNER)
def cancel(user: CurrentPrincipal, dream: Dream, body: Empty = None) -> DreamSessionOut:
    return DreamSessionOut.of(dream.cancel(str(user.user_id)))


@router.get("/status", response_model=DreamStatusOut, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The current or latest session",
            description="The caller's active session (pending, running, paused), else the latest (null before "
                        "the first), with the schedule and how long the caller has been idle." + STATES + READ)
def status(user: CurrentPrincipal, dream: Dream) -> DreamStatusOut:
    return DreamStatusOut(**dream.status(str(user.user_id)))


@router.get("/sessions", response_model=DreamSessionList, responses=READS, summary="The caller's sessions",
            description="Newest first, paged by `limit` and `offset`; `total` counts them all." + READ + OWNER)
def sessions(user: CurrentPrincipal, dream: Dream,
             limit: Annotated[int, Query(ge=1, le=200, description="Page size, 1 to 200.")] = 20,
             offset: Offset = 0) -> DreamSessionList:
    found, total = dream.sessions(str(user.user_id), limit, offset)
    return DreamSessionList(sessions=[DreamSessionOut.of(s) for s in found], total=total, limit=limit, offset=offset)


@router.get("/sessions/{session_id}", response_model=DreamSessionOut, responses=error_responses(
    *AUTH_ERRORS, 404, 422, 503), summary="One session", description="A session of the caller." + READ + OWNER)
def session(session_id: UUID, user: CurrentPrincipal, dream: Dream) -> DreamSessionOut:
    return DreamSessionOut.of(dream.session(str(user.user_id), str(session_id)))


OPERATIONS = ", ".join(f"`{o}`" for o in names(Operation))


@router.get("/sessions/{session_id}/journal", response_model=JournalPage,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503), summary="A session's journal",
            description="The operations of a session in the order they were written (each is journaled before "
                        "it is applied), filtered by `cycle`, `phase`, `operation` and `status`, paged by "
                        "`limit` and `offset`; `total` counts the entries that match. Snapshots (what each "
                        "operation changed, before and after) are included unless `snapshots=false`. Entries "
                        "older than `dream.journal.retention_days` are removed." + READ + OWNER)
def journal(
    session_id: UUID,
    user: CurrentPrincipal,
    dream: Dream,
    cycle: Annotated[int | None, Query(ge=1, le=100, description="Only this cycle (1 to 100).")] = None,
    phase: Annotated[str | None, Query(max_length=10, description="`NREM` or `REM`, ignoring case.",
                                       json_schema_extra={"pattern": pattern_of(Phase)})] = None,
    operation: Annotated[str | None, Query(
        max_length=40, description=f"One of {OPERATIONS}, ignoring case.",
        json_schema_extra={"pattern": pattern_of(Operation)})] = None,
    status: Annotated[str | None, Query(
        max_length=10, description="`pending`, `applied`, `failed` or `skipped`, ignoring case.",
        json_schema_extra={"pattern": pattern_of(EntryStatus)})] = None,
    snapshots: Annotated[bool, Query(description="Include `before_snapshot` and `after_snapshot`.")] = True,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Page size, 1 to {MAX_LIMIT:,}.")] = 100,
    offset: Offset = 0,
) -> JournalPage:
    filters = {"phase": choice("phase", phase, Phase, ["NREM", "REM"]), "operation": choice("operation", operation, Operation),
               "status": choice("status", status, EntryStatus)}
    entries, total = dream.journal(str(user.user_id), str(session_id), cycle=cycle, limit=limit, offset=offset,
                                   **filters)
    return JournalPage(entries=[JournalEntryOut.of(e, snapshots) for e in entries], total=total, limit=limit,
                       offset=offset)


INSIGHT_STATES = """

**Insight states.** `active` → `confirmed` (the user confirms; a hypothesis needs confidence of at least
`dream.rem.confirmation_threshold`, 0.6, which later supporting memories raise; a confirmed hypothesis is
merged into memory as a `DreamInsight` memory at once) | `dismissed` (the user) | `expired` (a hypothesis
without evidence for `dream.hypothesis_ttl_days`, 30). `confirmed` and `dismissed` are final; an
`expired` insight may still be dismissed. A change the machine does not allow is 409 `CONFLICT` naming
the current status (`details.status`), and changes nothing."""


@router.get("/insights", response_model=InsightList, responses=READS, summary="The caller's insights",
            description="Newest first, filtered by `type` and `status`, paged by `limit` and `offset`; `total` "
                        "counts those that match." + INSIGHT_STATES + READ + OWNER)
def insights(
    user: CurrentPrincipal,
    dream: Dream,
    type: Annotated[str | None, Query(  # noqa: A002 - the spec's name
        max_length=20, description="`pattern`, `connection`, `suggestion` or `hypothesis`, ignoring case.",
        json_schema_extra={"pattern": pattern_of(InsightType)})] = None,
    status: Annotated[str | None, Query(
        max_length=20, description="`active`, `confirmed`, `dismissed` or `expired`, ignoring case.",
        json_schema_extra={"pattern": pattern_of(InsightStatus)})] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Page size, 1 to {MAX_LIMIT:,}.")] = 100,
    offset: Offset = 0,
) -> InsightList:
    found, total = dream.insights.list(str(user.user_id), insight_type=choice("type", type, InsightType),
                                       status=choice("status", status, InsightStatus), limit=limit, offset=offset)
    return InsightList(insights=[InsightOut.of(i) for i in found], total=total, limit=limit, offset=offset)


ONE = error_responses(*AUTH_ERRORS, 404, 422, 503)


def owned(dream: DreamService, user: CurrentPrincipal, insight_id: UUID) -> None:
    """404 for an unknown insight or another user's, before anything acts on it (the owner rule is
    checked here whatever the insight service does)."""
    dream.insights.get(str(user.user_id), str(insight_id))
ACT = error_responses(400, *AUTH_ERRORS, 404, 409, 413, 422, 503)


@router.get("/insights/{insight_id}", response_model=InsightOut, responses=ONE, summary="One insight",
            description="An insight of the caller." + READ + OWNER)
def insight(insight_id: UUID, user: CurrentPrincipal, dream: Dream) -> InsightOut:
    return InsightOut.of(dream.insights.get(str(user.user_id), str(insight_id)))


@router.put("/insights/{insight_id}", response_model=InsightOut, responses=ACT, summary="Update an insight",
            description="Change `title`, `content` (embedded again; not for a dismissed or expired insight: "
                        "409; an insight already merged keeps its memory as written) and `status` (only as the "
                        "machine allows: `confirmed` is `POST .../confirm`, `dismissed` `POST .../dismiss`). "
                        "Fields left out stay. Everything is checked before anything is written: a bad value is "
                        "422, a state conflict 409, and neither changes the insight." + INSIGHT_STATES
                        + CHANGE + OWNER)
def update_insight(insight_id: UUID, body: InsightUpdate, user: CurrentPrincipal, dream: Dream) -> InsightOut:
    owned(dream, user, insight_id)
    return InsightOut.of(dream.insights.update(str(user.user_id), str(insight_id), body.changes()))


@router.post("/insights/{insight_id}/confirm", response_model=InsightOut, responses=ACT,
             summary="Confirm an insight",
             description="`active` → `confirmed`. A hypothesis needs confidence of at least "
                         "`dream.rem.confirmation_threshold` (below it 409 with `details.confidence` and "
                         "`details.confirmation_threshold`) and is merged into memory as a `DreamInsight` memory "
                         "at once (`memory_id`); other types are merged with `POST .../merge`. Journaled as "
                         "`InsightConfirmed` in the session that found it, before the change. From any other "
                         "status 409 `CONFLICT` naming it; 503 if the change could not be applied "
                         "(`details.journal_entry_id` names the failed entry)." + INSIGHT_STATES + CHANGE + OWNER)
def confirm_insight(insight_id: UUID, user: CurrentPrincipal, dream: Dream, body: Empty = None) -> InsightOut:
    owned(dream, user, insight_id)
    return InsightOut.of(dream.insights.confirm(str(user.user_id), str(insight_id)))


@router.post("/insights/{insight_id}/dismiss", response_model=InsightOut, responses=ACT,
             summary="Dismiss an insight",
             description="`active` or `expired` → `dismissed` (final). From `confirmed` or `dismissed` 409 "
                         "`CONFLICT` naming it." + INSIGHT_STATES + CHANGE + OWNER)
def dismiss_insight(insight_id: UUID, user: CurrentPrincipal, dream: Dream, body: Empty = None) -> InsightOut:
    owned(dream, user, insight_id)
    return InsightOut.of(dream.insights.dismiss(str(user.user_id), str(insight_id)))


@router.post("/insights/{insight_id}/merge", response_model=InsightOut, responses=ACT,
             summary="Merge an insight into memory",
             description="Write the insight into the caller's memories as a `DreamInsight` memory (\"<title>. "
                         "<content>\", importance its confidence, at least 0.1), once: `memory_id` names it and a "
                         "second merge returns the insight unchanged. Not for a dismissed or expired insight, nor "
                         "an active hypothesis (confirming is how a hypothesis becomes memory): 409 `CONFLICT` "
                         "naming the status." + INSIGHT_STATES + CHANGE + OWNER)
def merge_insight(insight_id: UUID, user: CurrentPrincipal, dream: Dream, body: Empty = None) -> InsightOut:
    owned(dream, user, insight_id)
    return InsightOut.of(dream.insights.merge(str(user.user_id), str(insight_id)))


@router.get("/config", response_model=DreamSettings, responses=error_responses(*AUTH_ERRORS, 503),
            summary="The dream configuration",
            description="The `[dream]` section in effect (defaults filled in): schedule, idle gate, cycles, "
                        "time cap, and the `nrem`, `rem` and `journal` settings. The same for every caller."
                        + READ)
def config(user: CurrentPrincipal, dream: Dream) -> DreamSettings:
    return DreamSettings(**dream.config())
