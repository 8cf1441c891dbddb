"""How much of a model's reading of a sentence the sentence itself supports.

A small model asked to turn "0" into a command still answers something, often words borrowed from
its prompt's examples ("Lunch with Sam on Friday at noon"), with a confident 0.9. The parser
therefore does not take the model's word for its confidence: it scores the answer against the
sentence.

- :func:`has_words` is the fast path: a sentence without a word of two letters or more (digits,
  punctuation, a thousand zeros) is never sent to the model.
- :func:`grounding` is the share, 0..1, of the content words of the model's ``what`` and ``when``
  that occur in the sentence (ignoring case; a word of three letters or more may occur inside a
  longer one: "meet" in "meeting"). An answer naming no subject and no time (weather, calendar,
  e-mails, briefing, help) is grounded by a cue word of its type ("umbrella" for weather, "inbox"
  for e-mails): 1 with a cue, :data:`UNCUED` without. An e-mail address must occur as written.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+")
_LETTERS = re.compile(r"[^\W\d_]{2,}")
STOP_WORDS = frozenset(
    "a an the my me i you your to of at in on for with and or by from about is are be it this that "
    "please some any".split()
)
UNCUED = 0.25
"""The grounding of an answer without fields whose type no word of the sentence hints at."""
CUES: dict[str, frozenset[str]] = {
    "weather": frozenset("weather forecast rain raining rainy snow snowing sunny sun umbrella coat jacket cold hot "
                         "warm temperature wind windy degrees storm cloudy outside".split()),
    "calendar": frozenset("calendar schedule agenda diary plan plans planned busy free meeting meetings appointment "
                          "appointments events today tomorrow week weekend month".split()),
    "emails": frozenset("mail mails email emails e inbox mailbox message messages unread".split()),
    "briefing": frozenset("brief briefing morning summary rundown overview day today update".split()),
    "help": frozenset("help command commands can do use how what".split()),
}


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


def has_words(text: str) -> bool:
    """Whether ``text`` has a word of two letters or more: anything else is not worth a model call."""
    return _LETTERS.search(text) is not None


def _occurs(word: str, said_words: set[str], said: str) -> bool:
    return word in said_words or (len(word) >= 3 and (word in said or any(w.startswith(word[:4]) for w in said_words
                                                                          if len(word) >= 4 and len(w) >= 4)))


def grounding(kind: str, what: str | None, when: str | None, said: str, addresses: list[str] | None = None) -> float:
    """The share (0..1) of the answer that ``said`` supports (see the module docstring)."""
    folded = said.casefold()
    said_words = set(words(said))
    if addresses:
        return sum(a.casefold() in folded for a in addresses) / len(addresses)
    content = [w for w in words(f"{what or ''} {when or ''}") if w not in STOP_WORDS]
    if content:
        return sum(_occurs(w, said_words, folded) for w in content) / len(content)
    cues = CUES.get(kind)
    if cues is None:
        return UNCUED
    return 1.0 if said_words & cues else UNCUED
