"""``rules``: entities and facts without a model (the default when no engine is configured, and the
fallback when the engine is down).

- the speaker of a turn (``Passage.speaker``; the user themself, :data:`ME`, for a first-person
  memory without one) -> PERSON;
- first-person fact patterns with real relations ("I live in Berlin" -> (me, lives_in, Berlin),
  "I work at Siemens" -> works_at, "my name is ...", "I'm married to ...", "my favourite colour is
  blue" -> favourite_colour, ...); a negated or past sentence ("I don't live in ...", "I used to
  live in ...") is not a current fact;
- dates (ISO, "8 May 2023", "May 8th", "May 2023", month names, weekdays, years after "in"/"since"...)
  -> DATE, written one way ("8 May 2023") so that one day is one node;
- capitalised spans (multi-word proper names; a sentence's first word only when it is capitalised
  elsewhere too, so "The", "On", "Hey" or "Yesterday" are never names) -> PLACE after "in/to/from",
  ORGANISATION with a suffix (University, Inc, Bank...), PERSON after a person cue ("with", "my
  friend", "Hey", a vocative comma...), else THING;
- keyphrases (YAKE) -> TOPIC, lower-cased, without fillers ("cool", "awesome") or names;
- co-occurrence edges ``Fact(a, RELATED, b)`` between the first :attr:`RulesExtractor.related_limit`
  entities (speaker, fact objects, names, keyphrases, dates).

Why YAKE (``yake``): unsupervised, statistical, English stop words built in, no model weights to
download (spaCy/GLiNER weights are not installable here), a few milliseconds per chat turn.
Deterministic; never raises on any text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from functools import cached_property

from assistant.graph.extract.common import Counters, build, clean_name, speaker_entity, subject_name
from assistant.graph.store import normalise_name
from assistant.graph.types import Entity, Extraction, Fact, NodeKind, Passage

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ABBREVIATIONS = {m[:3]: m for m in MONTHS} | {"Sept": "September"}
_WEEKDAY_ABBREVIATIONS = {d[:3]: d for d in WEEKDAYS} | {"Tues": "Tuesday", "Thur": "Thursday", "Thurs": "Thursday"}
_MONTH = r"(?P<month>" + "|".join(MONTHS) + "|" + "|".join(_ABBREVIATIONS) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:1[89]|20)\d\d)"
_DATES = (
    re.compile(r"\b(?P<year>\d{4})-(?P<mon>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH}(?:,?\s+{_YEAR})?\b"),
    re.compile(rf"\b{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b(?!:)"),
    re.compile(rf"\b{_MONTH}(?:,?\s+{_YEAR})\b"),
    # A month alone; "May" only where it cannot be the verb ("in May", "last May").
    re.compile(r"\b(?P<month>" + "|".join(m for m in MONTHS if m != "May") + r")\b"),
    re.compile(r"(?i:\b(?:in|on|of|since|until|till|by|last|next|early|late|mid|this|during)\s)(?P<month>May)\b"),
    re.compile(r"(?i:\b(?:in|since|of|from|until|till|by|around|before|after|year|summer|winter|spring|autumn|fall)"
               rf",?\s){_YEAR}\b(?!\s*(?:%|percent))"),
    re.compile(r"\b(?P<weekday>" + "|".join(WEEKDAYS) + r")s?\b"),
    re.compile(r"(?i:\b(?:last|next|on|this|every)\s)(?P<weekday>" + "|".join(_WEEKDAY_ABBREVIATIONS) + r")\b\.?"),
)

# Words that never start or end a name (besides yake's English stop words): greetings, fillers.
_GREETINGS = frozenset("""
hey hi hello wow oh ooh ok okay yeah yes yep no nope thanks thank congrats congratulations dear sure well lol
omg haha hahaha hmm um uh yesterday today tomorrow tonight sorry please wait yay ugh bye goodbye anyway also just
""".split())
# ... and words that are no topic on their own: chat adjectives, the verbs of the fact patterns.
_FILLERS = _GREETINGS | frozenset("""
awesome great cool nice good amazing wonderful fantastic happy glad sad really pretty super lovely beautiful fun
funny excited exciting inspiring interesting proud thankful grateful powerful special hard tough busy fine true
totally definitely absolutely love like morning evening night week weekend month year years day days time lot
lots things thing stuff way kind bit same much many right best better least most new old big little anymore
live lives living lived work works working worked moved move drive study studying born swamped glad stoked
""".split())
_PRONOUN_OBJECTS = frozenset("it that this these those you him her them me us myself yourself everything something "
                             "anything nothing everyone someone".split())
_PERSON_CUES = frozenset("with and met meet meeting told tell asked ask called named friend friends sister brother "
                         "mom mum dad mother father wife husband son daughter hey hi thanks dear cousin aunt uncle "
                         "grandma grandpa boss colleague partner boyfriend girlfriend by".split())
_PLACE_CUES = frozenset("in from to near visit visited visiting around across towards into".split())
_ORG_CUES = frozenset({"at", "for"})
_ORG_SUFFIXES = frozenset("inc ltd llc gmbh ag corp corporation company co university college school academy bank "
                          "group foundation institute hospital club team agency association society council "
                          "ministry department church studio studios labs lab".split())
_PLACE_SUFFIXES = frozenset("city town street st avenue ave road park lake river mountain mountains beach island "
                            "islands bay valley county state province village square coast falls canyon".split())
_CONNECTORS = frozenset("of de du la le van von der den da del di".split())

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*(?:-[^\W\d_]+)*")
_SENTENCE = re.compile(r"[^.!?:;\n]+")

_UPPER = "A-ZÀ-ÖØ-Þ"
_NAME = (rf"(?:(?i:the)\s+)?(?P<o>[{_UPPER}][\w'’&\-]*(?:\s+(?:(?:of|de|du|la|van|von|der|and|&)\s+)?"
         rf"[{_UPPER}0-9][\w'’&\-]*){{0,4}})")
_PHRASE = (r"(?:(?i:an?|the|some|my)\s+)?(?P<o>[^\W\d_][\w'’\- ]{0,48}?)(?=\s*(?:[.,!?;:()\"]|$|\s(?i:and|but|because|"
           r"so|since|when|if|who|which|that|with|in|at|for|on|to|from|every|all|too|very|now|lately|these|a lot|"
           r"as well|though|anymore|right now)\b))")
_I = r"(?<![\w'’])(?:I|i)"
_AM = r"(?:'m|’m|\s+am)"
_AND = r"(?<=\band)"  # "I live in Berlin and work at Siemens": the second verb's "I" is implied
_NOW = r"(?:(?i:now|currently|still|also|actually|recently|just|finally|really|happily)\s+)?"
_ROLES = ("son", "daughter", "brother", "sister", "mother", "father", "mom", "mum", "dad", "friend", "best friend",
          "boss", "cousin", "aunt", "uncle", "grandma", "grandmother", "grandpa", "grandfather", "colleague",
          "roommate", "dog", "cat", "puppy", "kitten", "horse")
_PETS = frozenset({"dog", "cat", "puppy", "kitten", "horse"})


def _p(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# (relation, pattern with an "o" group, kind of the object). A relation of None takes it from groups.
_FACTS: tuple[tuple[str | None, re.Pattern[str], NodeKind], ...] = (
    ("lives_in", _p(rf"(?:{_I}{_AM}?|{_AND})\s+{_NOW}(?i:live|living|reside|residing)\s+(?i:in)\s+{_NAME}"),
     NodeKind.PLACE),
    ("lives_in", _p(rf"(?:{_I}(?:'ve|’ve|\s+have)?|(?i:we)(?:'ve|\s+have)?)\s+{_NOW}(?i:moved|relocated)\s+"
                    rf"(?i:to|into)\s+{_NAME}"), NodeKind.PLACE),
    ("lives_in", _p(rf"(?i:we)(?:'re|\s+are)?\s+{_NOW}(?i:live|living)\s+(?i:in)\s+{_NAME}"), NodeKind.PLACE),
    ("lived_in", _p(rf"{_I}\s+(?i:used to live|lived)\s+(?i:in)\s+{_NAME}"), NodeKind.PLACE),
    ("works_at", _p(rf"(?:{_I}{_AM}?|{_AND})\s+{_NOW}(?i:work|working)\s+(?i:at|for)\s+{_NAME}"),
     NodeKind.ORGANISATION),
    ("works_at", _p(rf"{_I}(?:'ve|’ve|\s+have)?\s+{_NOW}(?i:got|have|started|found|landed)\s+(?i:a\s+)?(?i:new\s+)?"
                    rf"(?i:job)\s+(?i:at|with)\s+{_NAME}"), NodeKind.ORGANISATION),
    ("works_as", _p(rf"(?:{_I}{_AM}?|{_AND})\s+{_NOW}(?i:work|working|employed)\s+(?i:as)\s+{_PHRASE}"),
     NodeKind.THING),
    ("works_as", _p(rf"(?i:my\s+job\s+is)\s+{_PHRASE}"), NodeKind.THING),
    ("name", _p(rf"(?i:my\s+name\s+is|call\s+me)\s+{_NAME}"), NodeKind.PERSON),
    ("name", _p(rf"{_I}{_AM}\s+(?i:called)\s+{_NAME}"), NodeKind.PERSON),
    ("married_to", _p(rf"{_I}(?:{_AM}|\s+got|\s+was|'ve been|\s+have been)\s+{_NOW}(?i:married)\s+(?i:to)\s+{_NAME}"),
     NodeKind.PERSON),
    ("married_to", _p(rf"(?i:my\s+(?:wife|husband))(?:'s\s+name\s+is|,|\s+is\s+called|\s+named|\s+called|\s+is)?"
                      rf"\s+{_NAME}"), NodeKind.PERSON),
    ("partner_of", _p(rf"(?i:my\s+(?:partner|boyfriend|girlfriend|fianc[ée]e?))(?:'s\s+name\s+is|,|\s+is\s+called|"
                      rf"\s+named|\s+called|\s+is)?\s+{_NAME}"), NodeKind.PERSON),
    ("studies_at", _p(rf"{_I}{_AM}?\s+{_NOW}(?i:study|studying)\s+(?i:at)\s+{_NAME}"), NodeKind.ORGANISATION),
    ("studies_at", _p(rf"{_I}{_AM}\s+{_NOW}(?i:an?\s+\w+\s+student|a\s+student)\s+(?i:at)\s+{_NAME}"),
     NodeKind.ORGANISATION),
    ("born_in", _p(rf"{_I}\s+(?i:was\s+born\s+in)\s+{_NAME}"), NodeKind.PLACE),
    ("comes_from", _p(rf"{_I}(?:{_AM}|\s+{_NOW}(?i:come))\s+(?i:originally\s+)?(?i:from)\s+{_NAME}"), NodeKind.PLACE),
    ("age", _p(rf"{_I}{_AM}\s+(?P<o>\d{{1,3}})\s+(?i:years?\s+old|yo)\b"), NodeKind.THING),
    ("owns_car", _p(rf"{_I}\s+{_NOW}(?i:drive)\s+{_PHRASE}"), NodeKind.THING),
    ("owns_car", _p(rf"(?i:my\s+car\s+is)\s+{_PHRASE}"), NodeKind.THING),
    ("visited", _p(rf"{_I}\s+{_NOW}(?i:visited|went\s+to|traveled\s+to|travelled\s+to|flew\s+to)\s+{_NAME}"),
     NodeKind.PLACE),
    ("attended", _p(rf"{_I}\s+{_NOW}(?i:went|go|going)\s+(?i:to)\s+(?i:an?|the|this|that)\s+{_PHRASE}"),
     NodeKind.EVENT),
    ("likes", _p(rf"{_I}\s+{_NOW}(?i:like|love|enjoy|adore)\s+(?i:to\s+)?{_PHRASE}"), NodeKind.TOPIC),
    ("dislikes", _p(rf"{_I}\s+{_NOW}(?i:hate|dislike|don't\s+like|do\s+not\s+like|can't\s+stand)\s+(?i:to\s+)?"
                    rf"{_PHRASE}"), NodeKind.TOPIC),
    (None, _p(rf"(?i:my\s+fav(?:ou?rite))\s+(?P<cat>[^\W\d_][\w\- ]{{0,30}}?)\s+(?i:is|are)\s+{_PHRASE}"),
     NodeKind.TOPIC),
    (None, _p(r"(?i:my\s+(?P<role>" + "|".join(_ROLES) + r"))(?:'s\s+name\s+is|,|\s+is\s+called|\s+named|\s+called|"
              rf"\s+is)?\s+{_NAME}"), NodeKind.PERSON),
)
_BIRTHDAY = re.compile(r"(?i:my\s+birthday\s+is|I\s+was\s+born\s+(?:on|in))\s+")


def _date_name(m: re.Match[str]) -> str:
    """One spelling per date: ``8 May 2023``, ``8 May``, ``May 2023``, ``May``, ``2023``, ``Friday``."""
    groups = {k: v for k, v in m.groupdict().items() if v}
    if "weekday" in groups:
        return _WEEKDAY_ABBREVIATIONS.get(groups["weekday"], groups["weekday"])
    if "mon" in groups:
        month_number = int(groups["mon"])
        if not 1 <= month_number <= 12:
            return ""
        groups["month"] = MONTHS[month_number - 1]
    month = groups.get("month")
    if month:
        month = _ABBREVIATIONS.get(month.rstrip("."), month.rstrip("."))
    day = int(groups["day"]) if "day" in groups else None
    if day is not None and not 1 <= day <= 31:
        return ""
    return " ".join(str(p) for p in (day, month, groups.get("year")) if p)


def _is_capitalised(word: str) -> bool:
    return word[:1].isupper()


class RulesExtractor(Counters):
    id = "rules"

    def __init__(self, *, max_entities: int = 10, related_limit: int = 6, keyphrases: int = 3,
                 keyphrase_min_words: int = 4, keyphrase_chars: int = 4000):
        super().__init__()
        self.max_entities = max_entities
        self.related_limit = related_limit  # co-occurrence edges between this many entities
        self.keyphrases = keyphrases
        self.keyphrase_min_words = keyphrase_min_words  # shorter texts get no keyphrases
        self.keyphrase_chars = keyphrase_chars  # YAKE reads at most this much of a long text
        self._yake_lock = threading.Lock()  # one KeywordExtractor, its caches are not thread-safe

    @cached_property
    def _yake(self):  # noqa: ANN202  (yake is imported on first use)
        import yake

        return yake.KeywordExtractor(lan="en", n=3, top=self.keyphrases * 3, dedupLim=0.7)

    @cached_property
    def _stop(self) -> frozenset[str]:
        """Not a name, nor the first or last word of one."""
        return frozenset(self._yake.stopword_set) | _GREETINGS

    @cached_property
    def _not_topic(self) -> frozenset[str]:
        return self._stop | _FILLERS

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        with self._timed(len(passages)):
            return [self.extract_one(p) for p in passages]

    def extract_one(self, passage: Passage) -> Extraction:
        text = passage.text if isinstance(passage.text, str) else ""
        subject = subject_name(passage.speaker)
        facts, fact_entities = self._facts(text, subject)
        dates, masked = self._dates(text)
        objects = [f" {normalise_name(e.name)} " for e in fact_entities]
        spans = [e for e in self._spans(masked) if not any(f" {normalise_name(e.name)} " in o for o in objects)]
        topics = self._keyphrases(masked, [e.name for e in (*fact_entities, *spans)] + [subject])
        speaker = speaker_entity(text, passage.speaker, has_facts=bool(facts))
        facts += self._birthday(text, subject, dates)
        entities = [*speaker, *fact_entities, *spans, *topics, *dates][: self.max_entities]
        kept = {normalise_name(e.name) for e in entities}
        facts = [f for f in facts if normalise_name(f.subject) in kept and normalise_name(f.object) in kept]
        return build(entities, facts, self.related_limit)

    # --- facts -----------------------------------------------------------------------------------

    def _facts(self, text: str, subject: str) -> tuple[list[Fact], list[Entity]]:
        facts: list[Fact] = []
        entities: list[Entity] = []
        for relation, pattern, kind in _FACTS:
            for m in pattern.finditer(text):
                obj = self._object(m.group("o"), kind)
                if not obj:
                    continue
                rel, obj_kind = relation, kind
                groups = m.groupdict()
                if groups.get("cat"):
                    category = "_".join(w for w in groups["cat"].lower().split() if w not in self._stop)
                    rel = f"favourite_{category}" if category else "favourite"
                elif groups.get("role"):
                    role = groups["role"].lower()
                    rel = "has_" + role.replace(" ", "_")
                    obj_kind = NodeKind.THING if role in _PETS else NodeKind.PERSON
                if rel is None or normalise_name(obj) in {normalise_name(subject), *(normalise_name(e.name)
                                                                             for e in entities)}:
                    continue  # one fact per object: the first, most specific pattern's
                facts.append(Fact(subject, rel, obj))
                entities.append(Entity(obj, obj_kind))
        return facts, entities

    def _object(self, raw: str | None, kind: NodeKind) -> str:
        words = (raw or "").split()
        if kind in (NodeKind.TOPIC, NodeKind.THING):  # a phrase: at most four words, not a pronoun
            words = words[:4]
            while words and words[-1].lower() in self._stop:
                words.pop()
            if not words or words[0].lower() in _PRONOUN_OBJECTS:
                return ""
        else:
            while words and words[-1].lower() in self._stop | _CONNECTORS | {"and", "&"}:
                words.pop()
        name = clean_name(re.sub(r"['’]s$", "", " ".join(words)))
        return "" if normalise_name(name) in self._stop else name

    def _birthday(self, text: str, subject: str, dates: list[Entity]) -> list[Fact]:
        m = _BIRTHDAY.search(text)
        if not m:
            return []
        for pattern in _DATES:
            d = pattern.match(text, m.end())
            if d and _date_name(d):
                name = _date_name(d)
                return [Fact(subject, "birthday", name)] if any(e.name == name for e in dates) else []
        return []

    # --- dates -----------------------------------------------------------------------------------

    @staticmethod
    def _dates(text: str) -> tuple[list[Entity], str]:
        """The dates in ``text`` and the text with them blanked out (so no date is also a name)."""
        found: dict[str, Entity] = {}
        chars = list(text)
        for pattern in _DATES:
            for m in pattern.finditer("".join(chars)):
                name = _date_name(m)
                if not name:
                    continue
                start, end = m.span("weekday") if m.groupdict().get("weekday") else m.span()
                if m.groupdict().get("year") and "month" not in m.groupdict() and "mon" not in m.groupdict():
                    start = m.start("year")  # "in 2022": blank only the year
                found.setdefault(name, Entity(name, NodeKind.DATE))
                chars[start:end] = " " * (end - start)
        return list(found.values()), "".join(chars)

    # --- capitalised spans -----------------------------------------------------------------------

    def _spans(self, text: str) -> list[Entity]:
        if sum(c.isupper() for c in text) > 0.6 * max(sum(c.isalpha() for c in text), 1):
            return []  # SHOUTED TEXT: capitals say nothing
        mid_sentence: set[str] = set()
        sentences = []
        for sentence in _SENTENCE.finditer(text):
            words = list(_WORD.finditer(sentence.group()))
            sentences.append((sentence.group(), words))
            mid_sentence |= {w.group() for w in words[1:] if _is_capitalised(w.group())}
        found: list[Entity] = []
        for sentence, words in sentences:
            i = 0
            while i < len(words):
                if not _is_capitalised(words[i].group()):
                    i += 1
                    continue
                j = i + 1
                while j < len(words) and sentence[words[j - 1].end():words[j].start()].strip() == "":
                    word = words[j].group()
                    if _is_capitalised(word):
                        j += 1
                    elif word.lower() in _CONNECTORS and j + 1 < len(words) and _is_capitalised(words[j + 1].group()) \
                            and sentence[words[j].end():words[j + 1].start()].strip() == "":
                        j += 2
                    else:
                        break
                entity = self._span(sentence, words, i, j, mid_sentence)
                if entity is not None:
                    found.append(entity)
                i = j
        return found

    def _span(self, sentence: str, words: list[re.Match[str]], i: int, j: int, mid: set[str]) -> Entity | None:
        tokens = [w.group() for w in words[i:j]]
        start = i
        while tokens and (tokens[0].lower().replace("’", "'") in self._stop or len(tokens[0]) == 1):
            tokens.pop(0)
            start += 1
        while tokens and (tokens[-1].lower().replace("’", "'") in self._stop | _CONNECTORS or len(tokens[-1]) == 1):
            tokens.pop()
        tokens = tokens[:5]
        if not tokens:
            return None
        if start == 0 and len(tokens) == 1 and tokens[0] not in mid:
            return None  # a capitalised first word: a name only if it is capitalised elsewhere too
        name = clean_name(re.sub(r"['’]s$", "", " ".join(tokens)))
        if not name or normalise_name(name) in self._stop:
            return None
        return Entity(name, self._kind(sentence, words, start, tokens))

    @staticmethod
    def _kind(sentence: str, words: list[re.Match[str]], start: int, tokens: list[str]) -> NodeKind:
        last = tokens[-1].lower().strip(".")
        before = words[start - 1].group().lower() if start > 0 else ""
        after = sentence[words[start + len(tokens) - 1].end():].lstrip()[:12].lower()
        if last in _ORG_SUFFIXES or tokens[0].lower() in ("university", "bank"):
            return NodeKind.ORGANISATION
        if last in _PLACE_SUFFIXES or before in _PLACE_CUES:
            return NodeKind.PLACE
        if all(t.isupper() for t in tokens):
            return NodeKind.THING  # an acronym
        if before in _ORG_CUES:
            return NodeKind.ORGANISATION
        gap = sentence[words[start - 1].end():words[start].start()] if start > 0 else ""
        if (before in _PERSON_CUES or "," in gap or after.startswith(("said", "says", "told", "and i", ",", "!"))
                or re.match(r"['’]s\b", after)):
            return NodeKind.PERSON
        return NodeKind.THING

    # --- keyphrases ------------------------------------------------------------------------------

    def _keyphrases(self, text: str, names: list[str]) -> list[Entity]:
        if len(text.split()) < self.keyphrase_min_words or self.keyphrases <= 0:
            return []
        with self._yake_lock:
            try:
                scored = self._yake.extract_keywords(text[: self.keyphrase_chars])
            except Exception:  # noqa: BLE001 - YAKE on odd text (all punctuation, one repeated word)
                return []
        name_words = {w for n in names for w in normalise_name(n).split()}
        phrases: list[str] = []
        for phrase, _score in scored:
            words = phrase.lower().split()
            while words and words[0] in self._not_topic:
                words.pop(0)
            while words and words[-1] in self._not_topic:
                words.pop()
            if not words or any(w in name_words for w in words) or (" " not in phrase and _is_capitalised(phrase)):
                continue  # a name (or part of one): the capitalised spans have it
            if len(words) == 1 and (len(words[0]) < 4 or words[0].endswith("ly")):
                continue
            if any(w in self._not_topic and w not in ("of", "and") for w in words[1:-1]):
                continue  # "shows how important", "make a difference": not a topic
            if not any(c.isalpha() for c in "".join(words)):
                continue
            phrases.append(" ".join(words))
        kept: list[str] = []
        for phrase in sorted(dict.fromkeys(phrases), key=lambda p: (-len(p.split()), phrases.index(p))):
            if not any(f" {phrase} " in f" {k} " for k in kept):
                kept.append(phrase)
        kept.sort(key=phrases.index)
        return [Entity(_as_written(p, text), NodeKind.TOPIC) for p in kept[: self.keyphrases]]


def _as_written(phrase: str, text: str) -> str:
    """``phrase`` (yake lower-cases) as the text first writes it: "Margarethe moved ..." keeps its
    capital (a name at the start of a sentence is no capitalised span), "hospital" stays as it is."""
    found = re.search(r"(?<!\w)" + r"\s+".join(map(re.escape, phrase.split())) + r"(?!\w)", text, re.IGNORECASE)
    return found.group(0) if found else phrase
