"""The conversation quality assessment (``GET /v1/sanitation/quality`` and each run's record).

score = 1 - (re_ask_rate x W_re_ask + correction_rate x W_correction + abandonment_rate x W_abandon),
the weights from ``[sanitation]`` (0.4, 0.4, 0.2), clamped to 0..1, over the user's messages since
their last completed run (``since``; all of them before the first run). The conversations are read
from the :class:`~assistant.chat.conversations.ConversationStore` (which opens the sealed texts);
``tool`` notes are not turns and are skipped.

- **re-ask rate** = re-asks / follow-up user messages in the window. A follow-up is a user message
  with an earlier user message in the same conversation (the first message of a conversation cannot
  repeat anything, so it would only dilute the rate). It is a re-ask when it says again what that
  previous message said: token Jaccard >= :data:`LEXICAL_REASK` (cheap, no model), else cosine of
  the memory embedder's vectors >= :data:`REASK_COSINE`. 0.85 on MiniLM (all-MiniLM-L6-v2), measured
  on hand-written pairs (so not a held-out figure; the integration test keeps them): 10 rephrased
  questions score 0.80..1.00 (median 0.95; 8 of 10 reach 0.85), 10 same-topic follow-ups ("and
  London?", "move it to Friday") median 0.41, but "weather today?" -> "weather tomorrow?" scores 0.90
  (a known false re-ask); of 2,490 consecutive same-speaker turns in LoCoMo dev, 0.04 % reach 0.85
  (0.2 % at 0.80). Messages under :data:`MIN_WORDS` words ("ok", "thanks!") are never re-asks.
- **correction rate** = user messages in the window carrying the learning heuristic's correction
  cue (:data:`assistant.memory.learning.CUES` ``["correction"]``: "actually", "that's wrong",
  "I meant", "no, ..." ...) / user messages in the window.
- **abandonment rate** = abandoned / conversations with a user message in the window. Abandoned
  (the spec: "last message unanswered or followed by no reply within the session window"): the
  user's last message in the conversation has no reply after it, or an empty one, or its reply came
  :data:`SESSION_WINDOW_SECS` or more after it (the user had gone). A conversation that simply ends
  after an answer is not abandoned: every finished conversation does. Note that the chat service
  stores a question together with its reply, and nothing when generation fails, so today this
  mostly sees the replies that never were stored with their question (a tool note, a late approval).

Trend: the score against the mean of the last :data:`TREND_RUNS` previous scores (runs that had
messages), a dead band of :data:`TREND_DEAD_BAND`: Improving above, Degrading below, Stable
within (and with no history). Regression (the ``QualityRegression`` event): the previous score minus
this one >= ``quality_regression_threshold``. A window without user messages scores 1.0, trend
Stable, and says there is nothing to judge.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from assistant.clock import epoch_of, iso_at
from assistant.embeddings.base import normalise
from assistant.memory.learning import CUES
from assistant.sanitation.types import QualityAssessment, Trend

REASK_COSINE = 0.85  # MiniLM cosine from which a follow-up repeats the previous message
LEXICAL_REASK = 0.8  # token Jaccard from which it is a repeat without asking the embedder
MIN_WORDS = 3  # shorter messages are acknowledgements, never re-asks
SESSION_WINDOW_SECS = 1800.0  # a reply later than this after the question came to nobody (candidate setting)
TREND_RUNS = 3
TREND_DEAD_BAND = 0.02
MAX_CONVERSATIONS = 1000  # the most recently updated conversations read per assessment (bounded work)
PAGE = 100
_WORD = re.compile(r"\w+")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Turn:
    role: str
    text: str
    ts: float


@dataclass(frozen=True)
class Rates:
    user_messages: int
    follow_ups: int
    re_asks: int
    corrections: int
    conversations: int
    abandoned: int

    @property
    def re_ask_rate(self) -> float:
        return self.re_asks / self.follow_ups if self.follow_ups else 0.0

    @property
    def correction_rate(self) -> float:
        return self.corrections / self.user_messages if self.user_messages else 0.0

    @property
    def abandonment_rate(self) -> float:
        return self.abandoned / self.conversations if self.conversations else 0.0


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def jaccard(a: str, b: str) -> float:
    x, y = words(a), words(b)
    return len(x & y) / len(x | y) if x | y else 0.0


def is_correction(text: str) -> bool:
    return CUES["correction"].search(text) is not None


def re_asks(pairs: Sequence[tuple[str, str]], embedder: Any = None) -> list[bool]:
    """For each (previous, current) user message pair: does ``current`` repeat ``previous``?"""
    out: list[bool | None] = []
    for previous, current in pairs:
        if len(_WORD.findall(current)) < MIN_WORDS or len(_WORD.findall(previous)) < MIN_WORDS:
            out.append(False)
        elif jaccard(previous, current) >= LEXICAL_REASK:
            out.append(True)
        else:
            out.append(None)  # the embedder decides
    undecided = [i for i, v in enumerate(out) if v is None]
    if undecided and embedder is not None:
        texts = sorted({t for i in undecided for t in pairs[i]})
        index = {t: n for n, t in enumerate(texts)}
        try:
            vectors = normalise(np.asarray(embedder.embed(texts), dtype=np.float32))
        except Exception:  # a failing embedder leaves the lexical repeats; it never fails the run
            log.warning("re-ask detection without the embedder (it failed): lexical repeats only", exc_info=True)
            return [bool(v) for v in out]
        for i in undecided:
            a, b = pairs[i]
            out[i] = float(vectors[index[a]] @ vectors[index[b]]) >= REASK_COSINE
    return [bool(v) for v in out]


def turns(conversations: Any, conversation_id: str) -> list[Turn]:
    return [Turn(m.role, m.content, epoch_of(m.created_at)) for m in conversations.messages(conversation_id)
            if m.role in ("user", "assistant")]


def window_conversations(conversations: Any, user_id: str, since: float | None) -> list[list[Turn]]:
    """The turns of each conversation of ``user_id`` updated in the window (most recent first)."""
    out: list[list[Turn]] = []
    offset = 0
    while offset < MAX_CONVERSATIONS:
        page = conversations.list(user_id, limit=PAGE, offset=offset)
        for conversation in page:
            if since is not None and epoch_of(conversation.updated_at) < since:
                return out
            out.append(turns(conversations, conversation.id))
        if len(page) < PAGE:
            break
        offset += PAGE
    return out


def measure(conversations: Sequence[Sequence[Turn]], since: float | None, now: float,
            embedder: Any = None) -> Rates:
    """Count the three signals over the turns at or after ``since`` (and not after ``now``)."""
    user_messages = corrections = judged = abandoned = 0
    pairs: list[tuple[str, str]] = []
    last_user: dict[int, Turn] = {}  # conversation -> its last user turn in the window
    for n, conversation in enumerate(conversations):
        previous: Turn | None = None
        for turn in conversation:
            if turn.ts > now or turn.role != "user":
                continue
            if since is None or turn.ts >= since:
                user_messages += 1
                corrections += is_correction(turn.text)
                if previous is not None:
                    pairs.append((previous.text, turn.text))
                last_user[n] = turn
            previous = turn
    repeated = re_asks(pairs, embedder)
    for n, turn in last_user.items():
        judged += 1
        turns_n = conversations[n]
        position = next(i for i, t in enumerate(turns_n) if t is turn)
        reply = next((t for t in turns_n[position + 1:] if t.role == "assistant" and t.ts <= now), None)
        if reply is None or not reply.text.strip() or reply.ts - turn.ts >= SESSION_WINDOW_SECS:
            abandoned += 1
    return Rates(user_messages, len(pairs), sum(repeated), corrections, judged, abandoned)


def score_of(rates: Rates, settings: Any) -> float:
    penalty = (rates.re_ask_rate * settings.quality_re_ask_weight
               + rates.correction_rate * settings.quality_correction_weight
               + rates.abandonment_rate * settings.quality_abandonment_weight)
    return round(min(1.0, max(0.0, 1.0 - penalty)), 4)


def previous_scores(history: Sequence[Any]) -> list[float]:
    """The scores of earlier completed runs that had messages to judge, oldest first."""
    out = []
    for result in history:
        get = result.get if isinstance(result, dict) else lambda key, r=result: getattr(r, key, None)
        quality, status = get("quality"), get("status")
        if status in (None, "completed") and quality and quality.get("messages", 0) > 0 and quality.get("score") is not None:
            out.append(float(quality["score"]))
    return out


def trend_of(score: float, previous: Sequence[float]) -> Trend:
    if not previous:
        return Trend.STABLE
    recent = previous[-TREND_RUNS:]
    delta = score - sum(recent) / len(recent)
    if delta > TREND_DEAD_BAND:
        return Trend.IMPROVING
    if delta < -TREND_DEAD_BAND:
        return Trend.DEGRADING
    return Trend.STABLE


def recommendations(rates: Rates, settings: Any, drop: float | None = None) -> list[str]:
    if rates.user_messages == 0:
        return ["No user messages since the last run: nothing to judge."]
    parts = [
        (rates.re_ask_rate * settings.quality_re_ask_weight,
         f"Re-asks {rates.re_ask_rate:.0%} ({rates.re_asks} of {rates.follow_ups} follow-ups): answers miss the "
         "question; raise memory.rag_limit so more context reaches the model, or check that the engine is not "
         "cutting replies short."),
        (rates.correction_rate * settings.quality_correction_weight,
         f"Corrections {rates.correction_rate:.0%} ({rates.corrections} of {rates.user_messages} messages): the "
         "assistant states wrong things; review the memories behind the corrected answers (contradicted ones "
         "are quarantined by sanitation) and lower inference.temperature."),
        (rates.abandonment_rate * settings.quality_abandonment_weight,
         f"Abandoned {rates.abandonment_rate:.0%} ({rates.abandoned} of {rates.conversations} conversations): "
         "questions went unanswered or were answered after the user had gone; check engine errors and "
         "timeouts (/metrics), the anomalies of the last run and pending tool approvals."),
    ]
    out = [text for weight, text in sorted(parts, key=lambda p: -p[0]) if weight > 0]
    if drop is not None and drop >= settings.quality_regression_threshold:
        out.insert(0, f"Quality fell by {drop:.2f} since the previous run: start with the largest component below.")
    return out or ["No re-asks, corrections or abandoned conversations since the last run: nothing to change."]


def assess(deps: Any, user_id: str, history: Sequence[Any] = (), since: float | None = None,
           now: float | None = None) -> QualityAssessment:
    """The quality of ``user_id``'s conversations since ``since`` (default: their last completed run)."""
    now = deps.clock() if now is None else now
    if since is None:
        since = deps.store.last_run_ts(user_id)
    settings = deps.settings
    store = getattr(deps, "conversations", None)
    found = [] if store is None else window_conversations(store, str(user_id), since)
    embedder = getattr(getattr(deps, "memory", None), "embedder", None)
    rates = measure(found, since, now, embedder)
    score = score_of(rates, settings)
    earlier = previous_scores(history)
    judged = rates.user_messages > 0
    drop = round(earlier[-1] - score, 4) if judged and earlier else None
    regression = drop is not None and drop >= settings.quality_regression_threshold
    return QualityAssessment(
        score=score, re_ask_rate=round(rates.re_ask_rate, 4), correction_rate=round(rates.correction_rate, 4),
        abandonment_rate=round(rates.abandonment_rate, 4),
        trend=trend_of(score, earlier) if judged else Trend.STABLE,
        recommendations=recommendations(rates, settings, drop), messages=rates.user_messages,
        conversations=rates.conversations, window_start=None if since is None else iso_at(since),
        window_end=iso_at(now), regression=regression)
