"""Explanations: `GET /api/chat/{message_id}/explain`, the provenance of one of the caller's answers.

Recorded while the answer was made (:mod:`assistant.extended.explain`), not reconstructed: the memories
in the running with their scores (injected or cut by the budget), insights, the precache, the defence,
the cognitive load, the prompt's sections, each model turn, tool call and approval, the tokens and the
timings. Role: any key (`read-only` included). Owner rule: the answer's user only; another user's
message is 404 exactly like an unknown one. While `sovereign_intelligence.enabled = false` nothing is
recorded and the route is 503 naming that key, checked before the id. The work is
:class:`assistant.extended.explain_store.ExplanationStore`'s.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter

from api.deps import ROLE_READ, CurrentPrincipal, service
from api.schemas.common import AUTH_ERRORS, error_responses
from api.schemas.explain import ExplanationOut
from assistant.extended.explain_store import ExplanationStore

DISABLED = "explanations are disabled (sovereign_intelligence.enabled = false)"
EXPLANATIONS = service("explanations", DISABLED)
Explanations = Annotated[ExplanationStore, EXPLANATIONS]
router = APIRouter(prefix="/api/chat", tags=["extended"], dependencies=[EXPLANATIONS])


@router.get("/{message_id}/explain", response_model=ExplanationOut,
            responses=error_responses(*AUTH_ERRORS, 404, 422, 503), summary="Why an answer is what it is",
            description="The decision provenance of one of the caller's answers, by its `message_id` (the `id` "
                        "of `POST /v1/chat`, the `message_id` of the stream's `done` event): `{steps, summary}` "
                        "as the spec shows it, each step `{kind, label, started_ms, duration_ms, data}` with times "
                        "from the turn's start (a waterfall), plus the engine and model, token counts, timings, "
                        "the precache hit and the turn's defence. Recorded when the answer was made. "
                        "Answers of the OpenAI-compatible `POST /v1/chat/completions` are not stored, so they "
                        "have no explanation.\n\n"
                        "404 `NOT_FOUND` for an unknown id or another user's message (the same answer); for one "
                        "of the caller's own messages without an explanation, `details.reason` says why: "
                        "`not_an_answer` (the user's own message), `predates_recording` (stored before "
                        "explanations were recorded; `details.recording_began_at`) or `not_recorded` (answered "
                        "while `sovereign_intelligence.enabled` was false). An id that is not a UUID is 422, as "
                        "on the other chat routes. 503 while `sovereign_intelligence.enabled = false`."
                        + ROLE_READ + "Only the caller's answers: another user's is 404, as an unknown one.")
def explain(message_id: UUID, user: CurrentPrincipal, store: Explanations) -> ExplanationOut:
    return ExplanationOut.of(store.get(user.user_id, message_id))
