"""Whisper's English normaliser on transcripts: numbers, spelling, contractions, hesitations, punctuation and
case; the word error rate raw and normalised; the wake phrase stripped alike from either form."""

from __future__ import annotations

import pytest

from assistant.voice.normalise import normalise_transcript
from assistant.voice.stt import word_error_rate
from assistant.voice.worker import strip_wake_phrase

PACKAGED_WORDS = ("hey_jarvis", "alexa", "hey_mycroft", "hey_rhasspy", "okay_nabu")


@pytest.mark.parametrize(("text", "expected"), [
    # numbers
    ("ten", "10"),
    ("Set a timer for ten minutes.", "set a timer for 10 minutes"),
    ("twenty five", "25"),
    ("twenty-five", "25"),
    ("one hundred and twenty three", "123"),
    ("three point five", "3.5"),
    ("two and a half", "2.5"),
    ("nine one one", "911"),
    # ordinals, currency, percentages
    ("the first of May", "the 1st of may"),
    ("the twenty third", "the 23rd"),
    ("twenty-five percent", "25%"),
    ("What is twenty five percent of eighty?", "what is 25% of 80"),
    ("fifty dollars", "$50"),
    ("five dollars and fifty cents", "$5.50"),
    # British and American spelling
    ("colour", "color"),
    ("Which colour is my favourite?", "which color is my favorite"),
    ("organise the centre", "organize the center"),
    # contractions, titles, hesitations
    ("I won't", "i will not"),
    ("it's here", "it is here"),
    ("Mr. Dashwood", "mister dashwood"),
    ("Um, uh, I think so.", "i think so"),
    ("[music] hello", "hello"),
    # punctuation, case, whitespace
    ("  Hello,   World!  ", "hello world"),
    ("What is the capital of France?", "what is the capital of france"),
    # digits stay digits
    ("Set a timer for 10 minutes.", "set a timer for 10 minutes"),
])
def test_whisper_normalisation(text: str, expected: str) -> None:
    assert normalise_transcript(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n", "Hmm.", "Uh, um"])
def test_nothing_said_normalises_to_nothing(text: str) -> None:
    assert normalise_transcript(text) == ""


def test_whispers_own_quirks_are_kept() -> None:
    """The normaliser is Whisper's, warts included: the figures stay comparable with published ones."""
    assert normalise_transcript("ten o'clock") == "100 clock"  # "o" is a zero
    assert normalise_transcript("two plus two") == "2 +2"  # "plus" before a number is a sign


def test_wer_raw_counts_spelled_numbers_and_spelling_as_errors_normalised_does_not() -> None:
    reference = ["Set a timer for ten minutes, in the colour red, for twenty-five percent."]
    heard = ["Set a timer for 10 minutes in the color red for 25%."]
    # raw: "ten"/"10", "colour"/"color", "twenty-five"/"25%" substituted and "percent" deleted: 4 of 13 words
    assert word_error_rate(reference, heard) == pytest.approx(4 / 13)
    assert word_error_rate(reference, heard, normalised=True) == 0.0


def test_wer_normalised_still_counts_real_mishearings() -> None:
    assert word_error_rate(["set a timer for ten minutes"], ["set a time for 10 minutes"],
                           normalised=True) == pytest.approx(1 / 6)


@pytest.mark.parametrize("text", [
    "Hey Jarvis, set a timer for ten minutes.",
    "Jarvis. Turn on the lights.",
    "What is Jarvis?",
    "Okay Nabu, play some music.",
    "OK, Nabu! What is twenty five percent of eighty?",
    "Alexa, what colour is the sky?",
    "Hey, Mycroft... one two three",
    "Hey Rhasspy it's ten past two",
])
def test_the_wake_phrase_is_stripped_alike_from_raw_and_normalised_text(text: str) -> None:
    assert strip_wake_phrase(normalise_transcript(text), PACKAGED_WORDS) == normalise_transcript(
        strip_wake_phrase(text, PACKAGED_WORDS))
