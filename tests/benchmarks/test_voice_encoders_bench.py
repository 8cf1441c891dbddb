"""The speaker-encoder benchmark's figures, from hand-made embeddings and a fake VAD (no model is loaded)."""

from __future__ import annotations

import numpy as np
import pytest

from assistant.voice.audio import float_to_pcm, pcm_to_float
from benchmarks import voice_encoders as bench


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_folds_are_disjoint_triples_leaving_a_clip_to_test() -> None:
    assert bench.folds(10) == [range(0, 3), range(3, 6), range(6, 9)]
    assert bench.folds(4) == [range(0, 3)]
    assert bench.folds(6) == [range(0, 3)]
    assert bench.folds(7) == [range(0, 3), range(3, 6)]


def test_centroid_trials_score_every_other_clip_against_every_centroid() -> None:
    a = [unit(1, 0), unit(1, 0.1), unit(1, -0.1), unit(1, 0.2)]
    b = [unit(0, 1), unit(0.1, 1), unit(-0.1, 1), unit(0.5, 1)]
    trials = bench.centroid_trials({"a": a, "b": b})
    assert [(x, y) for x, y, _ in trials] == [("a", "a"), ("a", "b"), ("b", "a"), ("b", "b")]
    centroid_a = a[0] + a[1] + a[2]
    assert trials[0][2] == pytest.approx(float(a[3] @ centroid_a / np.linalg.norm(centroid_a)), abs=1e-6)


def test_accept_figures_at_the_floor_and_at_90_percent_genuine() -> None:
    genuine = np.array([0.70, 0.80, 0.85, 0.90, 0.95, 0.96, 0.97, 0.98, 0.99, 1.0])
    impostor = np.array([0.10, 0.20, 0.75, 0.76, 0.69])
    figures = bench.accept_figures(genuine, impostor)
    assert figures["genuine_accept"] == 0.9  # 0.70 is not above 0.75
    assert figures["impostor_accept"] == 0.2  # 0.75 is not above it, 0.76 is
    assert figures["impostor_accept_at_ga90"] == 0.4  # threshold just under 0.80: 0.75 and 0.76 pass
    assert figures["genuine_scores"]["min"] == 0.7 and figures["impostor_scores"]["max"] == 0.76


def test_centroid_figures_per_reader_and_closed_set() -> None:
    a = [unit(1, 0), unit(1, 0.1), unit(1, -0.1), unit(1, 0.05), unit(0.1, 1)]  # the last sounds like b
    b = [unit(0, 1), unit(0.1, 1), unit(-0.1, 1), unit(0.05, 1), unit(0.1, 1)]
    figures = bench.centroid_figures({"a": a, "b": b}, {"a": "F", "b": "M"})
    assert (figures["folds"], figures["genuine"], figures["impostor"]) == (1, 4, 4)
    assert figures["closed_set_accuracy"] == 0.75
    assert figures["per_reader"]["a"]["sex"] == "F"
    assert figures["per_reader"]["a"]["genuine_at_or_below_floor"] == 1 == figures["genuine_at_or_below_floor"]
    assert figures["per_reader"]["b"]["impostors_accepted"] == 1


class LoudVad:
    """A fake VAD: a chunk is speech when it is louder than -40 dBFS."""

    chunk_samples = 512

    def speech_probability(self, chunk: bytes) -> float:
        return float(np.sqrt(np.mean(pcm_to_float(chunk) ** 2)) > 0.01)

    def reset(self) -> None:
        pass


def test_trimming_cuts_long_silences_only() -> None:
    speech = 0.3 * np.sin(np.arange(512 * 20) / 5)
    quiet = np.zeros(512 * 40)
    pcm = float_to_pcm(np.concatenate([speech, quiet, speech]))
    trimmed = bench.trim_long_silences(pcm, LoudVad())
    # chunks 0-19 speech, 20-59 silent, 60-79 speech. The average over chunks i-3..i+4 needs 5 of 8 speech
    # flags (numpy rounds 0.5 to 0): chunks 19-59 are silent; the dilation by 7 (3 either side) brings
    # back 19-21 and 57-59: 5 of the 40 silent chunks stay.
    assert len(trimmed) // 2 // 512 == 45
    short_pause = float_to_pcm(np.concatenate([speech, np.zeros(512 * 5), speech]))
    assert bench.trim_long_silences(short_pause, LoudVad()) == short_pause  # short pauses stay


def test_d_prime_ignores_the_score_scale() -> None:
    genuine, impostor = np.array([0.8, 0.9, 1.0]), np.array([0.2, 0.3, 0.4])
    assert bench.d_prime(genuine, impostor) == pytest.approx(0.6 / np.std([0.8, 0.9, 1.0]))
    assert bench.d_prime(genuine / 2 + 0.5, impostor / 2 + 0.5) == pytest.approx(bench.d_prime(genuine, impostor))
