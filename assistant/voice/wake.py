"""Wake word detection on a PCM16 16 kHz mono stream.

Engines (``voice.wake_word.engine``):

- ``pyopen-wakeword``: openWakeWord models run in-process by ``pyopen-wakeword``, which bundles the TFLite
  runtime and five pre-trained words (:data:`PACKAGED_WORDS`) in one wheel: no download, no onnx/tensorflow
  dependency, ~7 % of one core per stream here. One feature extractor (mel spectrogram + speech embedding)
  is shared by all configured words; each word adds one small classifier. Detection ``at_s`` has 80 ms steps.
- ``remote``: the wake-word companion service (``api.companions.wakeword``) at ``url``, over HTTP (httpx);
  ``stream_id`` (e.g. the room id) names the stream there. The service applies its own words and sensitivity;
  the client keeps only detections of its configured words. ``token`` is sent as a Bearer token.

Decision rule: the models score every 80 ms of audio; a word is detected when its score is ``>=`` its
threshold, ``max(sensitivity, the word's calibrated threshold)`` (0.0..1.0: higher means fewer false positives
and more missed words; the calibrated thresholds, chosen from a false-alarm budget, are read as
:mod:`assistant.voice.wake_thresholds` says). When several words reach theirs in one step, the highest score
wins. After a detection, detections of every word are suppressed for :data:`REFRACTORY_S` seconds of audio,
so one utterance gives one detection.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from assistant.config import WakeWordSettings
from assistant.errors import ConfigError
from assistant.voice.audio import SAMPLE_RATE, SAMPLE_WIDTH, silence
from assistant.voice.engines import EngineError, Registry

if TYPE_CHECKING:
    import httpx

PACKAGED_WORDS: tuple[str, ...] = ("alexa", "hey_jarvis", "hey_mycroft", "hey_rhasspy", "okay_nabu")
REFRACTORY_S = 1.0  # seconds of audio after a detection during which no word is detected again
STEP_SAMPLES = 1280  # 80 ms: the openWakeWord feature step; audio is buffered to whole steps
MAX_REQUEST_BYTES = 64 * 1024  # the companion service's limit per audio request
STREAM_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # the companion service's stream ids


@dataclass(frozen=True)
class WakeDetection:
    word: str  # model id, e.g. "hey_jarvis"
    score: float  # 0..1, the model's probability
    at_s: float  # seconds of audio this stream had processed when the word was detected


class WakeWordEngine(Protocol):
    words: tuple[str, ...]

    def process(self, pcm: bytes) -> list[WakeDetection]:
        """Feed PCM16 LE 16 kHz mono of any even length (buffered internally); the words detected in it."""
        ...

    def reset(self) -> None:
        """Forget buffered audio and model state (after a detection, for a new session)."""
        ...

    def close(self) -> None: ...


Factory = Callable[[WakeWordSettings, str], WakeWordEngine]

ENGINES: Registry[WakeWordEngine] = Registry("wake word engine", {
    "pyopen-wakeword": "assistant.voice.wake:_open_wakeword",
    "remote": "assistant.voice.wake:_remote",
})


def create_wake_word(settings: WakeWordSettings, stream_id: str = "default") -> WakeWordEngine:
    """The engine ``settings.engine`` for the words ``settings.words``; ConfigError if it cannot work."""
    return ENGINES.get(settings.engine)(settings, stream_id)


def scan(engine: WakeWordEngine, pcm: bytes, chunk_ms: int = 80) -> list[WakeDetection]:
    """Feed a whole recording in ``chunk_ms`` pieces, as a live stream would arrive; all detections."""
    step = SAMPLE_RATE * chunk_ms // 1000 * SAMPLE_WIDTH
    detections: list[WakeDetection] = []
    for start in range(0, len(pcm), step):
        detections += engine.process(pcm[start:start + step])
    return detections


def check_words(words: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The words, validated against :data:`PACKAGED_WORDS`; ConfigError naming the allowed ones."""
    if not words:
        raise ConfigError(f"voice.wake_word.words is empty; choose from: {', '.join(PACKAGED_WORDS)}")
    unknown = [w for w in words if w not in PACKAGED_WORDS]
    if unknown:
        raise ConfigError(f"unknown wake word {unknown[0]!r} in voice.wake_word.words; "
                          f"packaged words: {', '.join(PACKAGED_WORDS)}")
    return tuple(dict.fromkeys(words))


class Trigger:
    """Thresholds + refractory period: turns per-step word scores into detections. ``threshold`` is one
    threshold for every word, or each word's own (a word missing from the mapping is never detected)."""

    def __init__(self, threshold: float | Mapping[str, float], refractory_s: float = REFRACTORY_S):
        self.threshold = threshold
        self.refractory_s = refractory_s
        self._quiet_until = float("-inf")

    def threshold_of(self, word: str) -> float:
        if isinstance(self.threshold, Mapping):
            return self.threshold.get(word, float("inf"))
        return self.threshold

    def decide(self, scores: dict[str, float], at_s: float) -> WakeDetection | None:
        """The best-scoring word among those reaching their threshold, outside a refractory period."""
        if not scores or at_s < self._quiet_until:
            return None
        reached = [(word, score) for word, score in scores.items() if score >= self.threshold_of(word)]
        if not reached:
            return None
        word, score = max(reached, key=lambda item: item[1])
        self._quiet_until = at_s + self.refractory_s
        return WakeDetection(word, score, at_s)

    def reset(self) -> None:
        self._quiet_until = float("-inf")


class OpenWakeWordEngine:
    """openWakeWord via pyopen-wakeword, in-process. Not thread-safe: one instance per stream.
    ``thresholds``: one score threshold for every word, or each word's (see :class:`Trigger`)."""

    def __init__(self, words: tuple[str, ...], thresholds: float | Mapping[str, float]):
        from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures

        self.words = words
        try:
            self._features = OpenWakeWordFeatures.from_builtin()
            self._models = [OpenWakeWord.from_builtin(Model(word)) for word in words]
        except (OSError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"wake word engine pyopen-wakeword failed to load its models: {exc}") from None
        self.thresholds = {w: thresholds[w] if isinstance(thresholds, Mapping) else thresholds for w in words}
        self._trigger = Trigger(self.thresholds)
        self._pending = bytearray()
        self._samples = 0
        scored = self._scores(silence(STEP_SAMPLES / SAMPLE_RATE))  # validates that the models run, and primes them
        if set(scored) != set(words):
            raise ConfigError(f"wake word engine pyopen-wakeword: no score from the models of "
                              f"{', '.join(sorted(set(words) - set(scored)))} on silence")
        self._primed = self._state()

    def process(self, pcm: bytes) -> list[WakeDetection]:
        if len(pcm) % SAMPLE_WIDTH:
            raise ValueError(f"PCM 16-bit needs an even number of bytes, got {len(pcm)}")
        self._pending += pcm
        step_bytes = STEP_SAMPLES * SAMPLE_WIDTH
        detections = []
        while len(self._pending) >= step_bytes:
            step = bytes(self._pending[:step_bytes])
            del self._pending[:step_bytes]
            self._samples += STEP_SAMPLES
            detection = self._trigger.decide(self._scores(step), self._samples / SAMPLE_RATE)
            if detection:
                detections.append(detection)
        return detections

    def score_steps(self, pcm: bytes) -> dict[str, np.ndarray]:
        """Each word's score at every 80 ms step of ``pcm`` (a trailing partial step is dropped), from a fresh
        stream, without detecting anything: what calibration thresholds. The engine is reset after."""
        self.reset()
        step_bytes = STEP_SAMPLES * SAMPLE_WIDTH
        steps = len(pcm) // step_bytes
        traces = {word: np.zeros(steps, dtype=np.float32) for word in self.words}
        for i in range(steps):
            for word, score in self._scores(pcm[i * step_bytes:(i + 1) * step_bytes]).items():
                traces[word][i] = score
        self.reset()
        return traces

    def _scores(self, step: bytes) -> dict[str, float]:
        """The highest score of each word over the embeddings this step produced."""
        scores: dict[str, float] = {}
        for embedding in self._features.process_streaming(step):
            for model in self._models:
                for probability in model.process_streaming(embedding):
                    scores[model.id] = max(scores.get(model.id, 0.0), float(probability))
        return scores

    def _state(self) -> tuple:
        """A copy of the models' buffers. The library's own reset() refills 8 s of silence that the next step
        must push through every model (~0.5 s of CPU); restoring the primed copy costs nothing."""
        f = self._features
        return ((f.audio.copy(), f.new_audio_samples, f.mels.copy(), f.new_mels),
                [(model.embeddings.copy(), model.new_embeddings) for model in self._models])

    def reset(self) -> None:
        (audio, new_audio, mels, new_mels), models = self._primed
        f = self._features
        f.audio, f.new_audio_samples, f.mels, f.new_mels = audio.copy(), new_audio, mels.copy(), new_mels
        for model, (embeddings, new_embeddings) in zip(self._models, models, strict=True):
            model.embeddings, model.new_embeddings = embeddings.copy(), new_embeddings
        self._trigger.reset()
        self._pending.clear()
        self._samples = 0

    def close(self) -> None:
        for model in self._models:
            model.close()
        self._features.close()


class RemoteWakeWord:
    """Client of the wake-word companion service for one stream. Raises :class:`EngineError` when the
    service is unreachable, times out (``timeout_ms``) or answers with an error."""

    def __init__(self, url: str, stream_id: str, words: tuple[str, ...], timeout_ms: int,
                 transport: httpx.BaseTransport | None = None, *, token: str | None = None):
        import httpx

        if not STREAM_ID.fullmatch(stream_id):
            raise ConfigError(f"wake word stream id {stream_id!r} must match {STREAM_ID.pattern}")
        self.words = words
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._client = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_ms / 1000, transport=transport,
                                    headers=headers)
        self._path = f"/v1/streams/{stream_id}"
        try:
            served = self._request("GET", "/v1/words").json()["words"]
        except EngineError as exc:
            self._client.close()
            hint = "; set [voice.wake_word] token to the service's token" if " 401: " in exc.message else ""
            raise ConfigError(f"wake word engine remote: {exc.message}{hint}") from None
        missing = [w for w in words if w not in served]
        if missing:
            self._client.close()
            raise ConfigError(f"the wake word service at {url} does not detect {missing[0]!r}; "
                              f"it serves: {', '.join(served)}")

    def _request(self, method: str, path: str, allow_404: bool = False, **kwargs) -> httpx.Response:
        import httpx

        try:
            response = self._client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise EngineError(f"the wake word service at {self._client.base_url} timed out") from None
        except httpx.HTTPError as exc:
            raise EngineError(f"the wake word service at {self._client.base_url} is unreachable: {exc}") from None
        if response.is_error and not (allow_404 and response.status_code == 404):
            raise EngineError(f"the wake word service answered {method} {path} with "
                              f"{response.status_code}: {response.text[:200]}")
        return response

    def process(self, pcm: bytes) -> list[WakeDetection]:
        if len(pcm) % SAMPLE_WIDTH:
            raise ValueError(f"PCM 16-bit needs an even number of bytes, got {len(pcm)}")
        detections = []
        for start in range(0, len(pcm), MAX_REQUEST_BYTES):
            response = self._request("POST", f"{self._path}/audio", content=pcm[start:start + MAX_REQUEST_BYTES],
                                     headers={"Content-Type": "application/octet-stream"})
            detections += [WakeDetection(d["word"], d["score"], d["at_s"]) for d in response.json()["detections"]]
        return [d for d in detections if d.word in self.words]

    def reset(self) -> None:
        self._request("DELETE", self._path, allow_404=True)  # 404: the service never saw this stream, nothing to forget

    def close(self) -> None:
        try:
            self.reset()
        except EngineError:
            pass  # the service is gone: nothing left to free there
        self._client.close()


def _open_wakeword(settings: WakeWordSettings, stream_id: str) -> OpenWakeWordEngine:
    from assistant.voice.wake_thresholds import effective_thresholds, read_calibration

    words = check_words(settings.words)
    path = settings.thresholds_file
    if path is not None and not path.expanduser().is_file():
        raise ConfigError(f"voice.wake_word.thresholds_file {path} does not exist; write it with "
                          "`assistant wakeword calibrate --negatives DIR --output PATH` or remove the setting")
    calibration = read_calibration(path.expanduser() if path is not None else None)
    return OpenWakeWordEngine(words, effective_thresholds(words, settings.sensitivity, calibration))


def _remote(settings: WakeWordSettings, stream_id: str) -> RemoteWakeWord:
    if not settings.url:
        raise ConfigError("voice.wake_word.url is required when voice.wake_word.engine is 'remote' "
                          "(e.g. http://127.0.0.1:8083)")
    return RemoteWakeWord(settings.url, stream_id, check_words(settings.words), settings.timeout_ms,
                          token=settings.token)
