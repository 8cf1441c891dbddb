"""The wake-word benchmark's figures from synthetic score traces (no model is loaded, nothing synthesised)."""

from __future__ import annotations

import numpy as np

from assistant.voice.wake import PACKAGED_WORDS
from assistant.voice.wake_calibration import ScoredClip
from assistant.voice.wake_thresholds import Calibration, WordThreshold
from benchmarks import voice_wake as bench


def clip(name: str, seconds: float = 1800.0, excluded: frozenset[str] = frozenset(), **peaks: float) -> ScoredClip:
    """A clip whose every word scores 0.01, except ``peaks`` {word: score} at its second step."""
    traces = {w: np.full(50, 0.01) for w in PACKAGED_WORDS}
    for word, score in peaks.items():
        traces[word][1] = score
    return ScoredClip(name, name.split("/")[0], excluded, seconds, traces)


def test_false_alarms_per_hour_count_speech_and_leave_near_misses_apart() -> None:
    clips = [clip("speech/a.wav", hey_rhasspy=0.9), clip("speech/b.wav"),
             clip("piper_near_miss/hey_jarvis/n.wav", 60, frozenset({"hey_jarvis"}), hey_jarvis=0.99),
             clip("hey_jarvis/p.wav", 60, frozenset({"hey_jarvis"}), hey_jarvis=0.99, alexa=0.7)]
    result = bench.alarms_per_hour(clips, dict.fromkeys(PACKAGED_WORDS, 0.5))
    assert result["per_word"]["hey_rhasspy"] == {"false_alarms": 1, "per_hour": round(3600 / 3660, 3)}  # 1.02 h
    assert result["per_word"]["hey_jarvis"]["false_alarms"] == 0  # its own phrase is not a false alarm
    assert result["per_word"]["alexa"]["false_alarms"] == 1  # "Hey Jarvis, ..." firing alexa is one
    every = result["all_words"]
    assert [(name, word) for name, word, _ in every["clips"]] == [("speech/a.wav", "hey_rhasspy")]
    assert every["hours"] == round((3600 + 60) / 3600, 3)  # "hey_jarvis, ...": jarvis won the step, not alexa
    near = bench.near_miss_alarms(clips, {"hey_jarvis": 0.5, "hey_mycroft": 0.5})
    assert near["hey_jarvis"] == {"own": "1/1", "other": "0/0", "other_firing": []}
    assert near["hey_mycroft"]["own"] == "0/0"


def test_hits_per_word_alone_and_with_every_word() -> None:
    positives = [clip("alexa/1.wav", 2, alexa=0.9), clip("alexa/2.wav", 2, alexa=0.3),
                 clip("hey_jarvis/1.wav", 2, hey_jarvis=0.8, alexa=0.95)]
    thresholds = dict.fromkeys(PACKAGED_WORDS, 0.5)
    assert bench.hits(positives, thresholds, alone=True) == {"alexa": "1/2", "hey_jarvis": "1/1"}
    assert bench.hits(positives, thresholds, alone=False) == {"alexa": "1/2", "hey_jarvis": "0/1"}  # alexa won


def test_figures_calibrate_on_one_half_and_count_on_the_other() -> None:
    scored = {"calibration": [clip("speech/c.wav", 3600, hey_rhasspy=0.92)],
              "heldout": [clip("speech/h.wav", 3600, hey_rhasspy=0.73)],
              "positives": [clip("hey_rhasspy/p.wav", 2, hey_rhasspy=0.95)]}
    shipped = Calibration(words={w: WordThreshold(0.5, 0, 0.0, 0.1, 1.0, True) for w in PACKAGED_WORDS},
                          budget_per_hour=0.5, margin=0.1, refractory_s=1.0, negative_hours=1.0)
    result = bench.figures(scored, shipped)
    assert result["calibrated"]["hey_rhasspy"]["threshold"] == 0.99  # 0.92 + 0.1, capped
    assert result["uncalibrated"]["heldout"]["per_word"]["hey_rhasspy"]["per_hour"] == 1.0
    assert result["calibrated_on_heldout"]["per_word"]["hey_rhasspy"]["per_hour"] == 0.0
    assert result["shipped_on_heldout"]["all_words"]["false_alarms"] == 1  # the shipped 0.5 lets 0.73 through
    assert result["hits"]["uncalibrated"] == {"hey_rhasspy": "1/1"}
    assert result["hits"]["shipped_alone"] == {"hey_rhasspy": "1/1"}
    assert result["hours"] == {"calibration": 1.0, "heldout": 1.0}
