"""Learning heuristics (spec: Retrieval and learning for chat, rules 4 and 5).

Cue bonuses: naming the assistant +0.40, identity +0.35, correction +0.30, preference +0.25, plus a
word-count adjustment; the score is clamped to [0.2, 0.9]. Type priority: naming -> Fact, then
Correction, then Preference, then identity -> Fact, default Context.

The base score and the word-count steps are not in the spec; they are the module's documented
values (base 0.30; -0.10 under 4 words, +0.05 from 20 words, +0.10 from 50 words).
"""

from __future__ import annotations

import pytest

from assistant.memory.learning import BONUS, CLAMP, classify, detect_cues, score_exchange, word_count_adjustment
from assistant.memory.types import MemoryType

BASE = 0.30


def test_bonuses_and_clamp_are_the_spec_numbers() -> None:
    assert BONUS == {"naming": 0.40, "identity": 0.35, "correction": 0.30, "preference": 0.25}
    assert CLAMP == (0.2, 0.9)


@pytest.mark.parametrize(
    ("sentence", "cues", "importance", "memory_type"),
    [
        # naming the assistant: 0.30 + 0.40
        ("Your name is Jarvis from now on.", ("naming",), 0.70, MemoryType.FACT),
        ("From today I will call you Friday.", ("naming",), 0.70, MemoryType.FACT),
        # identity: 0.30 + 0.35
        ("My name is Alice and I live in Berlin", ("identity",), 0.65, MemoryType.FACT),
        ("I work as a nurse at the city hospital.", ("identity",), 0.65, MemoryType.FACT),
        # correction: 0.30 + 0.30
        ("Actually, the meeting is on Tuesday at ten.", ("correction",), 0.60, MemoryType.CORRECTION),
        ("That's wrong, the dentist appointment moved.", ("correction",), 0.60, MemoryType.CORRECTION),
        # preference: 0.30 + 0.25
        ("I prefer green tea over coffee.", ("preference",), 0.55, MemoryType.PREFERENCE),
        ("My favourite colour is dark blue.", ("preference",), 0.55, MemoryType.PREFERENCE),
        # nothing: the base score, Context
        ("The weather looks nice today.", (), 0.30, MemoryType.CONTEXT),
    ],
)
def test_single_cue_examples(sentence, cues, importance, memory_type) -> None:
    scored = score_exchange(sentence, "Noted.")
    assert scored.cues == cues
    assert scored.importance == pytest.approx(importance, abs=1e-9)
    assert scored.memory_type is memory_type


def test_cues_are_case_insensitive() -> None:
    assert score_exchange("MY NAME IS BOB, nice to meet you").cues == ("identity",)
    assert score_exchange("i PREFER window seats on trains").cues == ("preference",)


def test_the_reply_does_not_add_cues() -> None:
    scored = score_exchange("What time is it now?", "Actually my name is Jarvis and I prefer tea.")
    assert scored.cues == ()
    assert scored.importance == pytest.approx(BASE)
    assert scored.memory_type is MemoryType.CONTEXT


# --- combined cues and type priority ----------------------------------------------------------------


def test_naming_wins_over_every_other_cue_and_the_score_is_clamped_at_0_9() -> None:
    # 0.30 + 0.40 + 0.35 + 0.30 + 0.25 = 1.60 -> 0.9
    scored = score_exchange("Actually, your name is Max, my name is Alice and I prefer tea.")
    assert set(scored.cues) == {"naming", "identity", "correction", "preference"}
    assert scored.importance == 0.9
    assert scored.memory_type is MemoryType.FACT


def test_correction_wins_over_preference() -> None:
    # 0.30 + 0.30 + 0.25 = 0.85
    scored = score_exchange("That's wrong: I prefer tea, not coffee.")
    assert set(scored.cues) == {"correction", "preference"}
    assert scored.importance == pytest.approx(0.85)
    assert scored.memory_type is MemoryType.CORRECTION


def test_correction_wins_over_identity() -> None:
    # 0.30 + 0.30 + 0.35 = 0.95 -> 0.9
    scored = score_exchange("Actually my name is Alicia, not Alice.")
    assert set(scored.cues) == {"correction", "identity"}
    assert scored.importance == 0.9
    assert scored.memory_type is MemoryType.CORRECTION


def test_preference_wins_over_identity() -> None:
    # 0.30 + 0.35 + 0.25 = 0.90
    scored = score_exchange("I live in Paris and I love jazz.")
    assert set(scored.cues) == {"identity", "preference"}
    assert scored.importance == pytest.approx(0.9)
    assert scored.memory_type is MemoryType.PREFERENCE


def test_naming_wins_over_correction() -> None:
    scored = score_exchange("No wait, that is wrong: your name is Max.")
    assert "naming" in scored.cues and "correction" in scored.cues
    assert scored.memory_type is MemoryType.FACT


@pytest.mark.parametrize(
    ("cues", "memory_type"),
    [
        (("naming", "correction", "preference", "identity"), MemoryType.FACT),
        (("correction", "preference", "identity"), MemoryType.CORRECTION),
        (("preference", "identity"), MemoryType.PREFERENCE),
        (("identity",), MemoryType.FACT),
        ((), MemoryType.CONTEXT),
    ],
)
def test_classify_priority(cues, memory_type) -> None:
    assert classify(cues) is memory_type


def test_no_comma_correction_cue() -> None:
    """``no,`` is one of the module's correction cues; a sentence starting "No, ..." must use it."""
    assert "correction" in detect_cues("No, the meeting is on Tuesday.")
    scored = score_exchange("No, the meeting is on Tuesday.")
    assert scored.memory_type is MemoryType.CORRECTION
    assert scored.importance == pytest.approx(0.60)


# --- word count and clamp --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("words", "adjustment"), [(1, -0.10), (3, -0.10), (4, 0.0), (19, 0.0), (20, 0.05), (49, 0.05), (50, 0.10), (200, 0.10)]
)
def test_word_count_adjustment(words: int, adjustment: float) -> None:
    assert word_count_adjustment(words) == adjustment
    text = " ".join(["plain"] * words)
    scored = score_exchange(text)
    assert scored.words == words
    assert scored.importance == pytest.approx(max(BASE + adjustment, 0.2), abs=1e-9)


def test_long_message_scores_higher_than_short_one_with_the_same_cue() -> None:
    short = score_exchange("I prefer tea.")  # 3 words: 0.30 + 0.25 - 0.10
    medium = score_exchange("I prefer tea in the morning.")  # 6 words: 0.55
    long = score_exchange("I prefer tea in the morning " + "because it is calm and quiet " * 3)  # 21 words
    assert short.importance == pytest.approx(0.45)
    assert medium.importance == pytest.approx(0.55)
    assert long.words >= 20
    assert long.importance == pytest.approx(0.60)


def test_lower_clamp() -> None:
    for text in ("hi", "ok thanks", "", "   "):
        assert score_exchange(text).importance == 0.2


def test_long_naming_message_is_not_clamped_below_0_9() -> None:
    scored = score_exchange("Your name is Max. " + "word " * 60)
    assert scored.words > 50
    assert scored.importance == pytest.approx(0.80)  # 0.30 + 0.40 + 0.10


def test_upper_clamp_with_long_text() -> None:
    scored = score_exchange("Your name is Max and my name is Alice. " + "word " * 60)
    assert scored.words > 50
    assert scored.importance == 0.9  # 0.30 + 0.40 + 0.35 + 0.10 = 1.15 -> 0.9
