"""Stale memories: time-bound plans whose time has passed ("tomorrow at 3" written three days ago,
"this week" written two weeks ago, "meeting Anna on Friday" after that Friday).

The time phrase is read by the project's own parser (:mod:`assistant.commands.when`, the one the
calendar commands use) relative to the memory's ``created_at``: a window of words starting at a
time word ("tomorrow", "on", "at", "next", "this", a weekday, a month, an ISO date...) is tried from
the longest (``MAX_WORDS``) to the shortest, and the first one the parser reads as a whole is the
phrase. Its period (:func:`~assistant.commands.when.parse_period`: one day, "this week" through
Sunday...) ends at midnight after its last day; the memory is stale once ``now`` is past that.

A phrase whose time was already over when the memory was written ("On 25 May 2023, Anna said: I'm
going to ...", stored today) dates the text, it is not the plan's time: the search goes on past it.
Only plans go stale, never facts: the text must say something is planned or due (a future cue:
"will", "going to", "need to", "meeting", "appointment", "remind"... or a phrase that only points
forward: "tomorrow", "tonight", "next week", "in 3 days"; "this week" may look back — "guess what I
did this week" — so it needs a cue); a past fact has neither ("I was born on Friday", "we met on
Friday" are kept), nor has "last Friday" or "haven't talked in days". Corrections
and facts about who the user is (name, birthday, where they live or work) are never stale; a
recurring time ("every Friday", "on Fridays") is no deadline.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from assistant.commands.when import parse_period
from assistant.memory.types import Memory, MemoryType

MAX_WORDS = 7  # the longest time phrase tried ("on friday the 20th at 3 pm")

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec")
# Words a time phrase may start with (a bare number is not one: "I have 3 kids").
_STARTS = {"today", "tonight", "tomorrow", "on", "at", "by", "next", "this", "in", "the", "noon", "midnight",
           "coming", *(_WEEKDAYS), *(_MONTHS)}
_ISO = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")
# A phrase that points forward by itself: whatever the verb, a plan.
# ("this week" is not: "guess what I did this week").
_FORWARD = re.compile(r"^(?:the day after )?(?:tomorrow|tonight|next |coming |in \d|in (?:a|an|one|two|three|four|five|"
                      r"six|seven|ten|half) )")
_FUTURE = re.compile(
    r"\b(?:will|won't|shall|'ll|going to|gonna|plan(?:s|ned|ning)? to|intend|have to|has to|need to|needs to|must|"
    r"should|let's|remind|reminder|remember to|don't forget|appointment|meeting|meet(?:s|ing)? (?:up|with)|"
    r"scheduled|schedule|booked|deadline|due|upcoming|interview|exam|flight|leaving|arriving|"
    r"(?:am|are|is|i'm|we're|he's|she's|they're) (?:\w+ing)\b)", re.I)
_ANY_FORWARD = re.compile(r"\b(?:tomorrow|tonight|next|coming|in (?:\d|a|an|one|two|three|four|five|six|seven|ten|"
                          r"half))\b", re.I)  # cheap pre-check
_RECURRING = {"every", "each", "usually", "always", "most"}
_BEHIND = {"last", "past", "previous", "since"}  # "last friday", "since monday"
_PERFECT = re.compile(r"\b(?:haven't|hasn't|hadn't|have not|has not|had not|been)\b", re.I)  # "haven't talked in days"
_IDENTITY = re.compile(r"\b(?:my name|i am called|i'm called|born|birthday|i live|i work|my job|married|"
                       r"my (?:wife|husband|partner|son|daughter|mother|father|mom|dad))\b", re.I)
_WORD = re.compile(r"[\w'’:-]+")


def _created(memory: Memory) -> datetime:
    moment = datetime.fromisoformat(memory.created_at.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def find_phrase(text: str, written: datetime) -> tuple[str, date, int] | None:
    """The first time phrase in ``text`` (as normalised words), its first day and length in days,
    resolved relative to ``written``; None when there is none (or it is recurring)."""
    words = [w.lower().replace("’", "'").strip(".,!?;:") for w in _WORD.findall(text)]
    for i, word in enumerate(words):
        if word not in _STARTS and not _ISO.match(word):
            continue
        if i and (words[i - 1] in _RECURRING or words[i - 1] in _BEHIND):
            continue
        for n in range(min(MAX_WORDS, len(words) - i), 0, -1):
            phrase = " ".join(words[i:i + n])
            if phrase.endswith("s") and phrase.split()[-1].rstrip("s") in _WEEKDAYS:
                break  # "on fridays": recurring
            if phrase in ("the", "on", "at", "by", "in", "this", "next", "coming"):
                break
            period = parse_period(phrase, written)
            if period is not None:
                if period[0] + timedelta(days=period[1]) <= written.date():
                    break  # over before it was written ("On 25 May 2023, Anna said: ..."): a record, not a plan
                return phrase, period[0], period[1]
    return None


def stale_reason(memory: Memory, now: datetime) -> str | None:
    """Why ``memory`` is stale at ``now`` (a sentence for the quarantine list), or None."""
    if memory.memory_type is MemoryType.CORRECTION:
        return None
    kind = memory.original_memory_type if memory.memory_type is MemoryType.ARCHIVED else memory.memory_type
    text = memory.content
    if kind is MemoryType.FACT and _IDENTITY.search(text):
        return None
    future = bool(_FUTURE.search(text))
    if not future and not _ANY_FORWARD.search(text):
        return None  # no plan: the phrase search (the costly part) is skipped
    written = _created(memory)
    found = find_phrase(text, written)
    if found is None:
        return None
    phrase, first, days = found
    forward = bool(_FORWARD.match(phrase))
    if not (forward or future):
        return None
    if phrase.startswith("in ") and _PERFECT.search(text):
        return None
    ends = datetime.combine(first + timedelta(days=days), time(0), written.tzinfo)
    if now < ends:
        return None
    return (f"stale: '{phrase}' (written {written.date().isoformat()}) has passed "
            f"(it ended {(ends - timedelta(seconds=1)).date().isoformat()})")
