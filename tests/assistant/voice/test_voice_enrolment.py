"""Enrolment sample quality (assistant.voice.enrolment)."""

from __future__ import annotations

import numpy as np
import pytest

from assistant.errors import ValidationFailed
from assistant.voice.audio import float_to_pcm, silence
from assistant.voice.enrolment import assess, disagreement, speech_seconds
from assistant.voice.vad import EnergyVad


class ScriptedVad:
    """Speech probability from a list, one per 512-sample chunk; counts resets."""

    chunk_samples = 512

    def __init__(self, probabilities: list[float]):
        self.probabilities = probabilities
        self.calls = 0
        self.resets = 0

    def speech_probability(self, chunk: bytes) -> float:
        assert len(chunk) == 1024
        value = self.probabilities[self.calls]
        self.calls += 1
        return value

    def reset(self) -> None:
        self.resets += 1


def voice(seconds: float, level: float = 0.1, seed: int = 0) -> bytes:
    return float_to_pcm(np.random.default_rng(seed).normal(0.0, level, int(16_000 * seconds)))


def test_speech_seconds_counts_chunks_at_or_above_one_half() -> None:
    vad = ScriptedVad([0.49, 0.5, 0.9, 0.1])
    assert speech_seconds(silence(4 * 512 / 16_000), vad) == pytest.approx(2 * 512 / 16_000)
    assert vad.resets == 2  # a fresh stream before and after


def test_a_fit_sample_reports_its_quality() -> None:
    quality = assess(voice(2.0), EnergyVad(), min_speech_s=1.0)
    assert quality.seconds == 2.0 and quality.speech_s == pytest.approx(2.0, abs=0.05)
    assert quality.rms_dbfs == pytest.approx(-20.0, abs=0.5) and quality.clipped_fraction == 0.0


@pytest.mark.parametrize(("pcm", "error"), [
    (silence(2.0), "silent"),
    (float_to_pcm(np.full(32_000, 5e-4)), "silent"),  # -66 dBFS
    (silence(1.5) + voice(0.5), "too little speech"),
    (float_to_pcm(np.sign(np.sin(np.arange(32_000) / 5.0))), "clipped"),
])
def test_unfit_samples_are_refused_naming_the_problem(pcm: bytes, error: str) -> None:
    with pytest.raises(ValidationFailed) as caught:
        assess(pcm, EnergyVad(), min_speech_s=1.0)
    assert caught.value.details["fields"] == [{"field": "body", "error": error}]


def test_a_little_clipping_is_tolerated() -> None:
    samples = np.random.default_rng(0).normal(0.0, 0.1, 32_000)
    samples[:30] = 1.0  # 0.09 % of the samples at full scale
    assert assess(float_to_pcm(samples), EnergyVad(), min_speech_s=1.0).clipped_fraction < 0.001


def test_disagreement_warns_at_or_below_the_floor() -> None:
    assert disagreement(0.76, 0.75) is None
    assert "0.75" in disagreement(0.75, 0.75) and "another person" in disagreement(0.2, 0.75)
