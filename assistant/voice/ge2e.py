"""The ``ge2e`` speaker engine: Resemblyzer's GE2E voice encoder, in-process with torch.

Why this model: it is the other speaker encoder whose weights install from PyPI and run offline
(``resemblyzer==0.1.4``, Apache-2.0, ships ``resemblyzer/pretrained.pt``, 17 MB: a 3-layer LSTM over
40 mel bands, 256 hidden units, a 256->256 linear layer with a ReLU, trained with the generalised
end-to-end loss on LibriSpeech train-other, VoxCeleb1 and VoxCeleb2). The package is installed with
``--no-deps`` and never imported: its ``__init__`` imports librosa (and so numba) and webrtcvad, which
are not installed. This module loads the state dict from the package's file and rebuilds the small
network with torch's own ``LSTM``/``Linear``, and reproduces the package's inference exactly:

- volume normalisation (``normalize_volume(wav, -30, increase_only=True)``): a clip quieter than
  -30 dBFS RMS is raised to it, a louder one is left alone (silence is left alone too);
- features (``audio.wav_to_mel_spectrogram``): librosa ``melspectrogram`` with its defaults, i.e. a
  400-sample (25 ms) periodic Hann window, hop 160 (10 ms), ``center=True`` with reflect padding
  (librosa's default before 0.10, the one the model was trained with), power 2, 40 Slaney mel bands,
  and *no* logarithm (:func:`mel_power`, on :func:`~assistant.voice.speaker.power_spectrogram`);
- partial utterances (``VoiceEncoder.compute_partial_slices``, ``rate=1.3``, ``min_coverage=0.75``):
  windows of 160 frames (1.6 s) every ``round(16000 / 1.3 / 160) = 77`` frames, the last kept only if
  the audio covers at least 75% of it (always at least one), the audio zero-padded to the last
  window's end (:func:`partial_slices`);
- each window's vector is the last layer's final hidden state through the linear layer and the ReLU,
  L2-normalised; the utterance's vector is their mean, L2-normalised again.

Not reproduced: ``preprocess_wav``'s webrtcvad trimming of long silences. The pipeline already hands
the speaker engine one VAD-cut utterance (Silero, with at most ``silence_ms`` of trailing silence), and
the same trimming done with Silero (``benchmarks/voice_encoders.py --trim``, which cut 20% of the
LibriSpeech clips) made both encoders worse on the pairs (GE2E EER 0.05% -> 1.8%, d-vector 0.9% -> 1.3%).

torch's thread count is process-wide: the engine sets it to ``threads`` (1, as the d-vector's
onnxruntime session and ``memory.embedding_threads`` use) when loaded; calls are serialised by a lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from assistant.config import SpeakerIdSettings
from assistant.errors import ConfigError
from assistant.voice.audio import pcm_to_float
from assistant.voice.engines import EngineError
from assistant.voice.speaker import THREADS, check_length, mel_filterbank, noise_pcm, normalise, power_spectrogram

PACKAGE = "resemblyzer"
INSTALL = "pip install --no-deps resemblyzer==0.1.4"
WEIGHTS = "pretrained.pt"


@dataclass(frozen=True)
class Ge2eFrontEnd:
    """Resemblyzer's ``hparams.py`` and ``embed_utterance`` defaults."""

    sample_rate: int = 16_000
    n_fft: int = 400  # mel_window_length 25 ms
    hop_length: int = 160  # mel_window_step 10 ms
    n_mels: int = 40
    partial_frames: int = 160  # partials_n_frames (1.6 s)
    rate: float = 1.3  # partial utterances per second
    min_coverage: float = 0.75  # the last partial is kept when the audio fills this much of it
    target_dbfs: float = -30.0  # audio_norm_target_dBFS (raised to it, never lowered)
    hidden: int = 256  # model_hidden_size
    layers: int = 3  # model_num_layers
    dim: int = 256  # model_embedding_size

    @property
    def frame_step(self) -> int:
        """Frames between partial starts: 77 at 1.3 partials per second."""
        return int(np.round((self.sample_rate / self.rate) / self.hop_length))


def normalise_volume(samples: np.ndarray, target_dbfs: float = -30.0) -> np.ndarray:
    """Raise the RMS level to ``target_dbfs`` when it is below (never lower it); silence is returned as is."""
    samples = np.asarray(samples, dtype=np.float32)
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    if rms <= 0.0:
        return samples
    change = target_dbfs - 20.0 * np.log10(rms)
    return samples if change < 0 else (samples * np.float32(10.0 ** (change / 20.0))).astype(np.float32)


def mel_power(samples: np.ndarray, fe: Ge2eFrontEnd, basis: np.ndarray) -> np.ndarray:
    """float samples -> ``(1 + len // hop, n_mels)`` mel power (not log), as Resemblyzer's front end."""
    power = power_spectrogram(samples, n_fft=fe.n_fft, hop_length=fe.hop_length, window="hann", center=True)
    return (power @ basis.T).astype(np.float32)


def partial_slices(n_samples: int, fe: Ge2eFrontEnd = Ge2eFrontEnd()) -> list[tuple[int, int]]:
    """Resemblyzer's ``compute_partial_slices``: the ``(start, stop)`` frame ranges of the partial
    utterances of ``n_samples`` of audio (stop may lie beyond the audio: it is zero-padded)."""
    n_frames = int(np.ceil((n_samples + 1) / fe.hop_length))
    steps = max(1, n_frames - fe.partial_frames + fe.frame_step + 1)
    slices = [(start, start + fe.partial_frames) for start in range(0, steps, fe.frame_step)]
    start, stop = slices[-1]
    coverage = (n_samples - start * fe.hop_length) / ((stop - start) * fe.hop_length)
    if coverage < fe.min_coverage and len(slices) > 1:
        slices.pop()
    return slices


def partial_features(samples: np.ndarray, fe: Ge2eFrontEnd, basis: np.ndarray) -> np.ndarray:
    """Volume-normalised float samples -> ``(partials, partial_frames, n_mels)`` float32."""
    slices = partial_slices(len(samples), fe)
    end = slices[-1][1] * fe.hop_length
    if end >= len(samples):
        samples = np.pad(samples, (0, end - len(samples)))
    mel = mel_power(samples, fe, basis)
    return np.stack([mel[start:stop] for start, stop in slices])


def bundled_weights() -> Path:
    """``pretrained.pt`` inside the installed ``resemblyzer`` package (not imported: it needs librosa)."""
    from importlib.util import find_spec

    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"speaker engine 'ge2e' needs the package {PACKAGE} ({INSTALL})")
    return Path(next(iter(spec.submodule_search_locations))) / WEIGHTS


def _network(torch: Any, state: dict[str, Any], fe: Ge2eFrontEnd) -> tuple[Any, Any]:
    """The package's ``VoiceEncoder`` layers with its weights: ``(lstm, linear)``, in eval mode."""
    lstm = torch.nn.LSTM(fe.n_mels, fe.hidden, fe.layers, batch_first=True)
    linear = torch.nn.Linear(fe.hidden, fe.dim)
    lstm.load_state_dict({k.removeprefix("lstm."): v for k, v in state.items() if k.startswith("lstm.")})
    linear.load_state_dict({k.removeprefix("linear."): v for k, v in state.items() if k.startswith("linear.")})
    return lstm.eval(), linear.eval()


class GE2EEmbedder:
    """Resemblyzer's GE2E encoder, in-process (torch, ``threads`` intra-op threads)."""

    engine_id = "ge2e"

    def __init__(self, weights: Path | str | None = None, *, threads: int = THREADS):
        try:
            import torch
        except ImportError:
            raise ConfigError("speaker engine 'ge2e' needs torch (pip install torch==2.13.0)") from None
        path = Path(weights) if weights is not None else bundled_weights()
        if not path.is_file():
            raise ConfigError(f"speaker engine 'ge2e': weights file {path} is missing ({INSTALL})")
        self.front_end = Ge2eFrontEnd()
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
            self._lstm, self._linear = _network(torch, checkpoint["model_state"], self.front_end)
        except Exception as exc:  # noqa: BLE001 - unpickling and shape errors share no base class
            raise ConfigError(f"speaker engine 'ge2e': cannot load {path}: {exc}") from None
        torch.set_num_threads(threads)
        self._torch = torch
        self._lock = threading.Lock()
        self._basis = mel_filterbank(self.front_end.sample_rate, self.front_end.n_fft, self.front_end.n_mels)
        self.dim = self.front_end.dim
        probe = self.embed(noise_pcm())
        if probe.shape != (self.dim,) or not np.all(np.isfinite(probe)):
            raise ConfigError(f"speaker engine 'ge2e': {path} gave an output of shape {probe.shape} "
                              f"for 1 s of noise, expected ({self.dim},)")

    def partials(self, pcm: bytes) -> np.ndarray:
        """The L2-normalised vector of every partial utterance: ``(partials, dim)`` float32."""
        check_length(pcm)
        samples = normalise_volume(pcm_to_float(pcm), self.front_end.target_dbfs)
        features = partial_features(samples, self.front_end, self._basis)
        torch = self._torch
        try:
            with self._lock, torch.inference_mode():
                _, (hidden, _) = self._lstm(torch.from_numpy(features))
                raw = torch.relu(self._linear(hidden[-1])).numpy()
        except RuntimeError as exc:
            raise EngineError(f"speaker engine 'ge2e' failed: {exc}") from None
        return raw / (np.linalg.norm(raw, axis=-1, keepdims=True) + 1e-12)

    def embed(self, pcm: bytes) -> np.ndarray:
        return normalise(self.partials(pcm).mean(axis=0))


def ge2e_embedder(settings: SpeakerIdSettings) -> GE2EEmbedder:
    return GE2EEmbedder()
