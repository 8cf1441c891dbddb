"""The voice benchmark's figures, computed from fakes and tiny inputs (no model is loaded)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from assistant.voice.audio import silence
from assistant.voice.pipeline import AudioPublished, EngineFailed, ResponseReady, Transcribed, VoiceRun
from assistant.voice.stt import Transcript
from assistant.voice.wake import WakeDetection
from benchmarks import voice as bench


def figures(ratio: float, llm: float = 1.0, utterance: float = 2.0) -> bench.RunFigures:
    non_llm = ratio * utterance
    latencies = {"speaker": 0.05, "stt": non_llm - 0.1, "llm": llm, "tts": 0.04, "publish": 0.01,
                 "eos_to_audio_s": non_llm + llm, "non_llm_s": non_llm, "utterance_s": utterance,
                 "non_llm_ratio": ratio}
    return bench.RunFigures("Hey Jarvis, what is two plus two?", 2.5, latencies, "What is two plus two?", "Four.")


def test_the_target_is_non_llm_time_at_most_six_tenths_of_the_utterance() -> None:
    assert bench.target_met(0.6) and bench.target_met(0.2)
    assert not bench.target_met(0.61)


def test_latency_summary_means_maxima_and_verdict() -> None:
    failed = bench.RunFigures("Hey Jarvis, what colour is the sky?", 2.0, error="no wake word detected")
    summary = bench.latency_summary([figures(0.2, llm=1.0), figures(0.4, llm=3.0), failed])
    assert (summary["questions"], summary["complete"]) == (3, 2)
    assert summary["failed"] == [{"question": failed.question, "error": "no wake word detected"}]
    assert summary["stages_s"]["llm"] == {"mean": 2.0, "max": 3.0}
    assert summary["stages_s"]["non_llm_s"] == {"mean": pytest.approx(0.6), "max": pytest.approx(0.8)}
    assert summary["non_llm_ratios"] == [0.2, 0.4] and summary["mean_non_llm_ratio"] == pytest.approx(0.3)
    assert summary["target"] == "PASS" and summary["runs_within_target"] == 2

    over = bench.latency_summary([figures(0.5), figures(0.8)])  # one run within, but the mean 0.65 is not
    assert over["target"] == "FAIL" and over["runs_within_target"] == 1
    nothing = bench.latency_summary([failed])
    assert nothing["target"] == "FAIL" and nothing["mean_non_llm_ratio"] is None and nothing["stages_s"] == {}


def test_a_stage_that_did_not_run_counts_as_zero() -> None:
    run = figures(0.3)
    del run.latencies["speaker"]  # nobody enrolled: the pipeline skips identification
    assert bench.latency_summary([run, figures(0.3)])["stages_s"]["speaker"] == {"mean": 0.025, "max": 0.05}


def voice_run(*, answered: bool) -> VoiceRun:
    run = VoiceRun("room")
    common = {"run_id": run.id, "room_id": "room", "t_s": 0.0, "at": None}
    run.events.append(Transcribed(**common, text="What is two plus two?", audio_s=2.0))
    if not answered:
        run.events.append(EngineFailed(**common, stage="llm", error="the llm engine failed"))
        return run
    run.events += [ResponseReady(**common, text="Four.", conversation_id="c"),
                   AudioPublished(**common, audio_s=0.8, frames=3)]
    run.stages = {"stt": 0.3, "llm": 1.0, "tts": 0.1}
    run.utterance_s = 2.0
    run.speech_end = time.monotonic()
    run.first_audio = run.speech_end + 1.5
    return run


def test_run_figures_from_the_pipeline_runs() -> None:
    spoken = silence(2.5)
    ok = bench.run_figures("q", spoken, [voice_run(answered=True)])
    assert ok.error is None and ok.spoken_s == 2.5
    assert (ok.transcript, ok.reply) == ("What is two plus two?", "Four.")
    assert ok.latencies["eos_to_audio_s"] == pytest.approx(1.5) and ok.latencies["non_llm_s"] == pytest.approx(0.5)
    assert ok.latencies["non_llm_ratio"] == pytest.approx(0.25)
    assert bench.run_figures("q", spoken, []).error == "no wake word detected"
    failed = bench.run_figures("q", spoken, [voice_run(answered=False)])
    assert "engine_error" in failed.error and "the llm engine failed" in failed.error and not failed.latencies


def test_false_alarms_per_hour() -> None:
    assert bench.false_alarms_per_hour(1, 1800.0) == 2.0
    assert bench.false_alarms_per_hour(0, 36.0) == 0.0
    with pytest.raises(ValueError):
        bench.false_alarms_per_hour(0, 0.0)


class ScriptedWake:
    """Detects the scripted words of each clip (one entry per reset) on its first chunk."""

    words = ("alexa", "hey_jarvis")

    def __init__(self, script: list[list[str]]):
        self.script = script
        self.pending: list[str] = []

    def reset(self) -> None:
        self.pending = self.script.pop(0)

    def process(self, pcm: bytes) -> list[WakeDetection]:
        found, self.pending = self.pending, []
        return [WakeDetection(word, 0.9, 0.5) for word in found]


def test_wake_figures_count_hits_and_false_alarms() -> None:
    positives = [("alexa", "a.wav", silence(1.0)), ("hey_jarvis", "j1", silence(1.0)),
                 ("hey_jarvis", "j2", silence(1.0))]
    negatives = [("n1.wav", silence(9.0)), ("n2.wav", silence(9.0))]
    # alexa hit; the first jarvis clip heard as alexa (a miss); the second a hit; n2 holds a false alarm
    engine = ScriptedWake([["alexa"], ["alexa"], ["hey_jarvis"], [], ["hey_jarvis"]])
    result = bench.wake_figures(engine, positives, negatives)
    assert result["hits"] == {"alexa": "1/1", "hey_jarvis": "1/2"}
    assert result["hit_rate"] == pytest.approx(0.6667, abs=1e-4)
    assert result["negative_s"] == 18.0  # the clips' own audio: the silence padding is not counted
    assert result["false_alarms"] == 1 and result["false_alarm_clips"] == {"n2.wav": ["hey_jarvis"]}
    assert result["false_alarms_per_hour"] == 200.0


class ScriptedStt:
    def __init__(self, texts: list[str]):
        self.texts = texts

    def transcribe(self, pcm: bytes) -> Transcript:
        return Transcript(self.texts.pop(0), "en", len(pcm) / 32_000, 0.25)


def test_stt_figures_word_error_rate_and_real_time_factor() -> None:
    clips = [("one", silence(2.0), "Mr. Dashwood was ill."), ("two", silence(3.0), "the house at Norland")]
    result = bench.stt_figures(ScriptedStt(["mister dashwood was ill", "the house at Norland"]), clips)
    assert result["reference_words"] == 8
    assert result["wer"] == 0.125  # "Mr." heard as "mister": 1 substitution in 8 words
    assert (result["audio_s"], result["compute_s"]) == (5.0, 0.5)
    assert result["real_time_factor"] == 0.1
    assert result["transcripts"] == {"one": "mister dashwood was ill", "two": "the house at Norland"}


def reader_vectors(seed: int, direction: int, n: int, dim: int = 16) -> list[np.ndarray]:
    """``n`` unit vectors near the axis ``direction``: one synthetic reader."""
    rng = np.random.default_rng(seed)
    base = np.eye(dim, dtype=np.float32)[direction]
    vectors = [base + rng.normal(0, 0.05, dim).astype(np.float32) for _ in range(n)]
    return [v / np.linalg.norm(v) for v in vectors]


def test_speaker_figures_on_separable_readers() -> None:
    embeddings = {"a": reader_vectors(1, 0, 4), "b": reader_vectors(2, 1, 4), "c": reader_vectors(3, 2, 4)}
    result = bench.speaker_figures(embeddings)
    assert (result["same_pairs"], result["different_pairs"]) == (18, 48)
    assert result["eer"] == 0.0
    assert result["same_above_threshold"] == result["different_at_or_below_threshold"] == 1.0
    assert result["identification"] == {"right": 3, "unknown": 0, "wrong": 0}  # 3 enrolled, 1 identified each
    assert result["identification_accuracy"] == 1.0


def test_identification_unknown_and_wrong() -> None:
    a, b = reader_vectors(1, 0, 3), reader_vectors(2, 1, 3)
    stranger = reader_vectors(3, 2, 1)  # like nobody enrolled: unknown
    embeddings = {"a": [*a, *stranger], "b": [*b, reader_vectors(4, 0, 1)[0]]}  # b's last clip sounds like a
    assert bench.identification(embeddings) == {"right": 0, "unknown": 1, "wrong": 1}


def test_main_runs_the_chosen_part_and_prints_json(monkeypatch, capsys) -> None:
    stt = {"clips": 1, "reference_words": 4, "wer": 0.25, "audio_s": 2.0, "compute_s": 0.2,
           "real_time_factor": 0.1, "transcripts": {}}
    monkeypatch.setitem(bench.PARTS, "stt", lambda limit: {**stt, "limit": limit})
    assert bench.main(["--part", "stt", "--limit", "1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert list(printed) == ["stt"] and printed["stt"]["wer"] == 0.25 and printed["stt"]["limit"] == 1
    monkeypatch.setitem(bench.PRINTERS, "stt", lambda r: print(f"word error rate {r['wer']:.1%}"))
    assert bench.main(["--part", "stt"]) == 0
    out = capsys.readouterr().out
    assert "word error rate 25.0%" in out and "s)" in out  # the part's wall time follows its figures
