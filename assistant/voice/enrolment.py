"""Enrolment quality: what a voice sample must be before its embedding may stand for a person.

A profile's centroid is what every later utterance is compared with, so a bad sample harms every
identification after it. A sample is refused (422, nothing stored) when it is:

- **silent**: RMS below -60 dBFS;
- **without enough speech**: fewer than ``[voice.speaker_id] min_enrollment_speech_s`` (1.0 s) of voiced
  audio by the configured voice-activity detector (Silero by default), which also catches a body that is
  noise, music or not audio at all;
- **clipped**: more than 0.1 % of its samples at full scale (a distorted recording changes the voice's
  spectrum, and the embedding with it).

Wrong sample rates and unreadable files are refused earlier, by :func:`assistant.voice.audio.decode_upload`.
A sample that is accepted but disagrees with the profile's other samples (its cosine with their centroid at
or below the raw-cosine floor ``match_threshold``) is stored with a warning: it may be another person, or a
very different room or microphone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from assistant.errors import ValidationFailed
from assistant.voice.audio import SAMPLE_RATE, SAMPLE_WIDTH, pcm_to_float
from assistant.voice.vad import VoiceActivityDetector

SILENCE_RMS = 1e-3  # -60 dBFS: a sample quieter than this holds no voice to enrol
FULL_SCALE = 32_700 / 32_768  # a sample at or beyond this magnitude is taken as clipped
MAX_CLIPPED_FRACTION = 0.001
SPEECH_PROBABILITY = 0.5


@dataclass(frozen=True)
class SampleQuality:
    seconds: float
    speech_s: float
    rms_dbfs: float
    clipped_fraction: float


def _refuse(message: str, error: str) -> ValidationFailed:
    return ValidationFailed(message, [{"field": "body", "error": error}])


def speech_seconds(pcm: bytes, vad: VoiceActivityDetector) -> float:
    """Seconds of ``pcm`` in chunks the detector scores at or above 0.5 (the stream is reset first)."""
    size = vad.chunk_samples * SAMPLE_WIDTH
    vad.reset()
    voiced = sum(1 for start in range(0, len(pcm) - size + 1, size)
                 if vad.speech_probability(pcm[start:start + size]) >= SPEECH_PROBABILITY)
    vad.reset()
    return voiced * vad.chunk_samples / SAMPLE_RATE


def assess(pcm: bytes, vad: VoiceActivityDetector, *, min_speech_s: float) -> SampleQuality:
    """The sample's quality; :class:`ValidationFailed` naming the first problem found."""
    samples = pcm_to_float(pcm).astype(np.float64)
    rms = float(np.sqrt(np.mean(samples ** 2))) if samples.size else 0.0
    if rms < SILENCE_RMS:
        raise _refuse("the sample is silent: record the speaker talking", "silent")
    speech = speech_seconds(pcm, vad)
    if speech < min_speech_s:
        raise _refuse(f"the sample holds {speech:.2f} s of speech; at least {min_speech_s:g} s is needed (is it "
                      "a recording of one person talking?)", "too little speech")
    clipped = float(np.mean(np.abs(samples) >= FULL_SCALE))
    if clipped > MAX_CLIPPED_FRACTION:
        raise _refuse(f"the sample is clipped: {clipped:.1%} of it is at full scale (at most "
                      f"{MAX_CLIPPED_FRACTION:.1%}); record it again with the microphone gain lowered", "clipped")
    return SampleQuality(round(len(samples) / SAMPLE_RATE, 3), round(speech, 3), round(20 * np.log10(rms), 1),
                         round(clipped, 5))


def disagreement(score: float, floor: float) -> str | None:
    """The warning for a sample whose cosine with the profile's earlier samples is ``score``."""
    if score > floor:
        return None
    return (f"this sample scores {score:.2f} against the profile's other samples (a match needs more than "
            f"{floor:.2f}): it may be another person or a very different microphone; delete the profile and "
            "enrol again if identification misbehaves")
