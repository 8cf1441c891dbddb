"""Free-text tool arguments keep the user's own words (issue 20, part of :mod:`assistant.chat.arguments`).

A small model pads what it copies: the user asks for "a meeting with the marketing team tomorrow at
2pm" and the call's ``content`` becomes "Meeting with the marketing team at 2pm tomorrow at 9:00 AM.".
The rule here is deliberately narrow: the value's longest run of words that the user also wrote
(case-insensitive, word by word) is its core, and the value becomes the user's span only when
everything else in it is padding — time phrases (found by :func:`assistant.commands.when.find_moments`)
when the call has a date/time argument that holds the time, words that another argument already holds (a place in ``location``), the small
closed class of :data:`CONNECTORS` between them, and a trailing full stop. Anything else left over
(a word the model added on purpose, a question mark) keeps the value as it is.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from assistant.chat.arguments_dates import RECENT_MESSAGES
from assistant.commands.when import find_moments

# Prepositions, articles and conjunctions that link padding to the core ("... at 2pm in the cafeteria").
CONNECTORS = frozenset({"at", "on", "in", "by", "for", "from", "to", "until", "the", "a", "an", "and", "of"})
# Parameters never rewritten, whatever they hold: secrets and identifiers are copied, not phrased.
PROTECTED_NAMES = frozenset({"password", "passwd", "secret", "token", "key", "id", "code", "email", "url", "uri",
                             "username", "account", "number", "phone", "path", "file", "query"})
MAX_VALUE_WORDS = 40  # longer values are documents or questions, not phrases to trim
MAX_MESSAGE_WORDS = 400  # the word-level match is quadratic: longer user messages are not searched
MAX_CORES = 5
# Whose casing the kept words have: "user" (as the user typed them, the rule) or "model" (the
# model's own casing of the same words: "Meeting with ..." for the user's "... the meeting with ...").
CASING = "user"  # the longest common runs tried as the value's core, longest first
_EDGE = "\"'“”‘’()[]{}<>.,;:!?"
_PADDING_PUNCTUATION = re.compile(r"^[\s.,;:\-–]*$")


def _words(text: str) -> list[tuple[str, int, int]]:
    """(lower-case word, start, end) for each word of ``text``, edge punctuation aside."""
    out = []
    for match in re.finditer(r"\S+", text):
        start, end = match.start(), match.end()
        while start < end and text[start] in _EDGE:
            start += 1
        while end > start and text[end - 1] in _EDGE:
            end -= 1
        if start < end:
            out.append((text[start:end].lower(), start, end))
    return out


def is_free_text(name: str, schema: dict[str, Any], value: Any) -> bool:
    """A string parameter with no enum, format or pattern, not named like a secret or identifier,
    holding a value of two words or more."""
    if not isinstance(value, str) or not isinstance(schema, dict):
        return False
    kind = schema.get("type", "string")
    if not (kind == "string" or isinstance(kind, list) and "string" in kind) or any(k in schema for k in ("enum", "format", "pattern", "const")):
        return False
    name_words = set(re.split(r"[\s_\-]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name).lower()))
    return not name_words & PROTECTED_NAMES and len(value.split()) >= 2 and "@" not in value


def _runs(value: list[str], message: list[str]) -> list[tuple[int, int, int]]:
    """(length, start in value, start in message) of every maximal common run of words."""
    where: dict[str, list[int]] = {}
    for j, word in enumerate(message):
        where.setdefault(word, []).append(j)
    runs = []
    previous: dict[int, int] = {}  # end position in message -> length of the run ending there
    for i, word in enumerate(value):
        current = {j: previous.get(j - 1, 0) + 1 for j in where.get(word, ())}
        for j, length in current.items():
            if i + 1 == len(value) or j + 1 == len(message) or value[i + 1] != message[j + 1]:
                runs.append((length, i + 1 - length, j + 1 - length))
        previous = current
    return runs


def _is_padding(rest: str, other_words: set[str], now: datetime, trailing: bool,
                times: bool) -> tuple[bool, bool]:
    """(all of ``rest`` is padding, some of it restates a time or another argument); ``times``:
    whether a time phrase restates another argument (the call has a date/time argument)."""
    if _PADDING_PUNCTUATION.match(rest):
        return (trailing or not rest.strip()), False
    covered = [False] * len(rest)
    for found in find_moments(rest, now) if times else ():
        covered[found.start:found.end] = [True] * (found.end - found.start)
    restated = any(covered)
    for word, start, end in _words(rest):
        if all(covered[start:end]):
            continue
        if word in other_words:
            restated = True
        elif word not in CONNECTORS:
            return False, False
        covered[start:end] = [True] * (end - start)
    leftover = "".join(ch for ch, c in zip(rest, covered, strict=True) if not c)
    return bool(_PADDING_PUNCTUATION.match(leftover)), restated


def _trim_edges(span: str, now: datetime, times: bool) -> str:
    """``span`` without connectors at its ends and, when another argument holds the time (``times``),
    without time phrases at its ends: a core that ran into the time ("call the dentist tomorrow at"
    before the model's "3 pm" for the user's "3pm") ends where the task does."""
    while True:
        words = _words(span)
        if not words:
            return span
        if words[-1][0] in CONNECTORS:
            span = span[:words[-1][1]].rstrip()
            continue
        if words[0][0] in CONNECTORS and len(words) > 1:
            span = span[words[1][1]:]
            continue
        moments = find_moments(span, now) if times else []
        tail = next((m for m in moments if not span[m.end:].strip(_EDGE + " ")), None)
        if tail is not None and span[:tail.start].strip():
            span = span[:tail.start].rstrip()
            continue
        return span


def keep_user_words(value: str, user_text: list[str], other_values: list[Any], now: datetime,
                    times_elsewhere: bool = True, casing: str = CASING) -> str | None:
    """The user's span that ``value`` pads, or None when the value is to stay as it is.
    ``other_values``: the call's other arguments; ``times_elsewhere``: whether one of them holds a
    date or time (else a time phrase in the value is its content, not padding: "call mom at 5")."""
    words = _words(value)
    if not words or len(words) > MAX_VALUE_WORDS:
        return None
    lowered = value.strip().lower()
    if any(lowered in message.lower() for message in user_text[-RECENT_MESSAGES:]):
        return None  # the user wrote it so
    keys = [w for w, _, _ in words]
    candidates = []  # (length, newest first, run in value, run in message, message, its words)
    for age, message in enumerate(reversed(user_text[-RECENT_MESSAGES:])):
        message_words = _words(message)
        if len(message_words) > MAX_MESSAGE_WORDS:
            continue
        for length, at, their in _runs(keys, [w for w, _, _ in message_words]):
            if not all(w in CONNECTORS for w in keys[at:at + length]):
                candidates.append((-length, age, at, their, message, message_words))
    other_words = {w for v in other_values if isinstance(v, str) for w, _, _ in _words(v)} - CONNECTORS
    for negative, _, at, their, message, message_words in sorted(candidates, key=lambda c: c[:2])[:MAX_CORES]:
        length = -negative
        head, tail = value[:words[at][1]], value[words[at + length - 1][2]:]
        head_ok, head_restated = _is_padding(head, other_words, now, False, times_elsewhere)
        tail_ok, tail_restated = _is_padding(tail, other_words, now, True, times_elsewhere)
        only_stop = not head.strip() and tail.strip() == "."
        if head_ok and tail_ok and (head_restated or tail_restated or only_stop):
            if casing == "model":
                span = value[words[at][1]:words[at + length - 1][2]]
            else:
                span = message[message_words[their][1]:message_words[their + length - 1][2]]
            span = _trim_edges(span, now, times_elsewhere)
            return span if span and span != value else None
    return None
