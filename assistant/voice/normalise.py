"""Whisper's English text normaliser: the form transcripts are compared in (word error rate) and matched in.

:func:`normalise_transcript` applies ``EnglishTextNormalizer``, the normaliser the Whisper paper (appendix C)
reports its word error rates with: lower case; punctuation and symbols dropped; spelled-out numbers as digits
("ten" -> "10", "twenty five" -> "25", "one hundred and twenty three" -> "123"), with ordinals ("first" ->
"1st"), currency ("fifty dollars" -> "$50") and percentages ("twenty-five percent" -> "25%"); British
spellings as American ones ("colour" -> "color", from its ~1,700-word ``english.json`` map); contractions
expanded ("won't" -> "will not"), titles spelled out ("Mr." -> "mister"); hesitations ("uh", "hmm") and
bracketed text removed. Whisper's quirks come with it: "o" counts as a zero ("ten o'clock" -> "100 clock"),
and "plus" before a number becomes a sign ("two plus two" -> "2 +2").

Where each form goes: the raw text (:attr:`~assistant.voice.stt.Transcript.text`) is what the model gets; a
language model reads "10" and "ten" alike, and the raw text keeps the speaker's capitals and punctuation.
The normalised form (:attr:`~assistant.voice.stt.Transcript.normalised`) is for measuring and matching: the
word error rate with ``normalised=True``, and the voice event log (the ``transcript`` event's
``normalised``), so the log can be searched without caring how Whisper spelled a number.
:func:`~assistant.voice.worker.strip_wake_phrase` gives the same words on either form.

Why this library: ``whisper-normalizer`` (MIT) is a standalone copy of openai-whisper's
``whisper/normalizers`` (its ``english.py`` is Whisper's, line for line); openai-whisper itself would bring
torch, tiktoken and numba for these few hundred lines. Only ``whisper_normalizer.english`` is imported,
which needs ``regex`` and ``more-itertools``; the package's other requirements (``text2num``,
``indic-numtowords``, both MIT, ~0.5 MB in all) serve its other languages.
"""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _normaliser() -> Any:
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()  # reads english.json once


def normalise_transcript(text: str) -> str:
    """``text`` as Whisper's English normaliser writes it: lower case, digits, American spelling, no
    punctuation, single spaces, stripped ("" for nothing said)."""
    return _normaliser()(text).strip() if text.strip() else ""
