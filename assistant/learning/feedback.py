"""Feedback on the assistant's answers, and the training samples it yields.

A feedback row rates one **assistant message of the user's own conversations** (another user's or
an unknown message is :class:`NotFoundError`, the same error either way). ``rating`` is -1 (bad),
0 (neutral) or +1 (good). Optional texts: ``preferred_answer`` (the whole answer the assistant should
have given) and ``correction`` (what was wrong, or the right fact, in the user's words);
``useful_memory_ids`` names the memories that helped (the optimisation of retrieval parameters reads
them, :meth:`FeedbackStore.useful_memories`). A second feedback on the same message replaces the
first. The texts are sealed per user (``training_feedback.body_sealed``, bound to the row and user).

What becomes a training sample (supervised fine-tuning: the conversation up to the question, then the
answer to learn) and what is only a rating:

============================  ================================================  ===============
feedback                      answer trained on                                 ``source``
============================  ================================================  ===============
``preferred_answer`` given    the preferred answer                              ``preferred``
``correction`` only           the correction, as the answer                     ``correction``
rating +1, no text            the rated answer itself (an approved answer)      ``preferred``
rating 0 or -1, no text       nothing: a rating only                            -
implicit re-ask, accepted     the answer to the re-ask, for the first question  ``implicit``
implicit re-ask, not settled  nothing: a -1 rating of the first answer          -
implicit correction           nothing: a -1 rating of the corrected answer      -
============================  ================================================  ===============

Implicit rows come from sanitation's quality signals (:mod:`assistant.learning.implicit`). A
sample's prompt is ``inference.system_prompt`` then the last ``lora.context_messages`` user and
assistant messages before the question, then the question; ``tool`` notes are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID, uuid4

from assistant.chat.conversations import ConversationStore, StoredMessage
from assistant.clock import iso
from assistant.crypto import SealContext, Sealer
from assistant.errors import NotFoundError, ValidationFailed
from assistant.learning.types import SampleSource, TrainingSample
from assistant.storage.db import Database

RATINGS = (-1, 0, 1)
EXPLICIT, RE_ASK, CORRECTION = "explicit", "re_ask", "correction"
KINDS = (EXPLICIT, RE_ASK, CORRECTION)
MAX_TEXT = 8000  # characters of a correction or a preferred answer
MAX_MEMORY_IDS = 50
TABLE, COLUMN = "training_feedback", "body_sealed"


@dataclass(frozen=True)
class Feedback:
    id: str
    user_id: str
    message_id: str
    conversation_id: str
    kind: str  # explicit | re_ask | correction
    rating: int
    sample: bool  # it yields a training sample (see the module docstring)
    created_at: str
    updated_at: str
    correction: str | None = None
    preferred_answer: str | None = None
    evidence: str | None = None  # implicit rows: the user's message that re-asked or corrected
    accepted_message_id: str | None = None  # implicit re-ask: the answer the user accepted
    useful_memory_ids: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "message_id": self.message_id, "conversation_id": self.conversation_id,
                "kind": self.kind, "rating": self.rating, "sample": self.sample, "correction": self.correction,
                "preferred_answer": self.preferred_answer, "useful_memory_ids": list(self.useful_memory_ids),
                "created_at": self.created_at, "updated_at": self.updated_at}


@dataclass(frozen=True)
class FeedbackCounts:
    feedback: int  # rows, explicit and implicit
    samples: int  # rows that yield a training sample
    new_samples: int  # of those, created or changed after the watermark (the last evaluated run)
    positive: int
    neutral: int
    negative: int
    implicit: int

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class LabelledSample:
    """A sample with the id it comes from (the held-back split hashes it: a held-back sample stays held back)."""

    key: str
    sample: TrainingSample
    updated_at: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def sample_key(sample: TrainingSample) -> str:
    """A stable id of a sample given as a value (distillation's): a digest of its prompt and answer."""
    payload = json.dumps([list(sample.messages), sample.answer], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def _clean(text: str | None, name: str) -> str | None:
    if text is None:
        return None
    text = text.strip()
    if not text:
        return None
    if len(text) > MAX_TEXT:
        error = f"must be at most {MAX_TEXT} characters (got {len(text)})"
        raise ValidationFailed(f"{name} {error}", [{"field": name, "error": error}])
    return text


class FeedbackStore:
    """The ``training_feedback`` table (see the module docstring). ``system_prompt`` and
    ``context_messages`` shape the samples' prompts as the chat service shapes a request."""

    def __init__(self, db: Database, sealer: Sealer, conversations: ConversationStore, *, system_prompt: str = "",
                 context_messages: int = 6):
        self.db = db
        self.sealer = sealer
        self.conversations = conversations
        self.system_prompt = system_prompt
        self.context_messages = context_messages

    # --- writing ------------------------------------------------------------------------------------

    def assistant_message(self, user_id: str, message_id: str) -> tuple[str, str]:
        """``(conversation_id, role)`` of a message of ``user_id``'s conversations; NotFoundError
        (the same for an unknown message and another user's) otherwise."""
        row = self.db.one("SELECT m.conversation_id, m.role FROM messages m JOIN conversations c "
                          "ON c.id = m.conversation_id WHERE m.id = ? AND c.user_id = ?", (str(message_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"message {message_id} not found")
        return row["conversation_id"], row["role"]

    def submit(self, user_id: UUID | str, message_id: UUID | str, rating: int, *, correction: str | None = None,
               preferred_answer: str | None = None, useful_memory_ids: Iterable[str] = ()) -> Feedback:
        """Store (or replace) the user's feedback on one of their assistant messages."""
        user, message = str(user_id), str(message_id)
        fields = []
        if rating not in RATINGS:
            fields.append({"field": "rating", "error": f"must be -1, 0 or 1 (got {rating})"})
        memories = tuple(dict.fromkeys(str(m) for m in useful_memory_ids))
        if len(memories) > MAX_MEMORY_IDS:
            fields.append({"field": "useful_memory_ids", "error": f"at most {MAX_MEMORY_IDS} ids"})
        if fields:
            raise ValidationFailed("; ".join(f"{f['field']} {f['error']}" for f in fields), fields)
        correction, preferred = _clean(correction, "correction"), _clean(preferred_answer, "preferred_answer")
        conversation_id, role = self.assistant_message(user, message)
        if role != "assistant":
            error = f"is a {role} message; feedback rates an answer of the assistant"
            raise ValidationFailed(f"message_id {error}", [{"field": "message_id", "error": error}])
        sample = preferred is not None or correction is not None or rating == 1
        body = {"correction": correction, "preferred_answer": preferred}
        return self._upsert(user, message, conversation_id, EXPLICIT, rating, sample, body, memories)

    def _upsert(self, user: str, message: str, conversation_id: str, kind: str, rating: int, sample: bool,
                body: dict[str, Any], memories: tuple[str, ...] = ()) -> Feedback:
        now = iso()
        with self.db.transaction() as db:
            found = db.one("SELECT id, created_at FROM training_feedback WHERE user_id = ? AND message_id = ? "
                           "AND kind = ?", (user, message, kind))
            ident = found["id"] if found else str(uuid4())
            created = found["created_at"] if found else now
            sealed = self.sealer.seal(json.dumps(body, ensure_ascii=False), SealContext(TABLE, COLUMN, ident, user))
            if found:
                db.execute("UPDATE training_feedback SET rating = ?, sample = ?, body_sealed = ?, useful_memory_ids = ?, "
                           "updated_at = ? WHERE id = ?", (rating, int(sample), sealed, json.dumps(memories), now, ident))
            else:
                db.execute("INSERT INTO training_feedback (id, user_id, message_id, conversation_id, kind, rating, "
                           "sample, body_sealed, useful_memory_ids, created_at, updated_at) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (ident, user, message, conversation_id, kind, rating, int(sample), sealed,
                            json.dumps(memories), created, now))
        return Feedback(ident, user, message, conversation_id, kind, rating, sample, created, now,
                        body.get("correction"), body.get("preferred_answer"), body.get("evidence"),
                        body.get("accepted_message_id"), memories)

    def record_implicit(self, user_id: str, message_id: str, conversation_id: str, kind: str, evidence: str,
                        accepted_message_id: str | None = None) -> bool:
        """An implicit -1 rating of ``message_id`` (``re_ask`` or ``correction``); a sample when a re-ask
        was settled by ``accepted_message_id``. False when the same row is already stored."""
        sample = kind == RE_ASK and accepted_message_id is not None
        found = self.db.one("SELECT sample FROM training_feedback WHERE user_id = ? AND message_id = ? AND kind = ?",
                            (str(user_id), str(message_id), kind))
        if found is not None and bool(found["sample"]) == sample:
            return False
        self._upsert(str(user_id), str(message_id), conversation_id, kind, -1, sample,
                     {"evidence": evidence, "accepted_message_id": accepted_message_id})
        return True

    # --- reading ------------------------------------------------------------------------------------

    def _row(self, row: dict[str, Any]) -> Feedback:
        body = json.loads(self.sealer.open(row["body_sealed"], SealContext(TABLE, COLUMN, row["id"], row["user_id"])))
        return Feedback(row["id"], row["user_id"], row["message_id"], row["conversation_id"], row["kind"],
                        int(row["rating"]), bool(row["sample"]), row["created_at"], row["updated_at"],
                        body.get("correction"), body.get("preferred_answer"), body.get("evidence"),
                        body.get("accepted_message_id"), tuple(json.loads(row["useful_memory_ids"] or "[]")))

    def get(self, user_id: str, feedback_id: str) -> Feedback:
        row = self.db.one("SELECT * FROM training_feedback WHERE id = ? AND user_id = ?", (str(feedback_id), str(user_id)))
        if row is None:
            raise NotFoundError(f"feedback {feedback_id} not found")
        return self._row(row)

    def list(self, user_id: str, *, limit: int = 100, offset: int = 0, kind: str | None = None) -> list[Feedback]:
        where, params = "user_id = ?", [str(user_id)]
        if kind is not None:
            where, params = where + " AND kind = ?", [*params, kind]
        rows = self.db.query(f"SELECT * FROM training_feedback WHERE {where} "  # noqa: S608 (fixed clauses)
                             "ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?", (*params, limit, offset))
        return [self._row(r) for r in rows]

    def counts(self, user_id: str, watermark: str | None = None) -> FeedbackCounts:
        """How many rows, samples and new samples (changed after ``watermark``) the user has."""
        row = self.db.one(
            "SELECT COUNT(*) AS feedback, COALESCE(SUM(sample), 0) AS samples, "
            "COALESCE(SUM(CASE WHEN sample = 1 AND (? IS NULL OR updated_at > ?) THEN 1 ELSE 0 END), 0) AS new_samples, "
            "COALESCE(SUM(rating = 1), 0) AS positive, COALESCE(SUM(rating = 0), 0) AS neutral, "
            "COALESCE(SUM(rating = -1), 0) AS negative, COALESCE(SUM(kind != 'explicit'), 0) AS implicit "
            "FROM training_feedback WHERE user_id = ?", (watermark, watermark, str(user_id)))
        return FeedbackCounts(**{k: int(v or 0) for k, v in (row or {}).items()})

    def latest_update(self, user_id: str) -> str | None:
        """The newest ``updated_at`` of the user's sample rows: a run's watermark."""
        return self.db.scalar("SELECT MAX(updated_at) FROM training_feedback WHERE user_id = ? AND sample = 1",
                              (str(user_id),))

    def useful_memories(self, user_id: str) -> dict[str, tuple[str, ...]]:
        """``{message_id: memory ids the user marked useful}`` over the user's explicit feedback."""
        rows = self.db.query("SELECT message_id, useful_memory_ids FROM training_feedback WHERE user_id = ? "
                             "AND kind = 'explicit' AND useful_memory_ids != '[]'", (str(user_id),))
        return {r["message_id"]: tuple(json.loads(r["useful_memory_ids"])) for r in rows}

    # --- samples ------------------------------------------------------------------------------------

    def labelled_samples(self, user_id: str) -> list[LabelledSample]:
        """Every training sample of the user's feedback (oldest first), with its feedback id. Rows whose
        message is gone (a deleted conversation) yield nothing."""
        rows = self.db.query("SELECT * FROM training_feedback WHERE user_id = ? AND sample = 1 ORDER BY created_at, rowid",
                             (str(user_id),))
        threads: dict[str, list[StoredMessage]] = {}
        out = []
        for row in rows:
            feedback = self._row(row)
            if feedback.conversation_id not in threads:
                threads[feedback.conversation_id] = self.conversations.messages(feedback.conversation_id)
            built = self._sample(feedback, threads[feedback.conversation_id])
            if built is not None:
                out.append(LabelledSample(feedback.id, built, feedback.updated_at,
                                          {"message_id": feedback.message_id, "kind": feedback.kind}))
        return out

    def samples(self, user_id: str) -> list[TrainingSample]:
        """The user's training samples (see the module docstring for what becomes one)."""
        return [s.sample for s in self.labelled_samples(user_id)]

    def _sample(self, feedback: Feedback, thread: list[StoredMessage]) -> TrainingSample | None:
        position = next((i for i, m in enumerate(thread) if m.id == feedback.message_id), None)
        if position is None:
            return None
        source: SampleSource
        if feedback.kind == EXPLICIT:
            if feedback.preferred_answer:
                answer, source = feedback.preferred_answer, "preferred"
            elif feedback.correction:
                answer, source = feedback.correction, "correction"
            else:
                answer, source = thread[position].content, "preferred"
        elif feedback.kind == RE_ASK and feedback.accepted_message_id:
            accepted = next((m for m in thread if m.id == feedback.accepted_message_id), None)
            if accepted is None:
                return None
            answer, source = accepted.content, "implicit"
        else:
            return None
        prompt = self.prompt(thread[:position])
        if prompt is None or not answer.strip():
            return None
        return TrainingSample(prompt, answer, source)

    def prompt(self, before: list[StoredMessage]) -> tuple[dict[str, str], ...] | None:
        """The system prompt, the last ``context_messages`` turns and the question (the last user
        message before the answer); None without a question."""
        turns = [m for m in before if m.role in ("user", "assistant")]
        last_user = max((i for i, m in enumerate(turns) if m.role == "user"), default=None)
        if last_user is None:
            return None
        turns = turns[:last_user + 1]
        kept = turns[-(self.context_messages + 1):]
        messages = [{"role": m.role, "content": m.content} for m in kept]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return tuple(messages)
