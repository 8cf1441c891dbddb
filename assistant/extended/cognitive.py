"""Cognitive load: a weighted estimate of how loaded a user is now, from their own activity, and the
answer format it calls for (spec: ``[cognitive_load]``).

    load = (0.3 circadian + 0.25 duration + 0.2 latency + 0.15 complexity + 0.1 multitask) / sum of weights

The weights are ``[cognitive_load] circadian_weight`` ... ``multitask_weight``; the defaults sum to
1.0, so the load is the plain weighted sum (other weights are normalised so the load stays in 0..1).
Each component is in 0..1 and computed by a pure function below from the user's stored messages
(their conversations' timestamps and texts, :class:`ActivityReader`):

- **circadian** (:func:`circadian`): ``(1 + cos(2π (h − 4) / 24)) / 2`` with ``h`` the local hour
  (``[tool_calling] timezone``, with minutes as a fraction): 1.0 at 04:00, the trough of human
  alertness, 0.5 at 10:00 and 22:00, 0.0 at 16:00.
- **duration** (:func:`duration`): minutes since the current session began beyond
  ``fatigue_onset_minutes`` (30), over twice the onset: ``clip((m − 30) / 60)``: 0 up to 30 minutes,
  0.5 at an hour, 1.0 from 90 minutes. A session is the run of the user's messages (and the answers)
  with no gap longer than :data:`SESSION_GAP_MINUTES` (30) between two of them; the current message
  is its latest activity (:func:`session_start`).
- **latency** (:func:`latency`): the median of the user's last :data:`LATENCY_SAMPLES` reply
  latencies in the session (the time from an answer to the user's next message in that
  conversation), ``clip((s − 10) / (120 − 10))``: replies within 10 s are 0, 2 minutes or slower
  are 1.0. The store keeps one time per exchange (when the answer was stored), so a stored latency
  also holds the next answer's generation time; the current message's latency (now − the last answer
  in its conversation) is exact. Gaps longer than the session gap start a session: they are not
  latencies.
- **complexity** (:func:`complexity`): of each message, the mean of ``clip(characters / 400)``,
  ``clip(words / 80)`` and ``clip((clauses − 1) / 6)``, clauses being the pieces between
  punctuation (``. ! ? ; : ,``) and conjunctions (and, but, because, which, ... :data:`CONJUNCTIONS`);
  the component is the mean over the session's last :data:`COMPLEXITY_MESSAGES` user messages, the
  current one included.
- **multitask** (:func:`multitask`): over the last :data:`SESSION_GAP_MINUTES` minutes,
  ``max(clip((conversations − 1) / 3), clip(switches / 6))`` where ``conversations`` is the number
  of conversations the user wrote in (the current one included) and ``switches`` how often two
  consecutive user messages are in different conversations: one conversation is 0, four are 1.0.

The format (:func:`answer_format`, the load rounded to 4 decimals): ``TlDrFirst`` at load ≥
``tldr_first_threshold`` (0.7), ``BulletPoints`` at ≥ ``bullet_points_threshold`` (0.4), else
``Narrative``. The chat prompt gets the format's instruction (:data:`INSTRUCTIONS`) as a section of
its own; Narrative is the model's own way of answering, so below 0.4 no instruction is added and the
prompt (and its KV-cache prefix) stays as configured. Each answer publishes a
``CognitiveLoadEstimate`` signal (value: the load; data: the components and the format).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from assistant.clock import epoch_of, iso_at
from assistant.config import Settings
from assistant.config.extended import CognitiveLoadSettings
from assistant.crypto import SealContext, Sealer
from assistant.observability.signals import SignalBus, SignalKind
from assistant.storage.db import Database

SESSION_GAP_MINUTES = 30.0
LATENCY_FAST_SECS = 10.0
LATENCY_SLOW_SECS = 120.0
LATENCY_SAMPLES = 5
COMPLEXITY_MESSAGES = 5
COMPLEXITY_CHARS, COMPLEXITY_WORDS, COMPLEXITY_CLAUSES = 400.0, 80.0, 6.0
MULTITASK_CONVERSATIONS, MULTITASK_SWITCHES = 3.0, 6.0
CIRCADIAN_PEAK_HOUR = 4.0  # the hour of the lowest alertness (load 1.0)
MAX_ROWS = 1000  # the most recent messages read for one estimate
CONJUNCTIONS = ("and", "but", "or", "because", "since", "although", "though", "while", "whereas", "if", "unless",
                "when", "whenever", "which", "who", "whom", "whose", "that", "so", "then", "before", "after",
                "until")
COMPONENTS = ("circadian", "duration", "latency", "complexity", "multitask")
_CLAUSE_SPLIT = re.compile(r"[.!?;:,]+|\b(?:" + "|".join(CONJUNCTIONS) + r")\b", re.IGNORECASE)
_WORD = re.compile(r"\w+(?:['’-]\w+)*")


class AnswerFormat(StrEnum):
    NARRATIVE = "Narrative"
    BULLET_POINTS = "BulletPoints"
    TLDR_FIRST = "TlDrFirst"


INSTRUCTIONS = {
    AnswerFormat.NARRATIVE: "",
    AnswerFormat.BULLET_POINTS: (
        "Answer format: the user seems busy or tired. Answer in short bullet points, one idea per line, "
        "with no long paragraphs."),
    AnswerFormat.TLDR_FIRST: (
        "Answer format: the user seems overloaded. Start with one line 'TL;DR: ' that gives the answer, "
        "then add at most three short bullet points."),
}


def _clip(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


# --- the components (pure) -------------------------------------------------------------------------


def circadian(local_hour: float) -> float:
    """1.0 at 04:00, 0.0 at 16:00, a cosine in between (``local_hour`` 0..24, minutes as a fraction)."""
    return _clip((1.0 + math.cos(2.0 * math.pi * (local_hour - CIRCADIAN_PEAK_HOUR) / 24.0)) / 2.0)


def duration(session_minutes: float, fatigue_onset_minutes: float = 30.0) -> float:
    """0 up to the onset, then linear to 1.0 at three times the onset."""
    return _clip((session_minutes - fatigue_onset_minutes) / (2.0 * fatigue_onset_minutes))


def latency(reply_latency_secs: float | None) -> float:
    """0 at 10 s or faster, 1.0 at 2 minutes or slower; None (no reply yet in the session) is 0."""
    if reply_latency_secs is None:
        return 0.0
    return _clip((reply_latency_secs - LATENCY_FAST_SECS) / (LATENCY_SLOW_SECS - LATENCY_FAST_SECS))


def clauses(text: str) -> int:
    """The pieces of ``text`` between punctuation and conjunctions that hold a word (at least 1)."""
    return max(1, sum(1 for piece in _CLAUSE_SPLIT.split(text) if piece and _WORD.search(piece)))


def complexity(text: str) -> float:
    """The mean of length, word count and clause count, each scaled to 0..1."""
    if not text.strip():
        return 0.0
    words = len(_WORD.findall(text))
    return (_clip(len(text.strip()) / COMPLEXITY_CHARS) + _clip(words / COMPLEXITY_WORDS)
            + _clip((clauses(text) - 1) / COMPLEXITY_CLAUSES)) / 3.0


def multitask(conversations: int, switches: int) -> float:
    """One conversation and no switch is 0; four conversations, or six switches, are 1.0."""
    return max(_clip((conversations - 1) / MULTITASK_CONVERSATIONS), _clip(switches / MULTITASK_SWITCHES))


def weighted_load(components: dict[str, float], settings: CognitiveLoadSettings) -> float:
    """Σ weight × component / Σ weights (0 when every weight is 0)."""
    weights = weights_of(settings)
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    return _clip(sum(weights[k] * _clip(components.get(k, 0.0)) for k in COMPONENTS) / total)


def weights_of(settings: CognitiveLoadSettings) -> dict[str, float]:
    return {"circadian": settings.circadian_weight, "duration": settings.duration_weight,
            "latency": settings.latency_weight, "complexity": settings.complexity_weight,
            "multitask": settings.multitask_weight}


def answer_format(load: float, bullet_points: float = 0.4, tldr_first: float = 0.7) -> AnswerFormat:
    """TlDrFirst at ``load`` ≥ 0.7, BulletPoints at ≥ 0.4, Narrative below (load rounded to 4 places)."""
    load = round(load, 4)
    if load >= tldr_first:
        return AnswerFormat.TLDR_FIRST
    if load >= bullet_points:
        return AnswerFormat.BULLET_POINTS
    return AnswerFormat.NARRATIVE


# --- activity -> components (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class Activity:
    """One stored message of the user's: when (epoch seconds), its role and conversation, and (for
    the user's latest messages) its text; ``text`` None where it was not read."""

    ts: float
    role: str
    conversation_id: str
    text: str | None = None


def session_start(times: Sequence[float], now: float, gap_minutes: float = SESSION_GAP_MINUTES) -> float:
    """The start of the session that ``now`` ends: walking back from ``now`` through ``times``, the
    earliest one reached without a gap longer than ``gap_minutes``."""
    start = now
    for ts in sorted((t for t in times if t <= now), reverse=True):
        if start - ts > gap_minutes * 60:
            break
        start = ts
    return start


def reply_latencies(activity: Sequence[Activity], since: float) -> list[float]:
    """Seconds from an answer to the user's next message in the same conversation, for the user's
    messages at or after ``since`` (the session's start), in time order."""
    last_answer: dict[str, float] = {}
    out = []
    for a in sorted(activity, key=lambda x: x.ts):
        if a.role == "assistant":
            last_answer[a.conversation_id] = a.ts
        elif a.role == "user" and a.ts >= since and a.conversation_id in last_answer:
            gap = a.ts - last_answer[a.conversation_id]
            if 0 < gap <= SESSION_GAP_MINUTES * 60:
                out.append(gap)
    return out


@dataclass(frozen=True)
class LoadEstimate:
    load: float
    components: dict[str, float]
    format: AnswerFormat
    instruction: str
    details: dict[str, Any] = field(default_factory=dict)  # the measured inputs of the components
    weights: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"load": self.load, "components": dict(self.components), "format": self.format.value,
                "instruction": self.instruction, "weights": dict(self.weights), "details": dict(self.details)}


def estimate_from(activity: Sequence[Activity], now: float, settings: CognitiveLoadSettings, tz: ZoneInfo,
                  message: str | None = None, conversation_id: str | None = None) -> LoadEstimate:
    """The estimate at ``now`` from the user's stored ``activity``; ``message`` (in ``conversation_id``)
    is the one being answered, not stored yet."""
    current = [Activity(now, "user", conversation_id or "(new)", message)] if message is not None else []
    everything = sorted([*activity, *current], key=lambda a: a.ts)
    local = datetime.fromtimestamp(now, tz)
    hour = local.hour + local.minute / 60 + local.second / 3600
    start = session_start([a.ts for a in everything], now)
    minutes = (now - start) / 60
    samples = reply_latencies(everything, start)[-LATENCY_SAMPLES:]
    reply = statistics.median(samples) if samples else None
    users = [a for a in everything if a.role == "user" and a.ts >= start]
    texts = [a.text for a in users if a.text is not None][-COMPLEXITY_MESSAGES:]
    complexities = [complexity(t) for t in texts]
    window = [a for a in everything if a.role == "user" and a.ts >= now - SESSION_GAP_MINUTES * 60]
    conversations = len({a.conversation_id for a in window})
    switches = sum(1 for a, b in zip(window, window[1:], strict=False) if a.conversation_id != b.conversation_id)
    components = {
        "circadian": circadian(hour),
        "duration": duration(minutes, settings.fatigue_onset_minutes),
        "latency": latency(reply),
        "complexity": statistics.fmean(complexities) if complexities else 0.0,
        "multitask": multitask(conversations, switches),
    }
    components = {k: round(v, 4) for k, v in components.items()}
    load = round(weighted_load(components, settings), 4)
    fmt = answer_format(load, settings.bullet_points_threshold, settings.tldr_first_threshold)
    details = {"local_time": local.isoformat(timespec="seconds"), "session_started_at":
               datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds"),
               "session_minutes": round(minutes, 2), "reply_latency_secs": None if reply is None else round(reply, 3),
               "latency_samples": len(samples), "messages_in_session": len(users),
               "complexity_messages": len(texts), "conversations_in_window": conversations,
               "conversation_switches": switches}
    return LoadEstimate(load, components, fmt, INSTRUCTIONS[fmt], details, weights_of(settings))


# --- reading the user's activity -----------------------------------------------------------------------


class ActivityReader:
    """The user's stored messages of the last ``hours`` (one query; at most :data:`MAX_ROWS`, the
    latest), with the texts of their latest :data:`COMPLEXITY_MESSAGES` user messages opened."""

    def __init__(self, db: Database, sealer: Sealer | None = None):
        self.db = db
        self.sealer = sealer or Sealer(None)

    def read(self, user_id: UUID | str, since: float) -> list[Activity]:
        user = str(user_id)
        cutoff = iso_at(since)
        rows = self.db.query(
            "SELECT m.id, m.role, m.conversation_id, m.created_at, m.content FROM messages m "
            "JOIN conversations c ON c.id = m.conversation_id "
            "WHERE c.user_id = ? AND c.updated_at >= ? AND m.created_at >= ? "
            "ORDER BY m.created_at DESC, m.seq DESC LIMIT ?",
            (user, cutoff, cutoff, MAX_ROWS),
        )
        out: list[Activity] = []
        opened = 0
        for r in rows:  # newest first: open the latest user texts only
            text = None
            if r["role"] == "user" and opened < COMPLEXITY_MESSAGES:
                value = r["content"]
                text = value if isinstance(value, str) else self.sealer.open(
                    value, SealContext("messages", "content", r["id"], user))
                opened += 1
            out.append(Activity(epoch_of(r["created_at"]), r["role"], r["conversation_id"], text))
        out.reverse()
        return out


class CognitiveLoad:
    """The estimator the chat service and ``GET /api/v1/cognitive-load`` call."""

    def __init__(self, db: Database, sealer: Sealer | None, settings: CognitiveLoadSettings, timezone: str = "UTC",
                 clock: Callable[[], float] = time.time):
        self.reader = ActivityReader(db, sealer)
        self.settings = settings
        self.tz = ZoneInfo(timezone)
        self.clock = clock

    @property
    def lookback_secs(self) -> float:
        """Far enough back to see the duration component saturate (three onsets) and one more gap."""
        return (3 * self.settings.fatigue_onset_minutes + SESSION_GAP_MINUTES) * 60

    def estimate(self, user_id: UUID | str, message: str | None = None, conversation_id: str | None = None,
                 now: float | None = None) -> LoadEstimate:
        """The user's load now; with ``message`` (being answered in ``conversation_id``, None: a new
        conversation) it counts as the session's latest message."""
        now = self.clock() if now is None else now
        activity = self.reader.read(user_id, now - self.lookback_secs)
        return estimate_from(activity, now, self.settings, self.tz, message, conversation_id)


def load_signal(bus: SignalBus) -> Callable[[str, LoadEstimate, str], None]:
    """The chat service's ``load_signal``: one ``CognitiveLoadEstimate`` per answer on ``bus`` (value:
    the load; data: the components, the format and the answer's message id)."""

    def publish(user_id: str, estimate: LoadEstimate, message_id: str) -> None:
        bus.publish(SignalKind.COGNITIVE_LOAD_ESTIMATE, {"components": estimate.components,
                                                         "format": estimate.format.value, "message_id": message_id},
                    user_id=user_id, value=estimate.load)

    return publish


def build_cognitive(settings: Settings, db: Database, sealer: Sealer | None) -> CognitiveLoad | None:
    """The estimator while ``cognitive_load.enabled`` (local time in ``[tool_calling] timezone``), else None."""
    if not settings.cognitive_load.enabled:
        return None
    return CognitiveLoad(db, sealer, settings.cognitive_load, settings.tool_calling.timezone)
