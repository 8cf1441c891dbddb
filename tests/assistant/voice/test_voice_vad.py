"""Voice activity without models: the speech segmenter driven by a fake VAD with scripted probabilities
(10 ms chunks, so every boundary of the default settings falls exactly on a chunk), the energy detector and
the registry."""

from __future__ import annotations

import numpy as np
import pytest

from assistant.config import VadSettings
from assistant.errors import ConfigError
from assistant.voice.audio import float_to_pcm, silence
from assistant.voice.vad import (
    EnergyVad,
    NoSpeech,
    SpeechEnded,
    SpeechSegmenter,
    SpeechStarted,
    create_vad,
)

CHUNK = 160  # 10 ms
SETTINGS = VadSettings()  # threshold 0.5, min_speech 250, silence 700, max_utterance 15000, no_speech 5000
SPEECH, QUIET = 0.9, 0.1


class ScriptedVad:
    """Returns the scripted probabilities one per chunk (then ``after``); records resets and chunk sizes."""

    chunk_samples = CHUNK

    def __init__(self, probabilities: list[float], after: float = QUIET) -> None:
        self.probabilities = list(probabilities)
        self.after = after
        self.resets = 0
        self.sizes: set[int] = set()

    def speech_probability(self, chunk: bytes) -> float:
        self.sizes.add(len(chunk))
        return self.probabilities.pop(0) if self.probabilities else self.after

    def reset(self) -> None:
        self.resets += 1


def chunks(first: int, count: int) -> bytes:
    """``count`` chunks of PCM whose every sample holds its chunk's index (from ``first``)."""
    return np.repeat(np.arange(first, first + count, dtype="<i2"), CHUNK).tobytes()


def run(probabilities: list[float], after: float = QUIET, settings: VadSettings = SETTINGS,
        pre_roll_ms: int = 300) -> tuple[SpeechSegmenter, list[tuple[int, object]]]:
    """Feeds one chunk per probability (chunk i holds the value i); events paired with the chunk that gave them."""
    segmenter = SpeechSegmenter(ScriptedVad(probabilities, after), settings, pre_roll_ms)
    events = []
    for index in range(len(probabilities)):
        events += [(index, event) for event in segmenter.feed(chunks(index, 1))]
    return segmenter, events


def chunk_indexes(pcm: bytes) -> list[int]:
    return sorted(set(np.frombuffer(pcm, dtype="<i2").tolist()))


# --- speech start -------------------------------------------------------------------------------------------


def test_speech_starts_once_it_has_lasted_min_speech_ms() -> None:
    _, events = run([QUIET] * 100 + [SPEECH] * 25)
    assert events == [(124, SpeechStarted(1.0))]  # 25 x 10 ms = 250 ms, at_s where the speech began


def test_speech_shorter_than_min_speech_ms_does_not_start() -> None:
    segmenter, events = run([QUIET] * 100 + [SPEECH] * 24 + [QUIET] * 10)
    assert events == []
    assert not segmenter.in_speech


def test_an_interrupted_run_starts_over() -> None:
    _, events = run([SPEECH] * 24 + [QUIET] + [SPEECH] * 25)
    assert events == [(49, SpeechStarted(0.25))]


def test_a_probability_equal_to_the_threshold_is_speech() -> None:
    _, events = run([0.5] * 25)
    assert events == [(24, SpeechStarted(0.0))]
    _, events = run([0.4999] * 25)
    assert events == []


def test_zero_min_speech_starts_at_the_first_speech_chunk() -> None:
    _, events = run([QUIET] * 3 + [SPEECH], settings=VadSettings(min_speech_ms=0))
    assert events == [(3, SpeechStarted(0.03))]


# --- speech end --------------------------------------------------------------------------------------------


def test_speech_ends_after_silence_ms_of_non_speech() -> None:
    segmenter, events = run([QUIET] * 100 + [SPEECH] * 100 + [QUIET] * 70)
    assert [(i, type(e)) for i, e in events] == [(124, SpeechStarted), (269, SpeechEnded)]
    ended = events[1][1]
    assert isinstance(ended, SpeechEnded)
    assert (ended.at_s, ended.reason) == (2.7, "silence")
    assert not segmenter.in_speech


def test_one_chunk_short_of_silence_ms_keeps_the_utterance_open() -> None:
    segmenter, events = run([SPEECH] * 100 + [QUIET] * 69)
    assert [type(e) for _, e in events] == [SpeechStarted]
    assert segmenter.in_speech


def test_a_speech_chunk_restarts_the_silence_count() -> None:
    _, events = run([SPEECH] * 30 + [QUIET] * 69 + [SPEECH] + [QUIET] * 70)
    assert [(i, type(e)) for i, e in events] == [(24, SpeechStarted), (169, SpeechEnded)]


def test_the_utterance_pcm_runs_from_pre_roll_before_the_start_to_the_end() -> None:
    _, events = run([QUIET] * 100 + [SPEECH] * 100 + [QUIET] * 70)
    ended = events[1][1]
    assert isinstance(ended, SpeechEnded)
    assert chunk_indexes(ended.pcm) == list(range(70, 270))  # 300 ms before 1.0 s, to 2.7 s
    assert len(ended.pcm) == 200 * CHUNK * 2


def test_the_pre_roll_stops_at_the_stream_start() -> None:
    _, events = run([QUIET] * 10 + [SPEECH] * 30 + [QUIET] * 70)
    ended = events[1][1]
    assert isinstance(ended, SpeechEnded)
    assert chunk_indexes(ended.pcm) == list(range(110))


def test_a_zero_pre_roll_starts_the_pcm_at_the_speech() -> None:
    _, events = run([QUIET] * 50 + [SPEECH] * 30 + [QUIET] * 70, pre_roll_ms=0)
    ended = events[1][1]
    assert isinstance(ended, SpeechEnded)
    assert chunk_indexes(ended.pcm)[0] == 50


def test_the_utterance_is_cut_at_max_utterance_ms() -> None:
    segmenter, events = run([QUIET] * 100 + [SPEECH] * 1500)
    assert [(i, type(e)) for i, e in events] == [(124, SpeechStarted), (1599, SpeechEnded)]
    ended = events[1][1]
    assert isinstance(ended, SpeechEnded)
    assert (ended.at_s, ended.reason) == (16.0, "max_utterance")  # 15 s after the start at 1.0 s
    assert chunk_indexes(ended.pcm) == list(range(70, 1600))
    assert not segmenter.in_speech


def test_one_chunk_short_of_max_utterance_ms_keeps_the_utterance_open() -> None:
    segmenter, events = run([SPEECH] * 1499)
    assert [type(e) for _, e in events] == [SpeechStarted]
    assert segmenter.in_speech


# --- no speech ----------------------------------------------------------------------------------------------


def test_no_speech_after_no_speech_timeout_ms() -> None:
    segmenter, events = run([QUIET] * 500)
    assert events == [(499, NoSpeech(5.0))]
    assert not segmenter.in_speech


def test_one_chunk_short_of_the_timeout_is_still_waiting() -> None:
    _, events = run([QUIET] * 499)
    assert events == []


def test_short_bursts_of_speech_do_not_delay_the_timeout() -> None:
    _, events = run(([SPEECH] * 20 + [QUIET] * 5) * 20)
    assert events == [(499, NoSpeech(5.0))]


def test_speech_under_way_at_the_timeout_may_still_start() -> None:
    _, events = run([QUIET] * 490 + [SPEECH] * 25)
    assert events == [(514, SpeechStarted(4.9))]


def test_speech_under_way_at_the_timeout_that_dies_out_gives_no_speech() -> None:
    _, events = run([QUIET] * 490 + [SPEECH] * 20 + [QUIET])
    assert events == [(510, NoSpeech(5.11))]


# --- after the end, reset, buffering --------------------------------------------------------------------------


def test_nothing_more_after_the_end_until_reset() -> None:
    segmenter, events = run([SPEECH] * 30 + [QUIET] * 70 + [SPEECH] * 100)
    assert [type(e) for _, e in events] == [SpeechStarted, SpeechEnded]
    assert segmenter.feed(chunks(0, 500)) == []


def test_nothing_more_after_no_speech_until_reset() -> None:
    segmenter, _ = run([QUIET] * 500 + [SPEECH] * 100)
    assert segmenter.feed(chunks(0, 100)) == []


def test_reset_restarts_time_and_the_vad() -> None:
    vad = ScriptedVad([QUIET] * 500 + [QUIET] * 10 + [SPEECH] * 25)
    segmenter = SpeechSegmenter(vad, SETTINGS)
    assert vad.resets == 1
    assert segmenter.feed(chunks(0, 500)) == [NoSpeech(5.0)]
    segmenter.reset()
    assert vad.resets == 2
    assert segmenter.feed(chunks(0, 35)) == [SpeechStarted(0.1)]
    assert segmenter.in_speech


def test_reset_drops_a_partial_chunk() -> None:
    vad = ScriptedVad([], after=SPEECH)
    segmenter = SpeechSegmenter(vad, SETTINGS)
    segmenter.feed(bytes(100))
    segmenter.reset()
    assert segmenter.feed(chunks(0, 25)) == [SpeechStarted(0.0)]


def test_any_even_length_is_buffered_to_whole_vad_chunks() -> None:
    script = [QUIET] * 100 + [SPEECH] * 100 + [QUIET] * 70
    vad = ScriptedVad(script)
    segmenter = SpeechSegmenter(vad, SETTINGS)
    pcm, events = chunks(0, 270), []
    for start in range(0, len(pcm), 86):  # 43 samples at a time
        events += segmenter.feed(pcm[start:start + 86])
    assert vad.sizes == {CHUNK * 2}
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded]
    assert events[0] == SpeechStarted(1.0)
    assert isinstance(events[1], SpeechEnded)
    assert chunk_indexes(events[1].pcm) == list(range(70, 270))


def test_odd_length_pcm_is_refused() -> None:
    segmenter = SpeechSegmenter(ScriptedVad([]), SETTINGS)
    with pytest.raises(ValueError, match="even number of bytes, got 3"):
        segmenter.feed(b"abc")


def test_in_speech_follows_the_utterance() -> None:
    segmenter = SpeechSegmenter(ScriptedVad([SPEECH] * 25 + [QUIET] * 70), SETTINGS)
    assert not segmenter.in_speech
    segmenter.feed(chunks(0, 24))
    assert not segmenter.in_speech
    segmenter.feed(chunks(24, 1))
    assert segmenter.in_speech
    segmenter.feed(chunks(25, 70))
    assert not segmenter.in_speech


# --- detectors ------------------------------------------------------------------------------------------------


def tone(dbfs: float, samples: int = 512) -> bytes:
    """A square wave whose RMS level is ``dbfs``."""
    level = 10 ** (dbfs / 20)
    return float_to_pcm(np.where(np.arange(samples) % 32 < 16, level, -level))


def test_energy_vad_maps_dbfs_to_probability() -> None:
    vad = create_vad(VadSettings(engine="energy"))
    assert isinstance(vad, EnergyVad)
    assert vad.chunk_samples == 512
    assert vad.speech_probability(silence(0.032)) == 0.0
    assert vad.speech_probability(tone(-70)) == 0.0
    assert vad.speech_probability(tone(-45)) == pytest.approx(0.5, abs=0.01)
    assert vad.speech_probability(tone(-20)) == 1.0


def test_energy_vad_refuses_a_wrong_chunk_size() -> None:
    with pytest.raises(ValueError, match="a VAD chunk is 1024 bytes, got 1000"):
        EnergyVad().speech_probability(bytes(1000))


def test_unknown_vad_engine_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"^unknown voice activity detector 'webrtc'; known: energy, silero, silero-ggml$"):
        create_vad(VadSettings(engine="webrtc"))
