"""Which queries a user is likely to ask in the coming minutes, from their own history by time of day and week.

**History.** The user messages of the user's conversations (:mod:`assistant.extended.precache_history`)
over the last :data:`LOOKBACK_DAYS` (56, eight weeks), in local time (``tool_calling.timezone``). Only
complete days count, i.e. days before today: today's slot may still be ahead.

**Grouping near-duplicates.** Two messages are one query when their canonical forms are equal
(:func:`canonical`: case-folded, apostrophes dropped, other punctuation and runs of spaces made one
space), or when the embeddings of their wordings (the memory store's embedder, MiniLM by default) have
cosine >= :data:`GROUP_COSINE` (0.93) *and* they name the same numbers and time words
(:func:`guard_terms`: "today" and "tomorrow", "7" and "8" never merge). Measured with MiniLM:
"What is the weather in Berlin?" / "weather in Berlin today?" 0.94 (one query); "... in Berlin" /
"... in Berlin tomorrow?" 0.91 and "What is on my calendar today?" / "... tomorrow?" 0.92 (two queries);
Berlin / Paris 0.66. Without an embedder the canonical form alone groups.

**Estimator.** For a slot of the coming :data:`horizon <predict>` (the hours from now to the next
check): with ``n`` the user's active days (days with at least one message) and ``k`` those on which the
query was asked in the slot's hour, p = k / max(n, :data:`MIN_ACTIVE_DAYS`) for the hour of day; for the
hour of the week, the same over the active days that share the slot's weekday, with
:data:`MIN_WEEKDAY_DAYS` (4, so only with four weeks of that weekday can a weekly habit reach 0.7 on its
own). The floor on the denominator is the small-sample correction: a query asked on the 2 days of a new
user's history has p = 2/7, not 1; with 7 active days or more, p is the plain fraction (8 of 10 days is
0.8). A query's probability is the better of its two estimates (a Monday 9:00 habit shows only in the
weekly one); predicted when p >= ``precache_prediction.min_probability``.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

import numpy as np

LOOKBACK_DAYS = 56
MIN_ACTIVE_DAYS = 7
MIN_WEEKDAY_DAYS = 4
GROUP_COSINE = 0.93
MAX_TOOL_CALLS = 3  # precomputed tool calls per predicted query
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
HOUR_OF_DAY, HOUR_OF_WEEK = "hour_of_day", "hour_of_week"
TIME_WORDS = frozenset({
    "today", "tonight", "tomorrow", "yesterday", "now", "morning", "afternoon", "evening", "night", "week",
    "weekend", "month", "year", "next", "last", "monday", "tuesday", "wednesday", "thursday", "friday",
    "saturday", "sunday",
})
_APOSTROPHES = re.compile(r"['’`]")
_NON_WORD = re.compile(r"[^\w]+")

Embed = Callable[[list[str]], np.ndarray]


def canonical(text: str) -> str:
    """The form two wordings of one query share: ``"What's the Weather?"`` -> ``"whats the weather"``."""
    folded = _APOSTROPHES.sub("", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(_NON_WORD.sub(" ", folded).split())


def guard_terms(form: str) -> frozenset[str]:
    """The numbers and time words of a canonical form: near-duplicates must name the same ones."""
    return frozenset(w for w in form.split() if w.isdigit() or w in TIME_WORDS)


@dataclass(frozen=True)
class ToolPlan:
    """A read-only tool call the answers to a query made: ``key`` is its canonical arguments (the cache
    key), ``arguments`` the JSON of one real call."""

    tool: str
    key: str
    arguments: str


@dataclass(frozen=True)
class Asked:
    """One user message: its local time and the cacheable tool calls of the reply to it."""

    message_id: str
    text: str
    at: datetime  # local, aware
    tools: tuple[ToolPlan, ...] = ()


@dataclass(frozen=True)
class Slot:
    kind: str  # HOUR_OF_DAY or HOUR_OF_WEEK
    hour: int
    weekday: int | None = None  # 0 = Monday, for HOUR_OF_WEEK

    @property
    def label(self) -> str:
        hours = f"{self.hour:02d}:00-{(self.hour + 1) % 24:02d}:00"
        return f"{hours} daily" if self.weekday is None else f"{WEEKDAYS[self.weekday]} {hours}"

    def holds(self, at: datetime) -> bool:
        return at.hour == self.hour and (self.weekday is None or at.weekday() == self.weekday)


@dataclass(frozen=True)
class Prediction:
    user_id: str
    key: str  # the canonical form of ``text``
    text: str  # the latest wording the user used
    probability: float
    slot: Slot
    days_asked: int  # k
    active_days: int  # n (before the floor)
    last_asked: datetime
    tools: tuple[ToolPlan, ...] = ()
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)


@dataclass
class Group:
    """Near-duplicate messages: one query."""

    asked: list[Asked]
    vector: np.ndarray | None = None

    @property
    def latest(self) -> Asked:
        return max(self.asked, key=lambda a: a.at)


def group_queries(asked: Sequence[Asked], embed: Embed | None = None,
                  threshold: float = GROUP_COSINE) -> list[Group]:
    """Messages grouped by canonical form, then canonical groups merged by embedding (module docstring),
    largest first: each joins the first earlier group it matches."""
    by_form: dict[str, list[Asked]] = {}
    for a in asked:
        by_form.setdefault(canonical(a.text), []).append(a)
    forms = sorted(by_form, key=lambda f: (-len(by_form[f]), -max(a.at for a in by_form[f]).timestamp()))
    if not forms:
        return []
    vectors = None
    if embed is not None:
        latest = [max(by_form[f], key=lambda a: a.at).text for f in forms]
        vectors = np.asarray(embed(latest), dtype=np.float32)
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    groups: list[Group] = []
    heads: list[tuple[frozenset[str], int]] = []  # per group: guard terms and the row of its first form
    for row, form in enumerate(forms):
        terms = guard_terms(form)
        joined = False
        if vectors is not None and groups:
            sims = vectors[[h[1] for h in heads]] @ vectors[row]
            for index in np.argsort(-sims):
                if sims[index] < threshold:
                    break
                if heads[index][0] == terms:
                    groups[index].asked.extend(by_form[form])
                    joined = True
                    break
        if not joined:
            groups.append(Group(list(by_form[form]), None if vectors is None else vectors[row]))
            heads.append((terms, row))
    for g in groups:  # the vector of the wording a prediction uses: the group's latest
        if vectors is not None:
            g.vector = vectors[forms.index(canonical(g.latest.text))]
    return groups


def slots_ahead(now: datetime, horizon: timedelta) -> list[tuple[date, int]]:
    """The (date, hour) slots that overlap ``[now, now + horizon]``: at 07:50 with 15 minutes, 7:00 and 8:00."""
    start = now.replace(minute=0, second=0, microsecond=0)
    found, at = [], start
    while at <= now + horizon:
        found.append((at.date(), at.hour))
        at += timedelta(hours=1)
    return found


def estimate(group: Group, active: set[date], slot: Slot) -> tuple[float, int, int]:
    """(p, k, n) of one query in one slot (module docstring)."""
    days = {d for d in active if slot.weekday is None or d.weekday() == slot.weekday}
    asked = {a.at.date() for a in group.asked if slot.holds(a.at)} & days
    floor = MIN_ACTIVE_DAYS if slot.kind == HOUR_OF_DAY else MIN_WEEKDAY_DAYS
    return len(asked) / max(len(days), floor), len(asked), len(days)


def usual_tools(group: Group, slot: Slot) -> tuple[ToolPlan, ...]:
    """The tool calls made for at least half of the query's askings in the slot (most frequent first)."""
    askings = [a for a in group.asked if slot.holds(a.at)]
    counts = Counter(call for a in askings for call in {(p.tool, p.key) for p in a.tools})
    latest: dict[tuple[str, str], ToolPlan] = {}
    for a in sorted(askings, key=lambda a: a.at):
        latest.update({(p.tool, p.key): p for p in a.tools})
    usual = [call for call, n in counts.most_common() if 2 * n >= len(askings)]
    return tuple(latest[call] for call in usual[:MAX_TOOL_CALLS])


def predict(user_id: str, asked: Sequence[Asked], now: datetime, horizon: timedelta, min_probability: float,
            embed: Embed | None = None) -> list[Prediction]:
    """The user's queries with probability >= ``min_probability`` in a slot ahead, highest first.
    ``now`` is local (aware); ``asked`` may hold today's messages: only earlier days count."""
    today = now.date()
    past = [a for a in asked if today - timedelta(days=LOOKBACK_DAYS) <= a.at.date() < today]
    active = {a.at.date() for a in past}
    found = []
    for group in group_queries(past, embed):
        best: tuple[float, int, int, Slot] | None = None
        for day, hour in slots_ahead(now, horizon):
            for slot in (Slot(HOUR_OF_DAY, hour), Slot(HOUR_OF_WEEK, hour, day.weekday())):
                p, k, n = estimate(group, active, slot)
                if best is None or p > best[0]:
                    best = (p, k, n, slot)
        if best is None or best[0] < min_probability or best[1] == 0:
            continue
        p, k, n, slot = best
        latest = group.latest
        found.append(Prediction(user_id, canonical(latest.text), latest.text, round(p, 6), slot, k, n, latest.at,
                                usual_tools(group, slot), group.vector))
    return rank(found)


def rank(predictions: Sequence[Prediction], limit: int | None = None) -> list[Prediction]:
    """Highest probability first (then more days asked, then the latest asked); at most ``limit``."""
    ordered = sorted(predictions, key=lambda p: (-p.probability, -p.days_asked, -p.last_asked.timestamp()))
    return ordered if limit is None else ordered[:max(limit, 0)]
