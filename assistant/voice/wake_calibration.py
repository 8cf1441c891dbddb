"""Calibrating wake-word thresholds from a false-alarm budget on speech without the wake word.

Every negative clip is scored once by the real models (:meth:`OpenWakeWordEngine.score_steps`, every word's
score at every 80 ms step, the clip padded with silence as a live stream would be: 0.5 s before, 1 s after);
thresholds are then chosen on those traces without scoring again.

A false alarm is counted the way the engine detects (:class:`assistant.voice.wake.Trigger`): a step whose
score reaches the threshold, then nothing for :data:`REFRACTORY_S` seconds of audio. Per word, alone (with
several words enabled the refractory period is shared, so the count can only be lower).

The rule, per word, for a budget of ``B`` false alarms per hour over ``H`` hours of negative speech:

1. ``allowed = floor(B x H)`` false alarms may occur in the measured speech;
2. ``base`` = the lowest score such that every threshold above it gives at most ``allowed`` false alarms
   (with ``allowed = 0``, as long as ``H < 1 / B`` hours: the word's highest score in the negative speech);
3. ``threshold = min(MAX_THRESHOLD, max(MIN_THRESHOLD, base + margin))``, rounded up to 3 decimals. The
   margin (default :data:`MARGIN`) is there because the measured speech is a sample: unseen speech peaks
   higher than the highest score seen in it. The floor :data:`MIN_THRESHOLD` (0.5, openWakeWord's own default)
   because for a word whose negatives all score near 0 the margin alone says little: on the held-out half of
   ``benchmarks/voice_wake.py`` (1.3 h), ``hey_mycroft`` peaked at 0.56 on "Electra ..." after at most 0.001
   on the 1.4 h it was calibrated on, ``alexa`` at 0.50 after 0.22.

If even :data:`MAX_THRESHOLD` exceeds the budget the word is recorded with ``meets_budget: false``.
Negative speech that contains (or is) a packaged word must not count against that word: a file under a
directory named after a packaged word (``DIR/.../hey_jarvis/x.wav``) is a negative for the other words only
(e.g. "Hey Jarvis, ..." for ``alexa``, "Alexander" for everything but ``alexa``).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from assistant.voice.audio import SAMPLE_RATE, decode_audio, duration_s, silence
from assistant.voice.wake import PACKAGED_WORDS, REFRACTORY_S, STEP_SAMPLES, OpenWakeWordEngine, Trigger, WakeDetection
from assistant.voice.wake_thresholds import Calibration, Source, WordThreshold, installed_version

log = logging.getLogger("assistant.voice.wake")

MARGIN = 0.1  # added to the highest tolerated negative score
MIN_THRESHOLD = 0.5  # a calibrated threshold is never lower (see the rule above)
MAX_THRESHOLD = 0.99  # a calibrated threshold never exceeds this (the word would never be heard)
LEAD_S, TAIL_S = 0.5, 1.0  # silence around each clip: a quiet room before, time for the models to decide after
AUDIO_SUFFIXES = (".wav", ".flac")

Traces = dict[str, np.ndarray]  # word -> its score at every 80 ms step


@dataclass(frozen=True)
class ScoredClip:
    name: str  # path relative to the negatives directory
    source: str  # its first directory ("." for a file at the top)
    excluded: frozenset[str]  # packaged words this clip says (or nearly says): not a negative for them
    seconds: float  # the clip's own audio, without the padding
    traces: Traces


def step_time(index: int) -> float:
    """Seconds of audio the engine has processed when it scores step ``index`` (``at_s`` of a detection)."""
    return (index + 1) * STEP_SAMPLES / SAMPLE_RATE


def simulate(traces: Mapping[str, np.ndarray], thresholds: Mapping[str, float],
             refractory_s: float = REFRACTORY_S) -> list[WakeDetection]:
    """The detections the engine makes on these traces with these per-word thresholds (the words of
    ``thresholds`` enabled, one :class:`Trigger`, so the refractory period is shared as in the engine)."""
    words = [w for w in thresholds if w in traces]
    if not words:
        return []
    scores = np.stack([np.asarray(traces[w], dtype=np.float64) for w in words])
    limits = np.array([thresholds[w] for w in words])[:, None]
    trigger = Trigger(dict(thresholds), refractory_s)
    found = []
    for i in np.flatnonzero((scores >= limits).any(axis=0)):  # the trigger changes only where a word reaches
        detection = trigger.decide({w: float(scores[k, i]) for k, w in enumerate(words)}, step_time(int(i)))
        if detection is not None:
            found.append(detection)
    return found


def count_alarms(traces: Iterable[np.ndarray], threshold: float, refractory_s: float = REFRACTORY_S) -> int:
    """False alarms of one word over several clips (each its own stream) at ``threshold``."""
    return sum(len(simulate({"w": t}, {"w": threshold}, refractory_s)) for t in traces)


def per_hour(count: int, hours: float) -> float:
    if hours <= 0:
        raise ValueError("false alarms per hour need some negative audio")
    return count / hours


def choose_threshold(traces: Sequence[np.ndarray], hours: float, budget: float, margin: float = MARGIN,
                     refractory_s: float = REFRACTORY_S, cap: float = MAX_THRESHOLD,
                     floor: float = MIN_THRESHOLD) -> WordThreshold:
    """The calibrated threshold of one word from its score traces on ``hours`` of negative speech (the rule of
    the module docstring). ValueError without negative audio."""
    if hours <= 0 or not traces:
        raise ValueError("calibration needs some negative audio")
    allowed = math.floor(budget * hours + 1e-9)
    peaks = np.concatenate([np.asarray(t, dtype=np.float64).ravel() for t in traces])
    highest = float(peaks.max()) if peaks.size else 0.0
    base = _base(traces, np.unique(peaks), allowed, refractory_s)
    threshold = min(cap, max(floor, math.ceil(round((base + margin) * 1000, 3)) / 1000))  # noise: no thousandth
    alarms = count_alarms(traces, threshold, refractory_s)
    rate = per_hour(alarms, hours)
    return WordThreshold(threshold=threshold, false_alarms=alarms, false_alarms_per_hour=round(rate, 3),
                         highest_negative=round(highest, 4), negative_hours=round(hours, 4),
                         meets_budget=rate <= budget)


def _base(traces: Sequence[np.ndarray], scores: np.ndarray, allowed: int, refractory_s: float) -> float:
    """The lowest score ``s`` (of ``scores``, sorted, or 0) with at most ``allowed`` alarms above it: the
    count only falls as the threshold rises (more steps reaching it can only add detections), so bisect."""
    def ok(s: float) -> bool:
        return count_alarms(traces, float(np.nextafter(s, np.inf)), refractory_s) <= allowed

    if allowed == 0:  # nothing may reach the threshold: just above the highest score
        return float(scores[-1])
    if count_alarms(traces, 0.0, refractory_s) <= allowed:
        return 0.0
    low, high = 0, len(scores) - 1  # ok(scores[-1]) holds: nothing exceeds the highest score
    while low < high:
        mid = (low + high) // 2
        if ok(float(scores[mid])):
            high = mid
        else:
            low = mid + 1
    return float(scores[low])


# --- negative speech ---------------------------------------------------------------------------------------


def audio_files(directory: Path) -> list[Path]:
    """Every WAV/FLAC file under ``directory`` (recursive, symbolic links followed), in path order."""
    return sorted(p for p in directory.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file())


def excluded_words(relative: Path) -> frozenset[str]:
    """The packaged words named by a directory of ``relative`` (the clip says them, or nearly)."""
    return frozenset(part for part in relative.parts[:-1] if part in PACKAGED_WORDS)


def score_clip(engine: OpenWakeWordEngine, pcm: bytes) -> Traces:
    return engine.score_steps(silence(LEAD_S) + pcm + silence(TAIL_S))


def score_directory(engine: OpenWakeWordEngine, directory: Path, *,
                    progress: Callable[[Any], Any] = lambda it: it,
                    skipped: list[tuple[str, str]] | None = None) -> Iterator[ScoredClip]:
    """Each audio file of ``directory`` decoded and scored; a file that is not audio is left out (named, with
    the reason, in ``skipped`` and the log)."""
    for path in progress(audio_files(directory)):
        relative = path.relative_to(directory)
        try:
            pcm = decode_audio(path)
        except ValueError as exc:
            log.warning("wake word calibration: %s left out: %s", path, exc)
            if skipped is not None:
                skipped.append((str(relative), str(exc)))
            continue
        if not pcm:
            continue
        yield ScoredClip(str(relative), relative.parts[0] if len(relative.parts) > 1 else ".",
                         excluded_words(relative), duration_s(pcm), score_clip(engine, pcm))


def calibrate(clips: Iterable[ScoredClip], words: Sequence[str], budget: float, margin: float = MARGIN,
              refractory_s: float = REFRACTORY_S, floor: float = MIN_THRESHOLD) -> Calibration:
    """Thresholds for ``words`` from scored negative clips; ValueError when a word has no negative audio."""
    clips = list(clips)
    thresholds = {}
    for word in words:
        mine = [c for c in clips if word not in c.excluded and word in c.traces]
        hours = sum(c.seconds for c in mine) / 3600
        if not mine or hours <= 0:
            raise ValueError(f"no negative speech for {word!r}: every clip is under a directory named after it")
        thresholds[word] = choose_threshold([c.traces[word] for c in mine], hours, budget, margin, refractory_s,
                                            floor=floor)
    sources: dict[str, list[ScoredClip]] = {}
    for clip in clips:
        sources.setdefault(clip.source, []).append(clip)
    return Calibration(
        words=thresholds, budget_per_hour=budget, margin=margin, refractory_s=refractory_s,
        negative_hours=round(sum(c.seconds for c in clips) / 3600, 4),
        sources=[Source(name, len(group), round(sum(c.seconds for c in group) / 3600, 4))
                 for name, group in sorted(sources.items())],
        created=dt.date.today().isoformat(), pyopen_wakeword=installed_version(), min_threshold=floor)


def calibrate_directory(directory: Path, words: Sequence[str], budget: float, margin: float = MARGIN, *,
                        floor: float = MIN_THRESHOLD, progress: Callable[[Any], Any] = lambda it: it,
                        skipped: list[tuple[str, str]] | None = None) -> Calibration:
    """Score every audio file under ``directory`` with the real models of ``words`` and calibrate them.
    ValueError when the directory holds no usable audio."""
    if not directory.is_dir():
        raise ValueError(f"{directory} is not a directory")
    if not audio_files(directory):
        raise ValueError(f"no WAV or FLAC audio under {directory}")
    engine = OpenWakeWordEngine(tuple(words), 1.0)
    try:
        clips = list(score_directory(engine, directory, progress=progress, skipped=skipped))
    finally:
        engine.close()
    if not clips:
        raise ValueError(f"no WAV or FLAC audio under {directory}")
    return replace(calibrate(clips, words, budget, margin, floor=floor),
                   notes=f"every WAV/FLAC under {directory.resolve()}")
