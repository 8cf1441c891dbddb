"""Structured commands, and natural language parsed into a command (nothing executed).

Only ``POST /v1/commands`` and ``POST /v1/commands/parse`` live here; the catalog of shell commands
is under ``/v1/commands/catalog`` (its own router).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter

from api.deps import CurrentPrincipal, service
from api.schemas.commands import CommandRequest, CommandResultOut, ParsedCommandOut, ParseRequest
from api.schemas.common import AUTH_ERRORS, ErrorEnvelope, error_responses
from assistant.commands.service import CommandService

router = APIRouter(prefix="/v1/commands", tags=["commands"])

RUN_ERRORS = {
    **error_responses(400, *AUTH_ERRORS, 413, 422),
    502: {"model": ErrorEnvelope, "description": "The capability's server failed (weather service, CalDAV, IMAP) "
                                                 "(UPSTREAM_ERROR)"},
    503: {"model": ErrorEnvelope, "description": "The command's capability is not configured; `details` names "
                                                 "`capability`, `configure` (the settings to set) and `reason` "
                                                 "(SERVICE_UNAVAILABLE)"},
}
PARSE_ERRORS = error_responses(400, *AUTH_ERRORS, 413, 422, 502, 503)


Commands = Annotated[CommandService, service("commands", "structured commands are not set up in this service")]


@router.post("", response_model=CommandResultOut, responses=RUN_ERRORS, summary="Run a command")
async def run_command(body: CommandRequest, user: CurrentPrincipal, commands: Commands) -> CommandResultOut:
    """Run a structured command for the caller and return `{command, status, result, executed_at}`.
    Commands read the configured capabilities' servers directly (no model is involved).

    - **`briefing`** (optional `location`): `result` = `{date, timezone, weather, calendar, email, tasks,
      reminders, unavailable, errors}`. `weather` is `{location, current, today, units}`; `calendar`
      is today's events `{start, days, timezone, count, events}`; `email` is `{unread}`; `tasks` is
      `{open, items}` (pending tasks, first 20); `reminders` is `{count, due}`: reminders not yet
      fired that are due before the end of today (`overdue` when their time has passed). A
      capability that is not set up has a null section and is listed in `unavailable` as
      `{capability, reason}` — this is not an error. A capability whose server fails has a null
      section, is listed in `errors` as `{capability, error}`, and `status` is `partial`;
      otherwise `status` is `completed`.
    - **`weather`** (`location`, optional): `{location, current, today, units}`.
    - **`calendar`** (`days`, default 1, 1..366): events from the start of today for `days` days,
      sorted by start: `{start, days, timezone, count, events}`. Timed events are shown in the
      calendar's zone with their offset; all-day events as dates with an inclusive `end`.
    - **`emails`** (`count`, default 10, 1..50): the newest messages of the inbox, newest first:
      `{count, emails: [{id, from, to, subject, date, snippet, unread}]}`. Nothing is marked read.
    - **`help`**: `{commands: [{name, description, args, available, needs, reason}]}`; `args` lists
      each argument's name, type, default and range.

    **Location.** `args.location`, else `[commands] default_location`. With neither, `weather` is
    422 on `args.location` and the briefing lists weather as unavailable. An unknown place is 422.
    **Today** is the day in `[calendar] timezone` (the user's zone, default UTC).

    **Errors.** Unknown command, unknown argument name, wrong type (`"5"` is not an integer) or a
    value out of range: 422 with `details.fields` naming `command` or `args.<name>`. `weather`,
    `calendar` or `emails` when its capability is not configured: 503 `SERVICE_UNAVAILABLE` with
    `details.capability` and `details.configure` (`[weather] enabled = true`, `[calendar] url`,
    `[email] imap_host and smtp_host`). The capability's server failing: 502 `UPSTREAM_ERROR`.
    """
    result = await commands.run(user.user_id, body.command, body.args)
    return CommandResultOut.of(result)


@router.post("/parse", response_model=ParsedCommandOut, responses=PARSE_ERRORS, summary="Parse a command")
async def parse_command(body: ParseRequest, user: CurrentPrincipal, commands: Commands) -> ParsedCommandOut:
    """Understand a sentence as a command; **nothing is executed**. Quick patterns are tried first
    (confidence 0.95). A sentence without a word of two letters or more ("0", digits, punctuation)
    is not understood at once, without the model. Otherwise the model is asked for a JSON object
    shaped by a schema, and its answer is checked against the sentence: the confidence is the
    model's estimate (clipped to 0..0.9) times the share of the answer's subject and time words
    that the sentence contains (an answer without either needs a word of its kind, "umbrella" for
    weather, else it counts a quarter); an answer none of whose words the sentence contains is
    not understood. The model's turn is bounded by `[commands] parse_timeout_secs` (default 60 s;
    past it, 503). Nothing understood: `parsed` false, `command.type` `unknown`, confidence 0.

    `command.type` and its fields (timestamps are ISO 8601 UTC; `timezone` names the zone the words
    were read in, `[calendar] timezone`, default UTC):

    - `briefing`, `help`: no fields. `weather`: `location` (null: the default).
      `calendar`: `start` (date), `days` ("what's on my calendar this week"). `emails`: `count`.
    - `calendar_event`: `title`, `start`, `end`, `all_day`, `timezone` ("add meeting with Bob
      tomorrow at 3pm for an hour"). Without a time of day the event is all-day (local midnight to
      midnight); without an end or a length it lasts an hour.
    - `reminder`: `text`, `at`, `timezone` ("remind me to call mom in 2 hours"); a part not said is
      null, and the confidence is then 0.6.
    - `task`: `title`, `due` (null when not said). `send_email`: `to` (list), `subject`, `body`.

    Relative dates are resolved from now in the user's zone: "tomorrow", "tonight" (20:00), "next
    Monday" (the Monday of next week; a plain weekday is the next such day), "in 2 hours", "at 3pm"
    (today if still ahead, else tomorrow), "at 3" (a bare hour 1..7 is p.m.), "morning" 09:00,
    "afternoon" 15:00, "evening" 19:00, a day alone 09:00 (reminders and tasks).

    `requires_approval` is true for `calendar_event`, `reminder`, `task` and `send_email` (they
    change something when run). Errors: `input` empty or over 2,000 characters is 422; when no
    pattern matches and the engine is unavailable or does not answer within
    `parse_timeout_secs`, 503 (502 when it answers with an error).
    """
    parsed = await commands.parse(body.input)
    out = asdict(parsed)
    return ParsedCommandOut(**out)
