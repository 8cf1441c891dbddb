"""``assistant wakeword calibrate``: arguments, the table, where the file goes, the exit codes; the scoring is
replaced by a fake here (the real models: tests/integration/voice/test_voice_wake_calibration_real.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from api.cli import app
from assistant.voice.wake import PACKAGED_WORDS
from assistant.voice.wake_thresholds import FILE_NAME, Calibration, Source, WordThreshold

pytestmark = pytest.mark.usefixtures("clean_env")
runner = CliRunner()


def run(*args: str):  # noqa: ANN201
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


class FakeCalibration:
    """Records how it was called; every word gets threshold 0.4 (or over budget when listed in ``over``)."""

    def __init__(self, over: tuple[str, ...] = ()):
        self.calls: list[dict[str, Any]] = []
        self.over = over

    def __call__(self, directory: Path, words: Any, budget: float, margin: float, *, floor: float, progress: Any,
                 skipped: list[tuple[str, str]]) -> Calibration:
        self.calls.append({"directory": directory, "words": tuple(words), "budget": budget, "margin": margin,
                           "floor": floor})
        list(progress([1, 2]))  # the progress bar is usable
        skipped.append(("notes/broken.wav", "not a readable WAV or FLAC file"))
        return Calibration(
            words={w: WordThreshold(0.99 if w in self.over else 0.4, 3 if w in self.over else 0,
                                    18.0 if w in self.over else 0.0, 0.3, 0.1667, w not in self.over)
                   for w in words},
            budget_per_hour=budget, margin=margin, refractory_s=1.0, negative_hours=0.1667,
            sources=[Source("speech", 12, 0.1667)], created="2026-11-25", pyopen_wakeword="1.1.0")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCalibration:
    fake = FakeCalibration()
    monkeypatch.setattr("assistant.voice.wake_calibration.calibrate_directory", fake)
    return fake


@pytest.fixture
def negatives(tmp_path: Path) -> Path:
    (tmp_path / "negatives").mkdir()
    return tmp_path / "negatives"


def test_help_names_the_options() -> None:
    text = run("wakeword", "calibrate", "--help").output
    for option in ("--negatives", "--budget", "--margin", "--min-threshold", "--words", "--output", "--data-dir"):
        assert option in text


def test_defaults_every_word_the_settings_budget_and_the_data_dir(fake: FakeCalibration, negatives: Path,
                                                                    tmp_path: Path) -> None:
    result = run("wakeword", "calibrate", "--negatives", str(negatives), "--data-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert fake.calls == [{"directory": negatives, "words": PACKAGED_WORDS, "budget": 0.5, "margin": 0.1,
                           "floor": 0.5}]
    written = Calibration.load(tmp_path / FILE_NAME)
    assert set(written.words) == set(PACKAGED_WORDS)
    assert f"thresholds written to {tmp_path / FILE_NAME}" in result.output
    assert "left out notes/broken.wav: not a readable WAV or FLAC file" in result.output
    lines = result.output.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("word"))
    assert "threshold" in lines[header] and "false alarms/h" in lines[header] and "hours" in lines[header]
    assert lines[header + 1].split()[:4] == ["alexa", "0.400", "0.00", "0"]


def test_budget_margin_words_and_output(fake: FakeCalibration, negatives: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    result = run("wakeword", "calibrate", "--negatives", str(negatives), "--budget", "2", "--margin", "0.05",
                 "--min-threshold", "0.3", "--words", "hey_jarvis,alexa", "--words", "okay_nabu", "--output", str(out),
                 "--data-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert fake.calls[0]["words"] == ("hey_jarvis", "alexa", "okay_nabu")
    assert (fake.calls[0]["budget"], fake.calls[0]["margin"], fake.calls[0]["floor"]) == (2.0, 0.05, 0.3)
    assert set(Calibration.load(out).words) == {"hey_jarvis", "alexa", "okay_nabu"}
    assert not (tmp_path / FILE_NAME).exists()


def test_the_budget_comes_from_the_config(fake: FakeCalibration, negatives: Path, tmp_path: Path) -> None:
    config = tmp_path / "a.toml"
    config.write_text("[voice.wake_word]\nmax_false_alarms_per_hour = 0.25\n", encoding="utf-8")
    assert run("wakeword", "calibrate", "--negatives", str(negatives), "-c", str(config),
               "--data-dir", str(tmp_path)).exit_code == 0
    assert fake.calls[0]["budget"] == 0.25


def test_a_word_over_budget_is_written_flagged_and_exits_1(monkeypatch: pytest.MonkeyPatch, negatives: Path,
                                                             tmp_path: Path) -> None:
    monkeypatch.setattr("assistant.voice.wake_calibration.calibrate_directory", FakeCalibration(over=("alexa",)))
    result = run("wakeword", "calibrate", "--negatives", str(negatives), "--data-dir", str(tmp_path))
    assert result.exit_code == 1
    assert "over budget even at the cap" in result.output
    assert not Calibration.load(tmp_path / FILE_NAME).words["alexa"].meets_budget


@pytest.mark.parametrize(("args", "message"), [
    (["--words", "computer"], "--words: unknown wake word 'computer' in the list"),
    (["--budget", "-1"], "--budget"),
    (["--output", "/nonexistent/dir/t.json"], "the directory /nonexistent/dir does not exist"),
])
def test_bad_arguments_exit_2_naming_the_problem(fake: FakeCalibration, negatives: Path, tmp_path: Path,
                                                 args: list[str], message: str) -> None:
    result = run("wakeword", "calibrate", "--negatives", str(negatives), "--data-dir", str(tmp_path), *args)
    assert result.exit_code == 2
    assert message in result.output
    assert fake.calls == []


def test_negatives_must_be_a_directory(fake: FakeCalibration, tmp_path: Path) -> None:
    result = run("wakeword", "calibrate", "--negatives", str(tmp_path / "nope"), "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "not a directory" in result.output


def test_a_directory_without_audio_exits_2(negatives: Path, tmp_path: Path) -> None:
    (negatives / "readme.txt").write_text("no audio here", encoding="utf-8")
    result = run("wakeword", "calibrate", "--negatives", str(negatives), "--data-dir", str(tmp_path))
    assert result.exit_code == 2
    assert f"no WAV or FLAC audio under {negatives}" in result.output
    assert not (tmp_path / FILE_NAME).exists()
