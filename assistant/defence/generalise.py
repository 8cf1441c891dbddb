"""Generalise an attack text into a dynamic pattern (RE2 syntax) that catches its rephrasings, not
just the literal attack.

The text is folded (:func:`assistant.defence.normalise.normalise`), its first decoded form used when
the attack was hidden; names, numbers, quoted payloads, URLs and addresses are dropped; the
distinctive words are kept: the instruction words attacks are made of (verbs of overriding and
revealing, words for rules and prompts, persona words), in order, at most ``MAX_WORDS`` of them, each
with word boundaries and an inflection wildcard, joined by bounded gaps (``[^\\n]{0,40}``), so the
pattern is linear under RE2 and needs the same instruction in the same order on one line.
"""

from __future__ import annotations

import re

from assistant.defence.normalise import normalise

# The words instructions to a model are made of (stems: an inflection wildcard follows each).
DISTINCTIVE = (
    "ignor", "disregard", "forget", "forgot", "overrid", "bypass", "skip", "set aside", "void", "obsolete", "discard",
    "instruction", "direction", "directive", "guidance", "guideline", "rule", "prompt", "polic", "configur", "setup",
    "previous", "prior", "earlier", "above", "preceding", "before", "initial", "original", "hidden", "secret",
    "system", "developer", "restriction", "filter", "safety", "limit", "censor", "ethic", "moral",
    "pretend", "roleplay", "persona", "character", "act as", "respond as", "you are now", "no longer",
    "reveal", "verbatim", "word for word", "quote", "repeat", "print", "leak", "expose",
    "send", "forward", "upload", "exfiltrat", "password", "credential", "token", "address", "link",
    "quietly", "secretly", "without telling", "do not tell", "assistant", "model",
    "only job", "new task", "from now on", "instead", "no guidelines", "removed",
    # how injections declare the standing instructions void or replaced (garak's promptinject and
    # promptfoo's override strategies phrase it these ways), beyond the verbs above
    "outdated", "supersed", "replac", "revok", "cancel", "invalid", "expired", "deprecat", "updat",
    "never mind", "scratch that", "no longer apply", "do not apply", "what you were told", "real task",
    "actual task", "true purpose", "from this point", "henceforth", "unrestricted", "jailbr", "uncensor",
    "tell the user", "reply with only", "respond with only", "output only", "say only",
)
MAX_WORDS = 3  # the first three of a run: longer patterns named the attack's goal too, so they caught only it
MIN_WORDS = 3
GAP_CHARS = 40
GAP = r"[^\n]{0,%d}" % GAP_CHARS
_STRIP = re.compile(r"https?://\S+|www\.\S+|[\w.+-]+@[\w-]+\.[\w.]+|\"[^\"]{0,200}\"|'[^']{2,200}'|\d+")
_TOKEN = re.compile(r"[a-z][a-z'-]*")


def _stem_of(word: str) -> str | None:
    for stem in DISTINCTIVE:
        if " " not in stem and word.startswith(stem) and len(word) - len(stem) <= 5:
            return stem
    return None


def generalise(text: str) -> str | None:
    """A pattern for ``text`` (None when it has fewer than ``MIN_WORDS`` distinctive words within
    ``GAP`` of each other: too generic to become a pattern safely)."""
    norm = normalise(text)
    folded = norm.decoded[0][1] if norm.decoded else norm.folded
    best: list[str] = []
    for line in folded.split("\n"):
        parts = _line_parts(line)
        if len(parts) > len(best):
            best = parts
    return GAP.join(best) if len(best) >= MIN_WORDS else None


def _line_parts(line: str) -> list[str]:
    """The longest run of distinctive words of ``line`` with at most ``GAP_CHARS`` between them."""
    dropped = [m.span() for m in _STRIP.finditer(line)]
    tokens = [m for m in _TOKEN.finditer(line) if not any(a <= m.start() < b for a, b in dropped)]
    runs: list[list[str]] = [[]]
    last_end = None
    i = 0
    while i < len(tokens):
        words = [t.group(0) for t in tokens[i:i + 3]]
        phrase = next((x for x in DISTINCTIVE if " " in x and " ".join(words).startswith(x + " ") or " ".join(words) == x), None)
        if phrase is not None:
            n = len(phrase.split())
            part, start, end = r"\b" + re.escape(phrase).replace(r"\ ", r"\s+") + r"\b", tokens[i].start(), tokens[i + n - 1].end()
        else:
            n = 1
            stem = _stem_of(tokens[i].group(0))
            if stem is None:
                i += 1
                continue
            part, start, end = r"\b" + re.escape(stem) + r"\w{0,5}\b", tokens[i].start(), tokens[i].end()
        if last_end is not None and start - last_end > GAP_CHARS:
            runs.append([])
        if not runs[-1] or runs[-1][-1] != part:
            runs[-1].append(part)
        last_end = end
        i += n
    return max(runs, key=len)[:MAX_WORDS]
