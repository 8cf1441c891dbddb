"""REM's statistical detectors: pure functions over what a window of memories mentions (no model).

The input is :class:`Occurrences`: for each memory of the window (``rem.pattern_window_days``) when
it was written and the *items* it mentions: knowledge-graph nodes, or, without a graph, the
recurring terms of its text (:func:`terms_of`). Each detector tests a null model and reports a
:class:`Finding` only when the tail probability, Bonferroni-adjusted for the number of tests it
made, is at most ``alpha`` (0.05, the usual family-wise level: Bonferroni is conservative, and a week of a
person's memories is a small sample):

- **recurring** item: mentioned by ``k`` of the window's ``n`` memories where its baseline rate
  ``p`` predicts fewer. ``p = (b + A x m) / (B + A)``: ``b`` of the ``B`` memories of the baseline
  (the ``BASELINE_WINDOWS`` windows before) mention it, shrunk towards ``m``, the window's average
  rate per item, with ``A = PRIOR_MEMORIES`` pseudo-memories (so a user without history still has
  a null model: an item as frequent as the others is not a pattern). Test: binomial upper tail
  ``P(X >= k | n, p)``.
- **time**: an item came up in ``k`` distinct units, ``c`` of them in one bucket: a part of the
  day (night 0-6, morning 6-12, afternoon 12-18, evening 18-24, UTC: memories carry no time zone;
  the unit is a (day, part of the day) pair) or a weekday (the unit is a day). Units, not memories:
  the twenty messages of one evening's chat are one observation, not twenty (counted per memory, a
  LoCoMo speaker was "mostly in the morning" at p < 1e-10 because her sessions were). The user's own
  units over all their memories (Laplace-smoothed) give the bucket's share ``q``. Test:
  ``P(X >= c | k, q)``, adjusted for items x buckets.
- **co-occurrence**: two items, mentioned by ``k_a`` and ``k_b`` memories, are mentioned together
  by ``c`` of them. Test: hypergeometric upper tail ``P(X >= c)`` for ``k_b`` draws from ``n``
  memories of which ``k_a`` mention the first, adjusted for the pairs tested.
- **connection** (:func:`connections`): two nodes linked through a third (two edges, each stated by
  some memory) that no single memory mentions together and that no edge joins directly.

Confidence from a p-value: ``s / (s + 2)`` with ``s = -log10(p_adjusted)``: 0.39 at the 0.05 cut,
0.5 at 0.01, 0.67 at 1e-4, 0.75 at 1e-6, towards 1 for overwhelming evidence (so it orders findings,
and only a pattern with p <= 0.01 reaches ``surfacing_confidence_threshold`` 0.5). A connection's confidence is
the product of its two edges' weights (how firmly the graph holds each fact).

scipy (already a dependency, for audio resampling) gives exact binomial and hypergeometric tails.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations

import numpy as np
from scipy import stats

from assistant.memory.keywords import STOP_WORDS

ALPHA = 0.05  # the adjusted p-value a finding must reach
MIN_COUNT = 3  # memories an item (or a pair, or a bucket) needs before it is tested at all
PRIOR_MEMORIES = 10.0  # A: pseudo-memories at the window's average rate in the baseline
BASELINE_WINDOWS = 4  # the baseline: this many windows before the current one
MAX_FINDINGS = 5  # per detector and run, the strongest first
MIN_SHARE = 0.5  # a time pattern needs at least half of the item's memories in its bucket
MAX_MIDDLE_DEGREE = 25  # a connection's middle node links at most this many nodes (hubs link everything)
DAY_PARTS = ("at night", "in the morning", "in the afternoon", "in the evening")
WEEKDAYS = ("Mondays", "Tuesdays", "Wednesdays", "Thursdays", "Fridays", "Saturdays", "Sundays")


@dataclass(frozen=True)
class Occurrences:
    """What the detectors read (see the module docstring)."""

    memory_ids: Sequence[str]
    times: np.ndarray  # epoch seconds, one per memory
    items: Sequence[frozenset[str]]  # item ids each memory mentions
    names: Mapping[str, str]  # item id -> what to call it
    baseline_memories: int = 0
    baseline_counts: Mapping[str, int] = field(default_factory=dict)
    day_part_share: np.ndarray = field(default_factory=lambda: np.full(4, 0.25))
    weekday_share: np.ndarray = field(default_factory=lambda: np.full(7, 1 / 7))

    def __len__(self) -> int:
        return len(self.memory_ids)

    def counts(self) -> Counter[str]:
        return Counter({item: len(rows) for item, rows in self._rows.items()})

    def memories_of(self, item: str) -> list[int]:
        """Positions of the memories that mention ``item``, in order."""
        return self._rows.get(item, [])

    @cached_property
    def _rows(self) -> dict[str, list[int]]:
        rows: dict[str, list[int]] = {}
        for i, items in enumerate(self.items):
            for item in items:
                rows.setdefault(item, []).append(i)
        return rows


@dataclass(frozen=True)
class Finding:
    kind: str  # recurring | time | cooccurrence | connection
    subject: tuple[str, ...]  # item ids (a pair sorted)
    title: str
    content: str
    confidence: float
    p_value: float  # adjusted (connections: 0)
    sources: tuple[str, ...]  # memory ids
    statistic: dict
    bucket: str = ""  # time patterns: day_part:<n> or weekday:<n>


def confidence_of(p_value: float) -> float:
    s = -math.log10(max(p_value, 1e-300))
    return round(max(0.0, s / (s + 2.0)), 4)


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    return float(stats.binom.sf(k - 1, n, min(max(p, 1e-12), 1.0)))


def hypergeometric_tail(c: int, n: int, k_a: int, k_b: int) -> float:
    """P(X >= c): ``k_b`` draws without replacement from ``n`` of which ``k_a`` are marked."""
    return float(stats.hypergeom.sf(c - 1, n, k_a, k_b))


def shares(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A user's share of (day, part of the day) units per part of the day, and of active days per
    weekday (Laplace-smoothed): the null model of :func:`times`, in the same units."""
    parts, weekdays = buckets(times)
    days = np.floor(np.asarray(times, dtype=np.float64) / 86_400.0).astype(np.int64)
    everything = np.arange(len(days))
    part_units, day_units = _units(days, parts, everything), _units(days, weekdays, everything)
    part_share = (np.bincount(part_units, minlength=4) + 1.0) / (len(part_units) + 4.0)
    day_share = (np.bincount(day_units, minlength=7) + 1.0) / (len(day_units) + 7.0)
    return part_share, day_share


def buckets(times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(part of the day 0-3, weekday 0-6 with Monday 0) of epoch seconds, UTC."""
    t = np.asarray(times, dtype=np.float64)
    hours = np.floor((t % 86_400.0) / 3600.0).astype(np.int64)
    days = ((np.floor(t / 86_400.0).astype(np.int64) + 3) % 7)  # 1970-01-01 was a Thursday
    return hours // 6, days


def _pick(findings: list[Finding]) -> list[Finding]:
    findings.sort(key=lambda f: (f.p_value, f.subject))
    return findings[:MAX_FINDINGS]


def recurring(occ: Occurrences, *, alpha: float = ALPHA, min_count: int = MIN_COUNT) -> list[Finding]:
    n = len(occ)
    counts = occ.counts()
    if n == 0 or not counts:
        return []
    average = float(np.mean([k / n for k in counts.values()]))
    tested = {item: k for item, k in counts.items() if k >= min_count}
    out = []
    for item, k in tested.items():
        p = (occ.baseline_counts.get(item, 0) + PRIOR_MEMORIES * average) / (occ.baseline_memories + PRIOR_MEMORIES)
        expected = n * p
        if k <= expected:
            continue
        adjusted = min(1.0, binomial_tail(k, n, p) * len(tested))
        if adjusted > alpha:
            continue
        name = occ.names.get(item, item)
        history = (f"{occ.baseline_counts.get(item, 0)} of {occ.baseline_memories} memories before"
                   if occ.baseline_memories else "no earlier memories to compare with")
        out.append(Finding(
            "recurring", (item,), f"{name} keeps coming up",
            f"{name} came up in {k} of your {n} memories of this period, where about {expected:.1f} would be "
            f"usual ({history}).",
            confidence_of(adjusted), adjusted, tuple(occ.memory_ids[i] for i in occ.memories_of(item)),
            {"test": "binomial upper tail, Bonferroni", "observed": k, "memories": n, "expected": round(expected, 3),
             "baseline_rate": round(p, 6), "baseline_memories": occ.baseline_memories,
             "baseline_mentions": occ.baseline_counts.get(item, 0), "p_value": adjusted, "tests": len(tested)}))
    return _pick(out)


def _units(days: np.ndarray, values: np.ndarray, rows: Sequence[int] | np.ndarray) -> np.ndarray:
    """The bucket of each distinct (day, bucket) among ``rows``: many memories of one sitting count once."""
    return np.array(sorted({(int(days[i]), int(values[i])) for i in rows}), dtype=np.int64).reshape(-1, 2)[:, 1]


def times(occ: Occurrences, *, alpha: float = ALPHA, min_count: int = MIN_COUNT) -> list[Finding]:
    if len(occ) == 0:
        return []
    parts, weekdays = buckets(occ.times)
    days = np.floor(np.asarray(occ.times, dtype=np.float64) / 86_400.0).astype(np.int64)
    tested = [item for item, k in occ.counts().items() if k >= min_count]
    out = []
    for item in tested:
        rows = occ.memories_of(item)
        for kind, values, share, labels, unit in (("day_part", parts, occ.day_part_share, DAY_PARTS, "times of day"),
                                                  ("weekday", weekdays, occ.weekday_share, WEEKDAYS, "days")):
            units = _units(days, values, rows)
            k = len(units)
            hist = np.bincount(units, minlength=len(labels))
            b = int(np.argmax(hist))
            c = int(hist[b])
            if c < min_count or c / k < MIN_SHARE:
                continue
            q = float(share[b])
            adjusted = min(1.0, binomial_tail(c, k, q) * len(tested) * len(labels))
            if adjusted > alpha:
                continue
            name = occ.names.get(item, item)
            out.append(Finding(
                "time", (item,), f"{name}, mostly {labels[b]}",
                f"{name} came up on {k} different {unit}, {c} of them {labels[b]}, where {q:.0%} of yours are "
                f"(times in UTC).",
                confidence_of(adjusted), adjusted, tuple(occ.memory_ids[i] for i in rows if values[i] == b),
                {"test": "binomial upper tail over distinct (day, bucket) units, Bonferroni", "bucket": f"{kind}:{b}",
                 "observed": c, "units": k, "mentions": len(rows), "expected": round(k * q, 3),
                 "user_share": round(q, 4), "p_value": adjusted, "tests": len(tested) * len(labels)},
                bucket=f"{kind}:{b}"))
    return _pick(out)


def cooccurrences(occ: Occurrences, *, alpha: float = ALPHA, min_count: int = MIN_COUNT) -> list[Finding]:
    n = len(occ)
    counts = occ.counts()
    frequent = {item for item, k in counts.items() if k >= min_count}
    together: Counter[tuple[str, str]] = Counter()
    for items in occ.items:
        together.update(combinations(sorted(items & frequent), 2))
    tested = {pair: c for pair, c in together.items() if c >= min_count}
    out = []
    for (a, b), c in tested.items():
        expected = counts[a] * counts[b] / n
        if c <= expected:
            continue
        adjusted = min(1.0, hypergeometric_tail(c, n, counts[a], counts[b]) * len(tested))
        if adjusted > alpha:
            continue
        na, nb = occ.names.get(a, a), occ.names.get(b, b)
        out.append(Finding(
            "cooccurrence", (a, b), f"{na} and {nb} come up together",
            f"{na} and {nb} were mentioned together in {c} memories of this period ({na} in {counts[a]}, {nb} in "
            f"{counts[b]}, of {n}), where chance would give about {expected:.1f}.",
            confidence_of(adjusted), adjusted,
            tuple(occ.memory_ids[i] for i, items in enumerate(occ.items) if a in items and b in items),
            {"test": "hypergeometric upper tail, Bonferroni", "observed": c, "expected": round(expected, 3),
             "mentions": [counts[a], counts[b]], "memories": n, "p_value": adjusted, "tests": len(tested)}))
    return _pick(out)


def connections(edges: Sequence[tuple[str, str, float, str]], mentions: Mapping[str, set[str]],
                recent: set[str], names: Mapping[str, str], *, exclude: set[str] = frozenset(),
                limit: int = MAX_FINDINGS) -> list[Finding]:
    """Pairs (a, c) linked through b by two valid edges ``(subject, object, weight, relation)``,
    where no memory mentions both a and c (``mentions``: node -> memory ids) and no edge joins
    them; b is a recent node (mentioned in the window) linking at most ``MAX_MIDDLE_DEGREE`` nodes.
    Each edge of the path must be stated by a memory (a and b mentioned together, b and c too).
    Nodes in ``exclude`` (the user themself, keyphrase topics and dates: they link everything to
    everything) take no part. One path per pair, the strongest; a node ends at most two paths (so
    one well-connected entity does not fill the list)."""
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for s, o, w, rel in edges:
        if s == o or s in exclude or o in exclude:
            continue
        for pair in ((s, o), (o, s)):
            if w > best.get(pair, (-1.0, ""))[0]:
                best[pair] = (w, rel)
    neighbours: dict[str, set[str]] = {}
    for a, b in best:
        neighbours.setdefault(a, set()).add(b)
    found = []
    for middle in sorted(recent & neighbours.keys()):
        around = sorted(neighbours[middle])
        if len(around) < 2 or len(around) > MAX_MIDDLE_DEGREE:
            continue
        for a, c in combinations(around, 2):
            if c in neighbours.get(a, ()):
                continue  # an edge says it already
            ma, mb, mc = mentions.get(a, set()), mentions.get(middle, set()), mentions.get(c, set())
            if ma & mc:
                continue  # some memory names both
            first, second = sorted(ma & mb), sorted(mb & mc)
            if not first or not second:
                continue  # a link no memory states (a dream edge)
            (w1, r1), (w2, r2) = best[(a, middle)], best[(middle, c)]
            confidence = round(w1 * w2, 4)
            na, nb, nc = (names.get(x, x) for x in (a, middle, c))
            found.append(Finding(
                "connection", (a, c), f"{na} and {nc} are connected through {nb}",
                f"No single memory links {na} and {nc}, but {na} is linked to {nb} ({r1.replace('_', ' ')}) and "
                f"{nb} to {nc} ({r2.replace('_', ' ')}) in different memories.",
                confidence, 0.0, tuple(first[:3] + second[:3]),
                {"path": [a, middle, c], "relations": [r1, r2], "weights": [round(w1, 4), round(w2, 4)],
                 "middle_degree": len(around)}, bucket=middle))
    found.sort(key=lambda f: (-f.confidence, f.statistic["middle_degree"], f.subject, f.bucket))
    out: list[Finding] = []
    pairs: set[tuple[str, ...]] = set()
    used: Counter[str] = Counter()
    for f in found:  # one path per pair (the strongest); each node ends at most two of them
        if f.subject in pairs or any(used[n] >= 2 for n in f.subject):
            continue
        pairs.add(f.subject)
        used.update(f.subject)
        out.append(f)
    return out[:limit]


# --- the text fallback (no graph) -----------------------------------------------------------------

WORD = re.compile(r"[^\W\d_]{4,}")


def terms_of(text: str) -> set[str]:
    """Words of 4+ letters that are not stop words, lower-cased: the fallback's items."""
    return {w for w in WORD.findall(text.lower()) if w not in STOP_WORDS}
