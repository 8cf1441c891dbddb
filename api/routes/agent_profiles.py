"""The caller's agent profiles: create, list, get, update, delete.

A profile is a persona applied to a chat message that names it, by id in `mentioned_profile_ids`
or as `@name` in the message text. A user never sees or uses another user's profiles: those
answer 404 here and are unknown (422) in chat.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Response

from api.deps import CurrentPrincipal, Limit, Offset, service
from api.schemas.agent_profiles import AgentProfileCreate, AgentProfileOut, AgentProfileUpdate
from api.schemas.common import AUTH_ERRORS, error_responses
from assistant.agents.profiles import ProfileStore

router = APIRouter(prefix="/v1/agent-profiles", tags=["agent profiles"])

IN_CHAT = """
**In chat** (`POST /v1/chat`, `POST /v1/chat/stream`): a message applies the profiles it names —
first its `mentioned_profile_ids` in order (an id that is not one of the caller's profiles is 422
naming it), then its `@name` mentions in the text in order (`@` not preceded by a letter, digit,
`_`, `-`, `.` or `@`; the name matched ignoring case; an `@word` that names no profile is just
text), each profile once. The message is sent unchanged. The first profile is **primary**:

- *System prompt*: its rendered `system_prompt_template`, then its instructions (tone, verbosity,
  reasoning depth, skills, autonomy), are **appended** to the system prompt (the request's
  `system_prompt`, or the configured one); every other profile adds one line (name, emoji, role,
  skills).
- *Generation options*, by precedence: the request's `temperature` / `max_tokens` / `model`, then
  the primary's `inference_overrides`, then its verbosity's max_tokens hint (terse: at most 256;
  verbose: at least 1,024, capped at the context length), then the configuration.
- *Tools*: the request's `enabled_tools` when given; otherwise, if some of the primary's skills
  equal registered tool names, only those tools are offered; otherwise all registered tools.

A profile applies to the one message that names it; the conversation keeps no profile.
"""


Store = Annotated[ProfileStore, service("profiles", "agent profiles are not available")]


@router.post("", status_code=201, response_model=AgentProfileOut,
             responses=error_responses(400, *AUTH_ERRORS, 409, 413, 422, 503), description=f"""
Create an agent profile. Only `name` is required; the defaults are an empty role, emoji, skills,
tone and template, verbosity `normal`, reasoning depth `standard`, no inference overrides and
autonomy `medium`. The response (201) is the stored profile with its `id` (UUID), `created_at` and
`updated_at` (equal on creation). 422: a name outside the allowed characters, an unknown
placeholder in the template, a skill that is not an identifier, a value outside its set or range.
409 `CONFLICT`: the caller already has a profile of that name (ignoring case); `details.id` is
its id. Profiles are sealed at rest like memories.
{IN_CHAT}""")
def create_profile(body: AgentProfileCreate, user: CurrentPrincipal, store: Store) -> AgentProfileOut:
    return AgentProfileOut.of(store.create(str(user.user_id), body.draft()))


@router.get("", response_model=list[AgentProfileOut], responses=error_responses(*AUTH_ERRORS, 422, 503))
def list_profiles(
    user: CurrentPrincipal,
    store: Store,
    limit: Limit = 100,
    offset: Offset = 0,
) -> list[AgentProfileOut]:
    """The caller's profiles, oldest first (creation order), paged by `limit` and `offset`."""
    return [AgentProfileOut.of(p) for p in store.list(str(user.user_id), limit, offset)]


@router.get("/{profile_id}", response_model=AgentProfileOut, responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def get_profile(profile_id: UUID, user: CurrentPrincipal, store: Store) -> AgentProfileOut:
    """One of the caller's profiles (404 if unknown or another user's; 422 if the id is not a UUID)."""
    return AgentProfileOut.of(store.get(str(user.user_id), str(profile_id)))


@router.put("/{profile_id}", response_model=AgentProfileOut,
            responses=error_responses(400, *AUTH_ERRORS, 404, 409, 413, 422, 503))
def update_profile(profile_id: UUID, body: AgentProfileUpdate, user: CurrentPrincipal,
                   store: Store) -> AgentProfileOut:
    """Change only the supplied fields (the same rules as creation); `style` and
    `inference_overrides` are merged key by key, and an override set to `null` is cleared. Any
    other field set to `null` is 422. `{}` changes nothing but `updated_at`. A new name taken by
    another of the caller's profiles is 409 `CONFLICT`; changing only the case of a name is
    allowed. The response is the whole updated profile."""
    return AgentProfileOut.of(store.update(str(user.user_id), str(profile_id), body.changes()))


@router.delete("/{profile_id}", status_code=204, response_class=Response,
               responses=error_responses(*AUTH_ERRORS, 404, 422, 503))
def delete_profile(profile_id: UUID, user: CurrentPrincipal, store: Store) -> Response:
    """Delete one of the caller's profiles (204; 404 if unknown or another user's). Chat requests
    naming its id afterwards are 422; `@name` mentions of it become plain text."""
    store.delete(str(user.user_id), str(profile_id))
    return Response(status_code=204)
