"""The normalisation layer: the forms every other layer looks at, and the hidden-text tricks it sees.

``normalise(text)`` folds the text (NFKC per character, Cyrillic/Greek look-alikes mapped to ASCII,
zero-width and bidi controls removed, whitespace runs collapsed to one space or one newline,
lower-cased) keeping, for every folded
character, its index in the original text, so a span found in the folded form maps back. It also
decodes what may be hidden in it: base64 runs (valid, mostly printable), rot13 (only when the decoded
text reads like English instructions) and leetspeak (1→i, 3→e, 4→a, 0→o, 5→s, 7→t, @→a, $→s).

The confusables table is a small hand-written one (the letters that render like Latin ones): the
maintained ``confusables``/``confusable_homoglyphs`` packages carry the whole Unicode table (MBs, a
JSON load at import) for a mapping that matters here for ~40 characters.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from assistant.defence.types import Hit, Layer, Normalised

# Cyrillic and Greek letters that render like Latin ones (lower and upper case).
CONFUSABLES = {
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d", "ɡ": "g", "ո": "n",
    "А": "a", "В": "b", "Е": "e", "К": "k", "М": "m", "Н": "h", "О": "o", "Р": "p", "С": "c", "Т": "t",
    "У": "y", "Х": "x", "Ѕ": "s", "І": "i", "Ј": "j",
    "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t", "υ": "u",
    "χ": "x", "Α": "a", "Β": "b", "Ε": "e", "Ζ": "z", "Η": "h", "Ι": "i", "Κ": "k", "Μ": "m", "Ν": "n",
    "Ο": "o", "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x",
}
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u2061\u2062\u2063\u2064")
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")
BIDI_OVERRIDES = frozenset("\u202d\u202e\u2066\u2067\u2068")  # rarely in honest text
LEET = str.maketrans({"1": "i", "3": "e", "4": "a", "0": "o", "5": "s", "7": "t", "@": "a", "$": "s"})
HIDDEN_MIN = 3  # zero-width characters inside words before it counts as a trick
HIDDEN_SCORE = 0.7

_BASE64 = re.compile(r"[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9_-]{24,}={0,2}")
_LEET_TOKEN = re.compile(r"\S*[a-z]\S*")
_LEET_CHARS = frozenset("134570@$")
_WORD = re.compile(r"[a-z]+")
# Frequent English words, and the words instructions to a model are made of: rot13 text is kept
# only when its decoding has many more of them than the text itself.
ENGLISH = frozenset(
    "the a an and or to of in on for is are be you your i me my it this that with all any now from "
    "not no do don't will can must should what how as at by if then than say tell print write answer "
    "ignore disregard forget previous prior above instructions rules prompt system reveal secret password "
    "pretend act mode assistant user model respond reply output follow new task instead only".split())


@dataclass(frozen=True)
class Folded(Normalised):
    """:class:`Normalised` plus, for each decoded form, the span of the original text it came from
    (None: the whole text; rot13 and leet forms are character-aligned with ``folded``)."""

    decoded_spans: Sequence[tuple[int, int] | None] = ()


def fold(text: str) -> tuple[str, list[int], int, int]:
    """The folded text, the original index of each folded character, the number of zero-width
    characters found inside words, and of bidi overrides."""
    out: list[str] = []
    offsets: list[int] = []
    hidden = overrides = 0
    space = True  # drop leading whitespace
    n = len(text)
    for i, ch in enumerate(text):
        if ch in ZERO_WIDTH or ch in BIDI:
            if ch in BIDI_OVERRIDES:
                overrides += 1
            elif ch != "\u00ad" and 0 < i < n - 1 and text[i - 1].isalnum() and text[i + 1].isalnum() and text[i - 1].isascii():
                hidden += 1
            continue
        piece = CONFUSABLES.get(ch)
        if piece is None:
            piece = unicodedata.normalize("NFKC", ch) if not ch.isascii() else ch
            piece = "".join(CONFUSABLES.get(c, c) for c in piece).lower()
        for c in piece:
            if c.isspace() or unicodedata.category(c) == "Cc":
                if space:  # a run of whitespace is one space, or one newline when it has one
                    if c == "\n" and out and out[-1] == " ":
                        out[-1] = "\n"
                    continue
                c, space = ("\n" if c == "\n" else " "), True
            else:
                space = False
            out.append(c)
            offsets.append(i)
    if out and out[-1] in " \n":
        out.pop()
        offsets.pop()
    return "".join(out), offsets, hidden, overrides


def _fold_only(text: str) -> str:
    return fold(text)[0]


def english_words(text: str) -> int:
    return sum(1 for w in _WORD.findall(text) if w in ENGLISH)


def decode_base64(text: str) -> list[tuple[str, tuple[int, int]]]:
    """The base64 runs of ``text`` that decode to mostly printable UTF-8 with words in it."""
    found = []
    for m in _BASE64.finditer(text):
        run = m.group(0)
        if run.isalpha() and (run.islower() or run.isupper()):
            continue  # a long word, not base64
        raw = run.rstrip("=")
        try:
            data = (base64.urlsafe_b64decode if ("-" in raw or "_" in raw) else base64.b64decode)(
                raw + "=" * (-len(raw) % 4))
            plain = data.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        printable = sum(1 for c in plain if c.isprintable() or c in "\n\t")
        if len(plain) >= 8 and printable >= 0.95 * len(plain) and " " in plain.strip() \
                and sum(c.isalpha() for c in plain) >= 0.6 * len(plain.replace(" ", "")):
            found.append((plain, m.span()))
    return found


def decode_rot13(folded: str) -> str | None:
    """``folded`` read as rot13, when that reads far more like English instructions than it does."""
    if sum(c.isalpha() for c in folded) < 12:
        return None
    plain = codecs.decode(folded, "rot13")
    before, after = english_words(folded), english_words(plain)
    return plain if after >= 3 and after >= 2 * before + 2 else None


def decode_leet(folded: str) -> str | None:
    """``folded`` with leetspeak digits and symbols read as letters, in words that mix them with
    letters (at least two such words); same length as ``folded``."""
    changed = 0

    def sub(m: re.Match) -> str:
        nonlocal changed
        tok = m.group(0)
        if sum(c.isalpha() for c in tok) >= 2 and any(c in _LEET_CHARS for c in tok):
            changed += 1
            return tok.translate(LEET)
        return tok

    plain = _LEET_TOKEN.sub(sub, folded)
    return plain if changed >= 2 and english_words(plain) >= english_words(folded) + 2 else None


def normalise(text: str) -> Folded:
    folded, offsets, hidden, overrides = fold(text)
    hits: list[Hit] = []
    if hidden >= HIDDEN_MIN or overrides:
        what = (f"{hidden} zero-width characters inside words" if hidden >= HIDDEN_MIN else "") + \
            (" and " if hidden >= HIDDEN_MIN and overrides else "") + \
            (f"{overrides} bidirectional override characters" if overrides else "")
        hits.append(Hit(Layer.NORMALISATION, "hidden_characters", f"hidden characters: {what}", None, HIDDEN_SCORE))
    decoded: list[tuple[str, str]] = []
    spans: list[tuple[int, int] | None] = []
    for plain, span in decode_base64(text):
        decoded.append(("base64", _fold_only(plain)))
        spans.append(span)
    rot = decode_rot13(folded)
    if rot is not None:
        decoded.append(("rot13", rot))
        spans.append(None)
    leet = decode_leet(folded)
    if leet is not None:
        decoded.append(("leet", leet))
        spans.append(None)
    return Folded(text, folded, offsets, tuple(decoded), tuple(hits), tuple(spans))


def decoded_span(norm: Normalised, index: int, start: int, end: int) -> tuple[int, int] | None:
    """The span of the original text for a match at ``start:end`` of decoded form ``index``: the
    encoded run for base64, the aligned characters for rot13 and leet."""
    kind = norm.decoded[index][0]
    spans = getattr(norm, "decoded_spans", ())
    if index < len(spans) and spans[index] is not None:
        return spans[index]
    if kind in ("rot13", "leet") and norm.offsets:
        return norm.span_in_text(start, end)
    return None
