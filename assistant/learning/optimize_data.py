"""The objective's data from the user's own history: which memories reached each answer, which of them
the answer used or feedback marked useful, and how the answer fared.

For each recorded answer (an explanation, :mod:`assistant.extended.explain`; the most recent
``MAX_ANSWERS``) whose memories step lists injected memories:

- the question is the user message the answer replied to (the message before it in the conversation);
- **used** (:func:`used_by`): an injected memory whose distinctive words reached the answer, i.e. at
  least ``min(2, n)`` of its ``n`` words of 4+ letters that are not in the question nor in
  :data:`STOP_WORDS` appear in the answer. A memory the answer drew on leaves its names, places and
  numbers in it; one that merely sat in the prompt does not;
- **useful**: the memories the user's feedback on that answer names (``useful_memory_ids``, when the
  feedback store is wired), whether injected or not: a memory the user wanted there;
- **quality**: ``1 - (re-asked x W_re_ask + corrected x W_correction)`` over the user's next message in
  the conversation, with sanitation's detectors (:func:`assistant.sanitation.quality.re_asks`,
  :func:`~assistant.sanitation.quality.is_correction`) and weights (``[sanitation]
  quality_re_ask_weight``, ``quality_correction_weight``: 0.4 each), as in its quality score;
- positives = used | useful; negatives = injected - positives when the quality is below 1.

An answer with neither positives nor negatives says nothing about retrieval and is left out. Features
are those of the memories as they are now (deleted memories drop out; a positive that no longer exists
is dropped too).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from assistant.learning.optimize_score import Case
from assistant.memory.candidates import features

MAX_ANSWERS = 500
STOP_WORDS = frozenset("""about above after again against also because been before being below between both could
does doing down during each from further have having here itself just more most once only other ours ourselves
over same should some such than that their theirs them themselves then there these they this those through under
until very were what when where which while whom will with would your yours yourself yourselves said""".split())
_WORD = re.compile(r"[^\W\d_][\w'-]*|\d[\d.,:/-]*", re.UNICODE)


class UsefulMemories(Protocol):
    def useful_memories(self, user_id: str) -> Mapping[str, Sequence[str]]:
        """answer message id -> the memory ids the user's feedback marked useful for it."""


def distinctive(text: str, exclude: set[str] | frozenset[str] = frozenset()) -> set[str]:
    words = {w.lower().strip("'-") for w in _WORD.findall(text)}
    return {w for w in words if (len(w) >= 4 or w[:1].isdigit()) and w not in STOP_WORDS and w not in exclude}


def used_by(answer: str, memory: str, question: str) -> bool:
    """Did ``answer`` draw on ``memory``? (see the module: at least min(2, n) of its distinctive words)."""
    own = distinctive(memory, distinctive(question))
    if not own:
        return False
    return len(own & distinctive(answer)) >= min(2, len(own))


def answer_quality(question: str, next_message: str | None, settings: Any, embedder: Any = None) -> float:
    """1 - (re-asked x quality_re_ask_weight + corrected x quality_correction_weight), 1.0 without a next message."""
    from assistant.sanitation.quality import is_correction, re_asks

    if not next_message:
        return 1.0
    re_asked = re_asks([(question, next_message)], embedder)[0]
    corrected = is_correction(next_message)
    penalty = re_asked * settings.quality_re_ask_weight + corrected * settings.quality_correction_weight
    return min(1.0, max(0.0, 1.0 - penalty))


def user_cases(user_id: str, *, memory: Any, explanations: Any, conversations: Any, sanitation: Any,
               useful: UsefulMemories | None = None, decay_factor: float, now: float | None = None,
               limit: int = MAX_ANSWERS) -> list[Case]:
    """The user's cases (see the module), features computed now, questions embedded in one batch."""
    user = str(user_id)
    now = time.time() if now is None else now
    marked = dict(useful.useful_memories(user)) if useful is not None else {}
    threads: dict[str, list] = {}
    drafts = []
    for explanation in explanations.recent(user, limit):
        injected = [c["id"] for step in explanation.step("memories") for c in step.data.get("candidates", [])
                    if c.get("status") == "injected"]
        if not injected and explanation.message_id not in marked:
            continue
        thread = threads.get(explanation.conversation_id)
        if thread is None:
            thread = threads[explanation.conversation_id] = conversations.messages(explanation.conversation_id)
        position = next((i for i, m in enumerate(thread) if m.id == explanation.message_id), None)
        if position is None:
            continue
        question = next((m.content for m in reversed(thread[:position]) if m.role == "user"), None)
        if not question:
            continue
        following = next((m.content for m in thread[position + 1:] if m.role == "user"), None)
        drafts.append((explanation, thread[position].content, question, following, injected))
    if not drafts:
        return []
    embedder = memory.embedder
    vectors = np.asarray(embedder.embed([d[2] for d in drafts]), dtype=np.float32)
    rate = -math.log(decay_factor)
    cases = []
    for (explanation, answer, question, following, injected), vector in zip(drafts, vectors, strict=True):
        contents = {}
        for memory_id in dict.fromkeys([*injected, *marked.get(explanation.message_id, ())]):
            try:
                contents[memory_id] = memory.get(user, memory_id).content
            except Exception:  # deleted since (NotFoundError): it can no longer be retrieved
                continue
        used = {m for m in injected if m in contents and used_by(answer, contents[m], question)}
        positives = frozenset(used | {m for m in marked.get(explanation.message_id, ()) if m in contents})
        quality = answer_quality(question, following, sanitation, embedder)
        negatives = frozenset(m for m in injected if m in contents and m not in positives) if quality < 1 else frozenset()
        if not positives and not negatives:
            continue
        found = features(memory, user, question, vector, now=now, pool=250)
        cases.append(Case(explanation.message_id, explanation.conversation_id, found, positives, negatives, quality,
                          rate))
    return cases
