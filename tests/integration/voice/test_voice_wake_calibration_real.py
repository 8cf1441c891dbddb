"""Wake-word calibration with the real openWakeWord models (pyopen-wakeword) on real recordings: score traces
replay the engine's detections exactly, a calibration of a small directory (and through the CLI), the engine
using the packaged thresholds, and the recorded positives still detected at them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from api.cli import app
from assistant.config import WakeWordSettings
from assistant.voice.audio import decode_audio, silence
from assistant.voice.wake import PACKAGED_WORDS, OpenWakeWordEngine, create_wake_word, scan
from assistant.voice.wake_calibration import MARGIN, MIN_THRESHOLD, calibrate_directory, score_clip, simulate
from assistant.voice.wake_thresholds import Calibration, read_calibration

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("ASSISTANT_BENCHMARK_DATA") or ROOT.parent / "shared" / "benchmarks")  # e.g. from a worktree
WAKEWORD, LIBRIVOX = DATA / "wakeword", DATA / "speech" / "librivox"
ALEXA, MYCROFT = WAKEWORD / "alexa_test.wav", WAKEWORD / "hey_mycroft_test.wav"


@pytest.fixture(scope="module")
def engine() -> Iterator[OpenWakeWordEngine]:
    engine = OpenWakeWordEngine(PACKAGED_WORDS, 1.0)
    yield engine
    engine.close()


@pytest.fixture
def negatives(tmp_path: Path) -> Path:
    """Two LibriVox clips and hey_jane.wav; alexa_test.wav under alexa/ (a negative for the other words)."""
    root = tmp_path / "negatives"
    for clip in [*sorted(LIBRIVOX.glob("*.wav"))[:2], WAKEWORD / "hey_jane.wav"]:
        (root / "speech").mkdir(parents=True, exist_ok=True)
        (root / "speech" / clip.name).symlink_to(clip)
    (root / "tts" / "alexa").mkdir(parents=True)
    (root / "tts" / "alexa" / ALEXA.name).symlink_to(ALEXA)
    return root


def test_score_traces_replay_the_engines_detections(engine: OpenWakeWordEngine) -> None:
    pcm = silence(0.5) + decode_audio(ALEXA) + silence(1.0) + decode_audio(MYCROFT) + silence(1.0)
    live = create_wake_word(WakeWordSettings(words=["alexa", "hey_mycroft"], sensitivity=0.5))
    try:
        detected = scan(live, pcm)
    finally:
        live.close()
    assert {d.word for d in detected} == {"alexa", "hey_mycroft"}
    replayed = simulate(engine.score_steps(pcm), live.thresholds)
    assert [(d.word, d.at_s) for d in replayed] == [(d.word, d.at_s) for d in detected]
    assert [d.score for d in replayed] == pytest.approx([d.score for d in detected], abs=1e-6)


def test_a_directory_is_calibrated_per_word(negatives: Path, engine: OpenWakeWordEngine) -> None:
    skipped: list[tuple[str, str]] = []
    (negatives / "speech" / "notes.wav").write_bytes(b"not audio")
    result = calibrate_directory(negatives, ["alexa", "hey_mycroft"], 0.5, skipped=skipped)
    assert skipped == [("speech/notes.wav", skipped[0][1])] and "not a readable" in skipped[0][1]
    speech_s = sum(len(decode_audio(p)) for p in [*sorted(LIBRIVOX.glob("*.wav"))[:2], WAKEWORD / "hey_jane.wav"]) / 32000
    assert result.words["alexa"].negative_hours == pytest.approx(speech_s / 3600, abs=1e-4)  # alexa/ left out
    assert result.words["hey_mycroft"].negative_hours > result.words["alexa"].negative_hours
    for chosen in result.words.values():
        assert chosen.threshold == pytest.approx(max(MIN_THRESHOLD, chosen.highest_negative + MARGIN), abs=1.5e-3)
        assert chosen.false_alarms == 0 and chosen.meets_budget
    assert [s.name for s in result.sources] == ["speech", "tts"]
    alexa_peak = max(engine.score_steps(decode_audio(ALEXA) + silence(1.0))["alexa"])
    assert alexa_peak > result.words["alexa"].threshold  # the positive still fires


def test_the_cli_calibrates_and_the_engine_reads_the_result(negatives: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["wakeword", "calibrate", "--negatives", str(negatives), "--words",
                                      "alexa,hey_mycroft", "--data-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    written = tmp_path / "wakeword_thresholds.json"
    assert set(Calibration.load(written).words) == {"alexa", "hey_mycroft"}
    assert Calibration.load(written).notes == f"every WAV/FLAC under {negatives.resolve()}"
    floors = read_calibration(written)
    engine = create_wake_word(WakeWordSettings(words=list(PACKAGED_WORDS), sensitivity=0.0, thresholds_file=written))
    try:
        assert engine.thresholds["alexa"] == floors.words["alexa"].threshold
        assert engine.thresholds["hey_jarvis"] == floors.words["hey_jarvis"].threshold  # the packaged one
    finally:
        engine.close()


def test_the_engine_uses_the_packaged_thresholds_and_still_hears_the_recorded_words() -> None:
    packaged = read_calibration(None)
    engine = create_wake_word(WakeWordSettings(words=list(PACKAGED_WORDS)))
    try:
        assert engine.thresholds == {w: max(0.5, packaged.words[w].threshold) for w in PACKAGED_WORDS}
        for word, clip in (("alexa", ALEXA), ("hey_mycroft", MYCROFT)):
            engine.reset()
            assert [d.word for d in scan(engine, silence(0.5) + decode_audio(clip) + silence(1.0))] == [word]
    finally:
        engine.close()


def test_score_clip_pads_like_a_quiet_room(engine: OpenWakeWordEngine) -> None:
    traces = score_clip(engine, decode_audio(ALEXA))
    assert set(traces) == set(PACKAGED_WORDS)
    assert len(traces["alexa"]) == int((0.5 + len(decode_audio(ALEXA)) / 32000 + 1.0) / 0.08)
