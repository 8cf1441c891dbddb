"""Implicit feedback from sanitation's quality signals: re-asks and corrections.

Sanitation's quality assessment (:mod:`assistant.sanitation.quality`) counts, over a user's
conversations, the follow-up messages that **re-ask** the previous question (token Jaccard >= 0.8, or
MiniLM cosine >= 0.85) and the messages with a **correction** cue ("actually", "that's wrong", "I
meant", ...). The same detectors run here, but on each answer instead of a rate:

- a user message that corrects the answer before it -> a ``correction`` row: a -1 rating of that answer;
- a user message that re-asks the previous question -> a ``re_ask`` row: a -1 rating of the answer the
  user re-asked after. When the answer to the re-ask was then **accepted** (the user's next message is
  neither a re-ask nor a correction), that answer becomes a training sample for the first question
  (``source = "implicit"``). A re-ask not settled yet is re-examined on the next capture.

:func:`capture` runs when sanitation publishes a ``QualityScore`` signal for a user (the training
service subscribes to the signal bus) and before a feedback run gathers its samples. It is idempotent:
a row already stored is left alone (or completed when its re-ask has since been settled).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from assistant.chat.conversations import StoredMessage
from assistant.clock import epoch_of
from assistant.learning.feedback import CORRECTION, RE_ASK, FeedbackStore
from assistant.sanitation.quality import is_correction, re_asks

log = logging.getLogger("assistant.learning")

MAX_CONVERSATIONS = 1000  # the most recently updated conversations examined per capture (bounded work)
PAGE = 100


def _turns(thread: Sequence[StoredMessage]) -> list[StoredMessage]:
    return [m for m in thread if m.role in ("user", "assistant")]


def _signals(thread: Sequence[StoredMessage]) -> list[tuple[int, int, int]]:
    """``(previous user turn, answer between, this user turn)`` index triples of a conversation's turns."""
    out, previous, answer = [], None, None
    for i, m in enumerate(thread):
        if m.role == "assistant":
            answer = i
        elif m.role == "user":
            if previous is not None and answer is not None and answer > previous:
                out.append((previous, answer, i))
            previous, answer = i, None
    return out


def capture(store: FeedbackStore, user_id: str, embedder: Any = None, since: float | None = None) -> int:
    """Record the implicit feedback of ``user_id``'s conversations updated at or after ``since`` (epoch
    seconds; None: the :data:`MAX_CONVERSATIONS` most recent). Returns how many rows were added or completed."""
    conversations = store.conversations
    threads: list[tuple[str, list[StoredMessage]]] = []
    offset = 0
    while offset < MAX_CONVERSATIONS:
        page = conversations.list(str(user_id), limit=PAGE, offset=offset)
        stop = False
        for conversation in page:
            if since is not None and epoch_of(conversation.updated_at) < since:
                stop = True
                break
            threads.append((conversation.id, _turns(conversations.messages(conversation.id))))
        if stop or len(page) < PAGE:
            break
        offset += PAGE
    found: list[tuple[str, list[StoredMessage], tuple[int, int, int]]] = []
    for conversation_id, thread in threads:
        found.extend((conversation_id, thread, triple) for triple in _signals(thread))
    corrected = [is_correction(thread[t[2]].content) for _, thread, t in found]
    repeated = re_asks([(thread[t[0]].content, thread[t[2]].content) for _, thread, t in found], embedder)
    verdict = {(c, t): (fix, again) for (c, _, t), fix, again in zip(found, corrected, repeated, strict=True)}
    added = 0
    for conversation_id, thread, (previous, answer, asked) in found:
        fix, again = verdict[(conversation_id, (previous, answer, asked))]
        if fix:
            added += store.record_implicit(user_id, thread[answer].id, conversation_id, CORRECTION,
                                           thread[asked].content)
        elif again:
            added += store.record_implicit(user_id, thread[answer].id, conversation_id, RE_ASK, thread[asked].content,
                                           _accepted(thread, asked, verdict, conversation_id))
    if added:
        log.info("implicit feedback: %d rows for user %s", added, user_id)
    return added


def _accepted(thread: list[StoredMessage], asked: int, verdict: dict, conversation_id: str) -> str | None:
    """The id of the answer to the re-ask at ``asked`` when the user's next message neither re-asks nor
    corrects it (the user moved on); None while the conversation has not gone on."""
    answer = next((i for i in range(asked + 1, len(thread)) if thread[i].role == "assistant"), None)
    if answer is None:
        return None
    following = next((i for i in range(answer + 1, len(thread)) if thread[i].role == "user"), None)
    if following is None:
        return None
    fix, again = verdict.get((conversation_id, (asked, answer, following)), (False, False))
    return None if fix or again else thread[answer].id
