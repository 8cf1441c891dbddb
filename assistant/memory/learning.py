"""Learning from an exchange without a model call: an importance score and a memory type.

Score = 0.30 base + cue bonuses (naming the assistant +0.40, identity +0.35, correction +0.30,
preference +0.25) + a word-count adjustment (-0.10 under 4 words, +0.05 from 20 words, +0.10 from
50), clamped to [0.2, 0.9]. Type priority: naming the assistant -> Fact, then Correction, then
Preference, then identity/fact -> Fact, else Context.

An exchange the prompt-injection defence flagged — the user's message, or indirect content (a tool
result, a memory, a web page) the reply was built on in that turn — is not learned at all
(:func:`learning_refusal`): storing it as Context with a tag would still put the text back into
later prompts (retrieval does not filter by type), and a later merge could promote it to a Fact or
Correction; the exchange itself stays in its conversation, and the verdict is kept with its tool runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.memory.types import MemoryType

BASE_SCORE = 0.30
CLAMP = (0.2, 0.9)
BONUS = {"naming": 0.40, "identity": 0.35, "correction": 0.30, "preference": 0.25}


def _cues(*patterns: str) -> re.Pattern[str]:
    # Not part of a longer word on either side; unlike \b this also works after "no," + space.
    return re.compile(r"(?<!\w)(?:" + "|".join(patterns) + r")(?!\w)", re.IGNORECASE)


CUES = {
    "naming": _cues(r"your name is", r"i(?:'ll| will) call you", r"call you", r"you are called",
                    r"you're called", r"i name you", r"let's call you"),
    "identity": _cues(r"my name is", r"i am an?", r"i'm an?", r"i live in", r"i work (?:as|at|for)",
                      r"i was born", r"my (?:wife|husband|partner|son|daughter|mother|father|birthday|job|email)",
                      r"i have (?:a|two|three|\d+) (?:kids?|children|dogs?|cats?)", r"call me"),
    "correction": _cues(r"actually", r"that's (?:not|wrong)", r"that is (?:not|wrong)", r"not correct",
                        r"incorrect", r"i meant", r"no,", r"wrong", r"correction"),
    "preference": _cues(r"i prefer", r"i (?:really )?(?:like|love|enjoy|hate|dislike)", r"i don't like",
                        r"i do not like", r"my favou?rite", r"i'd rather", r"i would rather"),
}


@dataclass(frozen=True)
class LearnedScore:
    importance: float
    memory_type: MemoryType
    cues: tuple[str, ...]
    words: int


def word_count_adjustment(words: int) -> float:
    if words < 4:
        return -0.10
    if words >= 50:
        return 0.10
    if words >= 20:
        return 0.05
    return 0.0


def detect_cues(text: str) -> tuple[str, ...]:
    return tuple(name for name, pattern in CUES.items() if pattern.search(text))


def classify(cues: tuple[str, ...]) -> MemoryType:
    if "naming" in cues:
        return MemoryType.FACT
    if "correction" in cues:
        return MemoryType.CORRECTION
    if "preference" in cues:
        return MemoryType.PREFERENCE
    if "identity" in cues:
        return MemoryType.FACT
    return MemoryType.CONTEXT


def score_exchange(user_message: str, reply: str = "") -> LearnedScore:
    """Score what the user said (the reply does not add cues: it is the model's text)."""
    cues = detect_cues(user_message)
    words = len(user_message.split())
    raw = BASE_SCORE + sum(BONUS[c] for c in cues) + word_count_adjustment(words)
    importance = round(min(max(raw, CLAMP[0]), CLAMP[1]), 4)
    return LearnedScore(importance, classify(cues), cues, words)


def learning_refusal(user_flagged: bool, indirect_flagged: bool) -> str | None:
    """Why an exchange must not be learned (see the module docstring), or None when it may."""
    if user_flagged:
        return "the user's message was flagged as a possible prompt injection"
    if indirect_flagged:
        return "the reply was built on content flagged as a possible prompt injection"
    return None
