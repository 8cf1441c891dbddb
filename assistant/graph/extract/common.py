"""What the extractors share: counters (exported as metrics), relation names, co-occurrence edges."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from assistant.graph.store import normalise_name, normalise_relation
from assistant.graph.types import ME, RELATED, Entity, Extraction, Fact, NodeKind

MAX_NAME_CHARS = 100
FIRST_PERSON = re.compile(r"(?i)(?<![\w'])(?:i|i'm|i’m|i've|i'd|i'll|me|my|mine|myself)(?![\w'’])")  # a longer "entity name" is a sentence, not a name

# What engines and people write for the relations the graph treats as functional
# (KnowledgeGraphSettings.functional_relations): one spelling per relation.
RELATION_ALIASES = {
    "live_in": "lives_in", "living_in": "lives_in", "resides_in": "lives_in", "moved_to": "lives_in",
    "lives_at": "lives_in", "home": "lives_in", "location": "lives_in",
    "work_at": "works_at", "works_for": "works_at", "work_for": "works_at", "working_at": "works_at",
    "employed_by": "works_at", "employer": "works_at", "employed_at": "works_at",
    "work_as": "works_as", "occupation": "works_as", "profession": "works_as", "is_a": "works_as",
    "is_married_to": "married_to", "spouse": "married_to", "wife": "married_to", "husband": "married_to",
    "partner": "partner_of", "has_partner": "partner_of", "dating": "partner_of",
    "study_at": "studies_at", "studying_at": "studies_at", "student_at": "studies_at", "attends": "studies_at",
    "named": "name", "is_named": "name", "called": "name", "has_name": "name",
    "favorite": "favourite", "born": "born_in", "birth_place": "born_in", "birth_date": "birthday",
    "related": RELATED, "relates_to": RELATED, "associated_with": RELATED, "mentions": RELATED,
}


def canonical_relation(relation: str) -> str:
    """``"Works for"`` -> ``works_at``: snake case, then one spelling per relation;
    ``favorite_food`` -> ``favourite_food``."""
    rel = normalise_relation(relation)
    rel = rel.replace("favorite", "favourite")
    return RELATION_ALIASES.get(rel, rel)


def clean_name(name: object) -> str:
    """A name as stored: spaces collapsed, stray quotes and punctuation trimmed, at most
    :data:`MAX_NAME_CHARS`; "" when nothing usable is left."""
    if not isinstance(name, str):
        return ""
    text = " ".join(name.split()).strip(" \t.,;:!?\"'`()[]{}<>")
    return text if normalise_name(text) and len(text) <= MAX_NAME_CHARS else ""


def subject_name(speaker: str | None) -> str:
    """Who "I" is in a passage: its speaker, or the user themself (:data:`ME`)."""
    return (clean_name(speaker) or ME) if speaker else ME


def speaker_entity(passage_text: str, speaker: str | None, *, has_facts: bool = False) -> list[Entity]:
    """The speaker as an entity when the passage is theirs to speak of: a named speaker always, the
    user (:data:`ME`) when the text is in the first person or states a fact about them."""
    if speaker or has_facts or FIRST_PERSON.search(passage_text or ""):
        return [Entity(subject_name(speaker), NodeKind.PERSON)]
    return []


def unique_entities(entities: Iterable[Entity]) -> list[Entity]:
    """First of each normalised name, in order."""
    seen: set[str] = set()
    out = []
    for entity in entities:
        key = normalise_name(entity.name)
        if key and key not in seen:
            seen.add(key)
            out.append(entity)
    return out


def cooccurrence(entities: Iterable[Entity], facts: Iterable[Fact], limit: int) -> list[Fact]:
    """``Fact(a, RELATED, b)`` between the first ``limit`` entities, in canonical order (a-b and b-a
    are one fact), leaving out pairs a fact of the passage already links."""
    linked = {frozenset((normalise_name(f.subject), normalise_name(f.object))) for f in facts}
    names = sorted({normalise_name(e.name): e.name for e in list(entities)[:limit]}.items())
    out = []
    for i, (key_a, a) in enumerate(names):
        for key_b, b in names[i + 1:]:
            if frozenset((key_a, key_b)) not in linked:
                out.append(Fact(a, RELATED, b))
    return out


def build(entities: Iterable[Entity], facts: Iterable[Fact], related_limit: int) -> Extraction:
    """An :class:`Extraction` with unique entities and facts, plus the co-occurrence edges."""
    kept = unique_entities(entities)
    facts = list(dict.fromkeys(facts))
    if related_limit > 1:
        facts += cooccurrence(kept, facts, related_limit)
    return Extraction(tuple(kept), tuple(facts))


class Counters:
    """Counters every extractor keeps (the graph exports them as metrics): ``calls`` (extract
    calls), ``passages`` (passages extracted), ``failures`` (passages whose output was unusable and
    skipped), ``seconds`` (total extraction time)."""

    counter_names: tuple[str, ...] = ("calls", "passages", "failures", "seconds")

    def __init__(self) -> None:
        self.calls = 0
        self.passages = 0
        self.failures = 0
        self.seconds = 0.0
        self._counter_lock = threading.Lock()

    @contextmanager
    def _timed(self, passages: int) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            with self._counter_lock:
                self.calls += 1
                self.passages += passages
                self.seconds += time.perf_counter() - start

    def _count(self, name: str, n: int = 1) -> None:
        with self._counter_lock:
            setattr(self, name, getattr(self, name) + n)

    def counters(self) -> dict[str, float]:
        """The counters by name (``calls``, ``passages``, ``failures``, ``seconds``, and any the
        extractor adds)."""
        with self._counter_lock:
            return {name: getattr(self, name) for name in self.counter_names}
