"""Wake-word calibration without models: counting false alarms as the engine detects, choosing a threshold
from a budget on synthetic score traces, the thresholds file (round trip, fallbacks), and
``max(sensitivity, calibrated)``. The real models are in tests/integration/voice/test_voice_wake_calibration_real.py."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import logging
import tomllib
from pathlib import Path

import numpy as np
import pytest

from assistant.config import WakeWordSettings
from assistant.errors import ConfigError
from assistant.voice.wake import PACKAGED_WORDS, Trigger, WakeDetection, create_wake_word
from assistant.voice.wake_calibration import (
    MAX_THRESHOLD,
    MIN_THRESHOLD,
    ScoredClip,
    audio_files,
    calibrate,
    choose_threshold,
    count_alarms,
    excluded_words,
    simulate,
    step_time,
)
from assistant.voice.wake_thresholds import (
    FILE_NAME,
    PACKAGED_FILE,
    Calibration,
    Source,
    WordThreshold,
    effective_thresholds,
    read_calibration,
    user_file,
    with_data_dir,
)

STEPS_PER_S = 12.5  # 80 ms steps


def trace(seconds: float, peaks: dict[float, float], floor: float = 0.01) -> np.ndarray:
    """A score trace of ``seconds`` with ``floor`` everywhere and ``peaks`` {time s: score}."""
    scores = np.full(int(seconds * STEPS_PER_S), floor)
    for at, score in peaks.items():
        scores[int(at * STEPS_PER_S)] = score
    return scores


def calibration(**words: float) -> Calibration:
    return Calibration(
        words={w: WordThreshold(t, 0, 0.0, round(t - 0.1, 4), 1.0, True) for w, t in words.items()},
        budget_per_hour=0.5, margin=0.1, refractory_s=1.0, negative_hours=1.0,
        sources=[Source("speech", 3, 1.0)], created="2026-11-25", pyopen_wakeword="1.1.0")


# --- counting false alarms the way the engine detects ---------------------------------------------------------


def test_a_burst_of_high_steps_is_one_alarm_and_a_second_after_is_another() -> None:
    scores = trace(10, {2.0: 0.9, 2.08: 0.95, 2.88: 0.9, 3.2: 0.8, 7.0: 0.6})
    assert count_alarms([scores], 0.5) == 3  # 2.0 (suppresses 2.08 and 2.88), 3.2, 7.0
    assert count_alarms([scores], 0.7) == 2
    assert count_alarms([scores], 0.95) == 1  # inclusive, as the engine
    assert count_alarms([scores], 0.951) == 0


def test_simulate_matches_the_engines_trigger_and_times() -> None:
    scores = {"alexa": trace(5, {1.0: 0.7, 1.5: 0.99}), "hey_jarvis": trace(5, {1.0: 0.8, 2.5: 0.9, 4.0: 0.6})}
    found = simulate(scores, {"alexa": 0.5, "hey_jarvis": 0.85})
    assert [d.word for d in found] == ["alexa", "hey_jarvis"]  # jarvis at 1.0 is under its own 0.85
    assert found[0].at_s == pytest.approx(step_time(int(1.0 * STEPS_PER_S)))  # 1.5 s: in the refractory period
    assert found[1].at_s == pytest.approx(step_time(int(2.5 * STEPS_PER_S)))
    assert [(d.word, round(d.score, 3), round(d.at_s, 2)) for d in simulate(scores, {"hey_jarvis": 0.5})] == [
        ("hey_jarvis", 0.8, 1.04), ("hey_jarvis", 0.9, 2.56), ("hey_jarvis", 0.6, 4.08)]
    assert simulate(scores, {}) == []


def test_the_trigger_uses_each_words_threshold() -> None:
    trigger = Trigger({"alexa": 0.9, "hey_jarvis": 0.5})
    assert trigger.decide({"alexa": 0.8, "hey_jarvis": 0.6}, 1.0) == WakeDetection("hey_jarvis", 0.6, 1.0)
    trigger.reset()
    assert trigger.decide({"alexa": 0.8}, 1.0) is None
    assert trigger.decide({"okay_nabu": 1.0}, 1.0) is None  # a word without a threshold is never detected
    assert trigger.threshold_of("alexa") == 0.9


# --- choosing the threshold ------------------------------------------------------------------------------------


def test_with_no_alarm_allowed_the_threshold_clears_the_highest_negative_by_the_margin() -> None:
    traces = [trace(600, {100: 0.42, 300: 0.3}), trace(600, {50: 0.2})]  # 20 minutes: 0.5/h allows 0
    chosen = choose_threshold(traces, hours=1 / 3, budget=0.5, margin=0.1)
    assert chosen.threshold == pytest.approx(0.52)
    assert choose_threshold(traces, hours=1 / 3, budget=0.5, margin=0.05).threshold == MIN_THRESHOLD  # the floor
    assert choose_threshold(traces, hours=1 / 3, budget=0.5, margin=0.05, floor=0.0).threshold == pytest.approx(0.47)
    assert chosen.highest_negative == pytest.approx(0.42)
    assert (chosen.false_alarms, chosen.false_alarms_per_hour, chosen.meets_budget) == (0, 0.0, True)
    assert chosen.negative_hours == pytest.approx(0.3333, abs=1e-4)


def test_a_larger_budget_tolerates_the_highest_peaks() -> None:
    """4 hours at 0.5/h allow 2 alarms: the base is the third-highest separate peak."""
    peaks = {60.0 * k: 0.1 + 0.1 * k for k in range(1, 8)}  # 0.2 .. 0.8, a minute apart
    traces = [trace(4 * 3600, peaks)]
    chosen = choose_threshold(traces, hours=4.0, budget=0.5, margin=0.05)
    assert chosen.threshold == pytest.approx(0.65)  # base 0.6: above it only 0.7 and 0.8
    assert chosen.false_alarms == 2
    assert chosen.false_alarms_per_hour == pytest.approx(0.5)
    assert chosen.meets_budget


def test_a_word_that_cannot_meet_the_budget_is_capped_and_says_so() -> None:
    traces = [trace(600, {10: 1.0, 100: 0.995})]
    chosen = choose_threshold(traces, hours=600 / 3600, budget=0.5)
    assert chosen.threshold == MAX_THRESHOLD
    assert chosen.false_alarms == 2
    assert not chosen.meets_budget


def test_choose_threshold_needs_negative_audio() -> None:
    with pytest.raises(ValueError, match="negative audio"):
        choose_threshold([], hours=0.0, budget=0.5)


def test_calibrate_skips_clips_that_say_the_word_for_that_word_only() -> None:
    plain = ScoredClip("speech/a.wav", "speech", frozenset(), 1800.0,
                       {"alexa": trace(60, {5: 0.2}), "hey_jarvis": trace(60, {5: 0.1})})
    jarvis = ScoredClip("tts/hey_jarvis/b.wav", "tts", frozenset({"hey_jarvis"}), 1800.0,
                        {"alexa": trace(60, {5: 0.3}), "hey_jarvis": trace(60, {5: 0.99})})
    result = calibrate([plain, jarvis], ["alexa", "hey_jarvis"], budget=0.5, margin=0.1, floor=0.0)
    assert result.words["hey_jarvis"].threshold == pytest.approx(0.2)  # its own "hey jarvis" does not count
    assert result.words["hey_jarvis"].negative_hours == pytest.approx(0.5)
    assert result.words["alexa"].threshold == pytest.approx(0.4)  # but it is a negative for alexa
    assert result.words["alexa"].negative_hours == pytest.approx(1.0)
    assert result.negative_hours == pytest.approx(1.0)
    assert [(s.name, s.clips) for s in result.sources] == [("speech", 1), ("tts", 1)]
    with pytest.raises(ValueError, match="no negative speech for 'hey_jarvis'"):
        calibrate([jarvis], ["hey_jarvis"], budget=0.5)


def test_excluded_words_and_audio_files(tmp_path: Path) -> None:
    assert excluded_words(Path("piper/hey_jarvis/x.wav")) == {"hey_jarvis"}
    assert excluded_words(Path("alexa.wav")) == frozenset()  # only directories name words
    for name in ("a/b.wav", "a/hey_jarvis/c.FLAC", "notes.txt", "d.wav"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    assert [p.relative_to(tmp_path).as_posix() for p in audio_files(tmp_path)] == [
        "a/b.wav", "a/hey_jarvis/c.FLAC", "d.wav"]


# --- the thresholds file ----------------------------------------------------------------------------------------


def test_the_file_round_trips(tmp_path: Path) -> None:
    original = calibration(hey_jarvis=0.31, alexa=0.5)
    path = original.save(tmp_path / "sub" / FILE_NAME)
    assert Calibration.load(path) == original
    assert not list(tmp_path.glob("sub/*.partial"))


@pytest.mark.parametrize(("text", "message"), [
    ("{not json", "not JSON"),
    ('{"format": 99}', "format 1"),
    ('{"format": 1, "words": {}}', "missing or malformed"),
    ('{"format": 1, "words": {"alexa": 3}, "budget_per_hour": 0.5, "margin": 0.1, "refractory_s": 1, '
     '"negative_hours": 1}', "malformed"),
])
def test_a_corrupt_file_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Calibration.from_json(text)


def test_a_threshold_outside_0_1_is_refused() -> None:
    data = json.loads(calibration(alexa=0.5).to_json())
    data["words"]["alexa"]["threshold"] = 1.5
    with pytest.raises(ValueError, match="threshold of 'alexa'"):
        Calibration.from_json(json.dumps(data))


def test_the_packaged_file_calibrates_every_packaged_word() -> None:
    packaged = Calibration.load(PACKAGED_FILE)
    assert set(packaged.words) == set(PACKAGED_WORDS)
    assert packaged.pyopen_wakeword and packaged.created and packaged.sources
    assert all(0.0 < w.threshold < 1.0 and w.meets_budget for w in packaged.words.values())
    assert packaged.budget_per_hour == WakeWordSettings().max_false_alarms_per_hour


def test_a_user_file_is_read_before_the_packaged_one(tmp_path: Path) -> None:
    path = calibration(alexa=0.7).save(tmp_path / FILE_NAME)
    packaged = Calibration.load(PACKAGED_FILE)
    read = read_calibration(path)
    assert read.words["alexa"].threshold == 0.7
    assert read.words["hey_jarvis"] == packaged.words["hey_jarvis"]  # a word the user file lacks: packaged
    assert read.sources == [Source("speech", 3, 1.0)]
    assert read_calibration(None) == packaged


def test_an_unreadable_user_file_falls_back_to_the_packaged_one(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / FILE_NAME
    path.write_text("{truncated", encoding="utf-8")
    with caplog.at_level(logging.WARNING, "assistant.voice.wake"):
        assert read_calibration(path) == Calibration.load(PACKAGED_FILE)
    assert "unusable" in caplog.text and "the packaged calibration" in caplog.text


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_without_a_usable_packaged_file_the_sensitivity_alone_decides(
        damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    broken = tmp_path / FILE_NAME
    if damage == "corrupt":
        broken.write_text('{"format": 1, "words": {"alexa": {"threshold": "high"}}}', encoding="utf-8")
    monkeypatch.setattr("assistant.voice.wake_thresholds.PACKAGED_FILE", broken)
    with caplog.at_level(logging.WARNING, "assistant.voice.wake"):
        assert read_calibration(None) is None
        assert effective_thresholds(["alexa"], 0.5, None) == {"alexa": 0.5}
    assert "the sensitivity alone" in caplog.text


def test_another_library_version_is_warned_about(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = dataclasses.replace(calibration(alexa=0.6), pyopen_wakeword="0.1.0")
    with caplog.at_level(logging.WARNING, "assistant.voice.wake"):
        assert read_calibration(old.save(tmp_path / FILE_NAME)).words["alexa"].threshold == 0.6
    assert "calibrated with pyopen-wakeword 0.1.0" in caplog.text


# --- max(sensitivity, calibrated) -------------------------------------------------------------------------------


def test_the_effective_threshold_is_the_higher_of_sensitivity_and_calibration(
        caplog: pytest.LogCaptureFixture) -> None:
    floors = calibration(alexa=0.62, hey_jarvis=0.3)
    assert effective_thresholds(["alexa", "hey_jarvis"], 0.5, floors) == {"alexa": 0.62, "hey_jarvis": 0.5}
    assert effective_thresholds(["alexa", "hey_jarvis"], 0.8, floors) == {"alexa": 0.8, "hey_jarvis": 0.8}
    assert effective_thresholds(["alexa"], 0.0, floors) == {"alexa": 0.62}  # sensitivity 0 cannot undercut it
    with caplog.at_level(logging.WARNING, "assistant.voice.wake"):
        assert effective_thresholds(["okay_nabu"], 0.5, floors) == {"okay_nabu": 0.5}
    assert "'okay_nabu' has no calibrated threshold" in caplog.text


def test_the_data_dirs_file_is_used_only_when_present_and_not_configured(tmp_path: Path) -> None:
    settings = WakeWordSettings()
    assert with_data_dir(settings, tmp_path).thresholds_file is None
    calibration(alexa=0.7).save(user_file(tmp_path))
    assert with_data_dir(settings, tmp_path).thresholds_file == tmp_path / FILE_NAME
    chosen = WakeWordSettings(thresholds_file=tmp_path / "mine.json")
    assert with_data_dir(chosen, tmp_path).thresholds_file == tmp_path / "mine.json"


def test_a_configured_thresholds_file_that_does_not_exist_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"thresholds_file .*missing\.json does not exist; .*calibrate"):
        create_wake_word(WakeWordSettings(thresholds_file=tmp_path / "missing.json"))


def test_settings_defaults() -> None:
    settings = WakeWordSettings()
    assert (settings.max_false_alarms_per_hour, settings.thresholds_file, settings.words) == (0.5, None, ["hey_jarvis"])
    with pytest.raises(ValueError):
        WakeWordSettings(max_false_alarms_per_hour=-1)


def test_the_packaged_file_is_declared_package_data() -> None:
    root = Path(__file__).resolve().parents[3]
    declared = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    relative = PACKAGED_FILE.relative_to(root / "assistant").as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in declared["package-data"]["assistant"])


def test_the_voice_service_reads_the_data_dirs_calibration(tmp_path: Path) -> None:
    from assistant.config import Settings
    from assistant.storage.db import Database
    from assistant.voice.service import build_voice

    settings = Settings.load(None, server={"data_dir": str(tmp_path)}, voice={})
    db = Database(":memory:")
    try:
        assert build_voice(settings, db).settings.wake_word.thresholds_file is None
        calibration(alexa=0.7).save(user_file(tmp_path))
        assert build_voice(settings, db).settings.wake_word.thresholds_file == tmp_path / FILE_NAME
    finally:
        db.close()
