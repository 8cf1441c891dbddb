"""Defence evolution: bypasses become dynamic patterns.

Contract: ``plan_patterns(deps, user_id, session_id)`` returns the patterns to add (generalised from
bypasses, validated against the benign set, not yet stored, not already known by hash) and how many
candidates were rejected. It writes nothing: the run stores them inside its transaction.

Steps: the attack texts come from ``deps.bypasses`` (an :class:`AttackSource`: the red team of a
later issue; by default :class:`assistant.defence.variants.TemplateAttacks`, our own templates);
the ones the current detector does NOT flag are bypasses; each is generalised
(:func:`assistant.defence.generalise.generalise`: distinctive instruction words, bounded gaps, never
the literal attack), deduplicated by :func:`assistant.sanitation.store.pattern_hash` against the
user's known patterns and within the run, and validated: it must compile under RE2
(:func:`assistant.defence.dynamic.compile_pattern`), match its own bypass, and match none of the
benign texts (the shipped benign.txt and the user's recent messages). Anything else is rejected.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

from assistant.defence.dynamic import PatternRejected, compile_pattern
from assistant.defence.generalise import generalise
from assistant.defence.normalise import normalise
from assistant.defence.types import Source
from assistant.sanitation.store import pattern_hash

log = logging.getLogger(__name__)

BENIGN = Path(__file__).resolve().parents[1] / "defence" / "data" / "benign.txt"
MAX_PATTERNS_PER_RUN = 20
RECENT_CONVERSATIONS = 5
RECENT_MESSAGES = 40


class AttackSource(Protocol):
    """Where evolution gets attack texts: ``attacks(user_id)`` -> [(text, family)]."""

    def attacks(self, user_id: str) -> list[tuple[str, str]]: ...


@dataclass(frozen=True)
class PlannedPattern:
    pattern: str
    family: str
    source: str


@lru_cache(maxsize=1)
def benign_texts() -> tuple[str, ...]:
    """The shipped benign set, folded."""
    lines = [x.strip() for x in BENIGN.read_text(encoding="utf-8").splitlines()]
    return tuple(normalise(x).folded for x in lines if x and not x.startswith("#"))


def recent_user_messages(deps, user_id: str) -> list[str]:
    """The user's recent messages, folded (empty when there is no conversation store)."""
    conversations = getattr(deps, "conversations", None)
    if conversations is None:
        return []
    out: list[str] = []
    try:
        for conv in conversations.list(user_id, limit=RECENT_CONVERSATIONS):
            for message in conversations.history(str(conv.id), RECENT_MESSAGES):
                if getattr(message, "role", "") == "user" and message.content:
                    out.append(normalise(message.content).folded)
    except Exception:  # the benign check still has the shipped set
        log.exception("reading recent messages for the benign check failed")
    return out


def _source_of(deps) -> tuple[AttackSource, str]:
    if deps.bypasses is not None:
        return deps.bypasses, getattr(deps.bypasses, "name", "red_team")
    from assistant.defence.variants import TemplateAttacks

    return TemplateAttacks(), "variants"


def plan_patterns(deps, user_id: str, session_id: str | None = None,
                  score: dict | None = None) -> tuple[list[PlannedPattern], int]:
    """The patterns to add and how many candidates were rejected. With ``score`` (a dict), it is
    filled with the defence score of this run: ``tested`` attacks, ``blocked`` (flagged by the
    detector, or caught by a pattern planned here) and ``score`` = blocked / tested (the
    ``defense_score_x100`` gauge; the red team of a later issue measures it on its own attacks)."""
    source, source_name = _source_of(deps)
    attacks = list(source.attacks(str(user_id)))
    if score is not None:
        score.update(tested=len(attacks), blocked=len(attacks), score=1.0 if attacks else None)
    if not attacks:
        return [], 0
    inspect_many = getattr(deps.detector, "inspect_many", None)
    texts = [t for t, _ in attacks]
    verdicts = inspect_many(texts, Source.USER, str(user_id)) if inspect_many else \
        [deps.detector.inspect(t, Source.USER, str(user_id)) for t in texts]
    bypasses = [(t, f) for (t, f), v in zip(attacks, verdicts, strict=True) if not v.flagged]
    if not bypasses:
        return [], 0
    caught: set[str] = set()
    known = set(deps.store.known_hashes(str(user_id)))
    benign = benign_texts() + tuple(recent_user_messages(deps, str(user_id)))
    planned: list[PlannedPattern] = []
    rejected = 0
    for text, family in bypasses:
        pattern = generalise(text)
        if pattern is None:
            rejected += 1
            continue
        digest = pattern_hash(pattern)
        if digest in known:
            continue  # already known (active or deactivated by the user): neither new nor rejected
        known.add(digest)
        try:
            compiled = compile_pattern(pattern)
        except PatternRejected as exc:
            log.info("evolved pattern rejected: %s", exc.reason)
            rejected += 1
            continue
        norm = normalise(text)
        if not any(compiled.search(form) for form in (norm.folded, *(d for _, d in norm.decoded))):
            rejected += 1  # it would not even catch its own bypass
            continue
        if any(compiled.search(b) for b in benign):
            rejected += 1  # it flags benign text
            continue
        if len(planned) < MAX_PATTERNS_PER_RUN:
            planned.append(PlannedPattern(pattern, family or "unknown", source_name))
            caught.update(t for t, _ in bypasses if compiled.search(normalise(t).folded))
    if score is not None:
        blocked = len(attacks) - len(bypasses) + len(caught)
        score.update(blocked=blocked, score=blocked / len(attacks))
    return planned, rejected
