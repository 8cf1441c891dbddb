"""The speech-to-text benchmark's figures per model size, from a scripted engine (no model is loaded)."""

from __future__ import annotations

import pytest

from assistant.errors import ConfigError
from assistant.voice.audio import silence
from assistant.voice.stt import Transcript
from benchmarks import voice_stt as bench


class ScriptedStt:
    def __init__(self, texts: list[str], compute_s: float = 0.25):
        self.texts = texts
        self.compute_s = compute_s
        self.prompts: list[str | None] = []

    def transcribe(self, pcm: bytes, *, prompt: str | None = None) -> Transcript:
        self.prompts.append(prompt)
        text = self.texts.pop(0)
        echo = text.startswith("(echo)")  # "(echo)": the prompted text only repeated the prompt
        return Transcript(text.removeprefix("(echo)"), "en", len(pcm) / 32_000, self.compute_s, prompt_echo=echo)


CLIPS = [("one", silence(2.0), "Set a timer for ten minutes."), ("two", silence(3.0), "What colour is it?")]


def test_wer_raw_and_normalised_and_real_time_factor() -> None:
    stt = ScriptedStt(["set a timer for 10 minutes", "What color is it?"])
    result = bench.wer_figures(stt, CLIPS)
    assert stt.prompts == [None, None]
    assert result["wer_raw"] == 0.2  # "ten" vs "10" and "colour" vs "color": 2 of 10 words
    assert result["wer_normalised"] == 0.0
    assert (result["compute_s"], result["real_time_factor"]) == (0.5, 0.1)
    assert result["transcripts"] == {"one": "set a timer for 10 minutes", "two": "What color is it?"}


def test_a_model_that_cannot_be_built_is_reported_not_installed() -> None:
    def missing() -> ScriptedStt:
        raise ConfigError("voice.stt.model 'base.en' is not installed: set voice.stt.model_dir")

    assert bench.measure_model(missing, {"librivox": (CLIPS, None)}) == {
        "installed": False, "reason": "voice.stt.model 'base.en' is not installed: set voice.stt.model_dir"}


def test_each_installed_model_is_measured_on_every_set_and_compared_with_the_first() -> None:
    names = [("n", silence(1.0), "Ask Niamh about dinner.")]
    quiet = [("q1", silence(1.0), ""), ("q2", silence(0.5), "")]
    sets = {"librivox": (CLIPS[:1], None), "numbers": (CLIPS[1:], None), "names": (names, None),
            "names_prompted": (names, "Niamh, Tom."), "no_speech": (quiet, None),
            "no_speech_prompted": (quiet, ("Niamh, Tom. Hello.",))}
    tiny = ScriptedStt(["a", "b", "Ask name about dinner.", "Ask Niamh about dinner.", "", "", "(echo)", "Hello."],
                       0.2)
    models = {
        "tiny.en": bench.measure_model(lambda: tiny, sets),
        "base.en": {"installed": False, "reason": "not here"},
        "small.en": bench.measure_model(lambda: ScriptedStt(["c", "d", "e", "f", "", "", "", ""], 0.5), sets),
    }
    assert tiny.prompts == [None, None, None, "Niamh, Tom.", None, None, "Niamh, Tom. Hello.", "Niamh, Tom. Hello."]
    assert models["tiny.en"]["no_speech"] == {"transcribed": 2, "words_heard": 0, "echoes": 0,
                                              "transcripts": {"q1": "", "q2": ""}}
    assert models["tiny.en"]["no_speech_prompted"] == {"transcribed": 2, "words_heard": 1, "echoes": 1,
                                                       "transcripts": {"q1, prompt 1": "", "q2, prompt 1": "Hello."}}
    bench.relative_speed(models)
    assert models["tiny.en"]["librivox"]["x_first"] == 1.0
    assert models["small.en"]["librivox"]["x_first"] == 2.5
    assert models["tiny.en"]["installed"] and models["tiny.en"]["load_s"] >= 0
    assert set(models["small.en"]) == {"installed", "load_s", *sets}
    assert (models["tiny.en"]["names"]["names_heard"], models["tiny.en"]["names_prompted"]["names_heard"]) == (0, 1)
    lines = bench.report({"threads": 2, "prompt": "Niamh, Tom.", "context_prompts": ("Niamh, Tom. Hello.",),
                          "models": models,
                          **{name: bench.corpus(clips) for name, (clips, _) in sets.items()}})
    assert "  base.en    not installed: not here" in lines
    assert any(line.startswith("  small.en ") and "100.0%" in line for line in lines)
    assert "1 clips, 6 reference words, 2.0 s of audio" in lines[1]
    assert ("            no speech (2 clips of silence and noise): 0 words heard without a prompt; with 1 context "
            "prompts, 1 words in 2 transcripts (1 echoes of the prompt transcribed again without it)") in lines
    assert "  context prompt 1: 'Niamh, Tom. Hello.'" in lines
    assert "    tiny.en names_prompted: 'n' -> 'Ask Niamh about dinner.'" in bench.transcripts(
        {"models": models})


def test_no_speech_is_transcribed_with_every_context_prompt() -> None:
    stt = ScriptedStt(["", "", "(echo)", ""])
    result = bench.no_speech_figures(stt, [("a", silence(1.0), ""), ("b", silence(1.0), "")], ("P1.", "P2."))
    assert stt.prompts == ["P1.", "P1.", "P2.", "P2."]
    assert (result["transcribed"], result["words_heard"], result["echoes"]) == (4, 0, 1)
    assert list(result["transcripts"]) == ["a, prompt 1", "b, prompt 1", "a, prompt 2", "b, prompt 2"]
    assert len(bench.no_speech_clips()) == 6 and len(bench.CONTEXT_PROMPTS) == 3


def test_names_heard_counts_household_names_spelled_as_in_the_reference() -> None:
    references = ["Ask Niamh about dinner.", "Has Tom fed the cat?", "Is Saoirse home?"]
    assert bench.names_heard(references, ["ask niamh about dinner", "Has Tom fed the cat?", "is search home"]) == 2


def test_the_spoken_sentences_hold_numbers_and_household_names() -> None:
    from assistant.voice.normalise import normalise_transcript

    with_digits = [s for s in bench.NUMBER_SENTENCES if any(c.isdigit() for c in normalise_transcript(s))]
    assert len(with_digits) == len(bench.NUMBER_SENTENCES) >= 10
    assert bench.names_heard(bench.NAME_SENTENCES, bench.NAME_SENTENCES) == len(bench.NAME_SENTENCES)


def test_a_model_dir_needs_a_known_size(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--model-dir", "medium.en=/models/medium"])
    assert "expected SIZE=DIR with SIZE one of tiny.en, base.en, small.en" in capsys.readouterr().err
