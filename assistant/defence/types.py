"""What the defence says about a text: :class:`Verdict` (flagged or not, a score, the layers that
fired and why, the spans to neutralise), and the protocols its parts implement.

A :class:`Detector` inspects one text from one :class:`Source`. It is built from
:class:`DetectorLayer`\\ s run over the text's :class:`Normalised` forms; the verdict keeps every
:class:`Hit` so a user (and the explain view) can see which layer fired and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class Source(StrEnum):
    """Where a text comes from. ``USER`` is what the user typed; everything else is indirect
    content (data for the model, never instructions)."""

    USER = "user"
    TOOL_RESULT = "tool_result"
    MEMORY = "memory"
    EMAIL = "email"
    WEB = "web"
    DOCUMENT = "document"

    @property
    def indirect(self) -> bool:
        return self is not Source.USER


class Layer(StrEnum):
    NORMALISATION = "normalisation"  # hidden characters, encodings (base64, rot13, leetspeak)
    STATIC = "static"  # the fixed patterns shipped with the package
    DYNAMIC = "dynamic"  # the patterns sanitation evolved (per user, deactivatable)
    CLASSIFIER = "classifier"  # the small trained model
    JUDGE = "judge"  # the configured engine, for the uncertain band only


@dataclass(frozen=True)
class Hit:
    """One reason to suspect the text: which layer, which rule (a pattern id, a feature), why (a
    sentence for people), where (character offsets in the ORIGINAL text; None when the whole text),
    and how strongly (0..1)."""

    layer: Layer
    rule: str
    reason: str
    span: tuple[int, int] | None = None
    score: float = 1.0

    def as_dict(self) -> dict:
        return {"layer": self.layer.value, "rule": self.rule, "reason": self.reason,
                "span": list(self.span) if self.span else None, "score": round(self.score, 4)}


@dataclass(frozen=True)
class Verdict:
    flagged: bool
    score: float  # 0..1: the combined suspicion
    hits: tuple[Hit, ...] = ()
    source: Source = Source.USER

    @property
    def layers(self) -> list[Layer]:
        """The layers that fired, in the order they ran (once each)."""
        return list(dict.fromkeys(h.layer for h in self.hits))

    @property
    def spans(self) -> list[tuple[int, int]]:
        """Merged, sorted character spans of the original text to neutralise."""
        spans = sorted(h.span for h in self.hits if h.span is not None)
        merged: list[tuple[int, int]] = []
        for start, end in spans:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    @property
    def reason(self) -> str:
        """One line: the first hit's layer and reason (empty when clean)."""
        return f"{self.hits[0].layer.value}: {self.hits[0].reason}" if self.flagged and self.hits else ""

    def as_dict(self) -> dict:
        return {"flagged": self.flagged, "score": round(self.score, 4), "source": self.source.value,
                "layers": [x.value for x in self.layers], "hits": [h.as_dict() for h in self.hits]}


CLEAN = Verdict(False, 0.0)


@dataclass(frozen=True)
class Normalised:
    """The forms a layer looks at: ``text`` the original; ``folded`` NFKC, confusables mapped to
    ASCII, zero-width and bidi characters removed, whitespace collapsed, lower-cased; ``decoded``
    the texts hidden in it (base64, rot13, leetspeak), each already folded. ``offsets[i]`` is the
    index in ``text`` of ``folded[i]`` (so a span found in ``folded`` maps back)."""

    text: str
    folded: str
    offsets: Sequence[int] = ()
    decoded: Sequence[tuple[str, str]] = ()  # (how it was hidden: "base64" | "rot13" | "leet", folded text)
    hits: tuple[Hit, ...] = field(default=())  # what normalisation itself found suspicious

    def span_in_text(self, start: int, end: int) -> tuple[int, int]:
        """A span of ``folded`` as a span of ``text``."""
        if not self.offsets:
            return (start, end)
        n = len(self.offsets)
        a = self.offsets[min(start, n - 1)] if n else 0
        b = (self.offsets[end - 1] + 1) if 0 < end <= n else len(self.text)
        return (a, max(a, b))


class DetectorLayer(Protocol):
    layer: Layer

    def check(self, text: Normalised, source: Source, user_id: str | None = None) -> list[Hit]: ...


class Detector(Protocol):
    def inspect(self, text: str, source: Source = Source.USER, user_id: str | None = None) -> Verdict: ...


class NoDefence:
    """A detector that flags nothing (``[defence] enabled = false``)."""

    def inspect(self, text: str, source: Source = Source.USER, user_id: str | None = None) -> Verdict:
        return Verdict(False, 0.0, (), source)


@dataclass(frozen=True)
class DefencePattern:
    """A dynamic pattern sanitation evolved: a normalised regex (RE2 syntax: no backreferences or
    look-around, linear time), matched against folded text; deduplicated per user by ``hash``."""

    id: str
    user_id: str
    pattern: str
    hash: str
    active: bool
    source: str  # what it was generalised from: "red_team" | "dev_corpus" | "variants" | ...
    family: str  # the attack family of its origin ("instruction_override", "role_play", ...)
    hits: int
    created_at: str
    deactivated_at: str | None = None
    session_id: str | None = None

    def as_dict(self) -> dict:
        return {"id": self.id, "pattern": self.pattern, "hash": self.hash, "active": self.active,
                "source": self.source, "family": self.family, "hits": self.hits, "created_at": self.created_at,
                "deactivated_at": self.deactivated_at, "session_id": self.session_id}


class PatternProvider(Protocol):
    """Where the dynamic layer gets its patterns (the sanitation store), and where it counts hits."""

    def active_patterns(self, user_id: str | None) -> Sequence[DefencePattern]: ...

    def count_hits(self, pattern_ids: Sequence[str]) -> None: ...
