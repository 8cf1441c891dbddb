"""The ``ge2e`` speaker engine (assistant/voice/ge2e.py): its front end against hand computations and
torch's own STFT, Resemblyzer's partial-utterance rules, the engine's checks and errors, and the real
model on real speech (5 LibriSpeech readers x 10 clips in ../shared/benchmarks/speaker), end to end
through build_services -> SpeakerRegistry."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from assistant.config import SpeakerIdSettings
from assistant.errors import ConfigError
from assistant.voice import ge2e
from assistant.voice.audio import float_to_pcm, silence
from assistant.voice.engines import EngineError
from assistant.voice.ge2e import (
    GE2EEmbedder,
    Ge2eFrontEnd,
    mel_power,
    normalise_volume,
    partial_features,
    partial_slices,
)
from assistant.voice.speaker import cosine, create_embedder, mel_filterbank, power_spectrogram
from tests.integration.support import speaker_clips

FE = Ge2eFrontEnd()




def tone(seconds: float, amplitude: float = 0.1, hz: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * 16_000)) / 16_000
    return (amplitude * np.sin(2 * np.pi * hz * t)).astype(np.float32)


# --- the front end ----------------------------------------------------------------------------------


def test_centred_power_spectrogram_by_hand() -> None:
    """12 samples, n_fft 8, hop 4, centred: reflect-pad 4 each side, 1 + 12 // 4 = 4 frames, periodic Hann."""
    x = np.array([0.3, -0.1, 0.7, 0.2, -0.5, 0.4, 0.0, -0.3, 0.6, 0.1, -0.2, 0.5], dtype=np.float32)
    power = power_spectrogram(x, n_fft=8, hop_length=4, window="hann", center=True)
    assert power.shape == (4, 5)
    padded = [x[4], x[3], x[2], x[1], *x, x[10], x[9], x[8], x[7]]
    hann = [0.5 - 0.5 * np.cos(2 * np.pi * n / 8) for n in range(8)]
    for f in range(4):
        frame = padded[4 * f:4 * f + 8]
        for k in range(5):
            bin_k = sum(hann[n] * frame[n] * np.exp(-2j * np.pi * k * n / 8) for n in range(8))
            assert power[f, k] == pytest.approx(abs(bin_k) ** 2, rel=1e-4, abs=1e-6)


def test_power_spectrogram_equals_torch_stft() -> None:
    """librosa's ``stft(center=True, pad_mode="reflect")`` is torch's ``stft`` with the same options."""
    import torch

    x = np.random.default_rng(1).normal(0, 0.1, 16_123).astype(np.float32)
    ours = power_spectrogram(x, n_fft=400, hop_length=160, window="hann", center=True)
    theirs = torch.stft(torch.from_numpy(x), n_fft=400, hop_length=160, window=torch.hann_window(400),
                        center=True, pad_mode="reflect", return_complex=True).abs().pow(2).numpy().T
    assert ours.shape == theirs.shape == (1 + 16_123 // 160, 201)
    np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-6)


def test_mel_power_is_not_logarithmic() -> None:
    basis = mel_filterbank(16_000, 400, 40)
    x = tone(1.0)
    mel = mel_power(x, FE, basis)
    assert mel.shape == (101, 40) and mel.dtype == np.float32
    assert np.all(mel >= 0)
    np.testing.assert_allclose(mel_power(2 * x, FE, basis), 4 * mel, rtol=1e-4, atol=1e-8)  # power 2, no log
    assert int(np.argmax(mel[50])) == int(np.argmax(basis[:, round(220 / 40)]))  # 220 Hz lands in its band


def test_volume_is_raised_to_minus_30_dbfs_never_lowered() -> None:
    quiet = tone(1.0, amplitude=0.001)
    raised = normalise_volume(quiet)
    assert 20 * np.log10(np.sqrt(np.mean(raised.astype(np.float64) ** 2))) == pytest.approx(-30.0, abs=1e-3)
    loud = tone(1.0, amplitude=0.5)
    assert normalise_volume(loud) is not None and np.array_equal(normalise_volume(loud), loud)
    zeros = np.zeros(16_000, dtype=np.float32)
    assert np.array_equal(normalise_volume(zeros), zeros)  # silence: no division by zero, no NaN


@pytest.mark.parametrize(("n_samples", "expected"), [
    (8_000, [(0, 160)]),  # 0.5 s: always one partial, zero-padded to 1.6 s
    (16_000, [(0, 160)]),  # 101 frames
    (25_600, [(0, 160)]),  # exactly one partial: 161 frames, steps 79 < 77 + 77
    (40_000, [(0, 160), (77, 237)]),  # the third (154..314) would cover 60% < 75%: dropped
    (48_000, [(0, 160), (77, 237), (154, 314)]),  # the third covers 91%: kept
])
def test_partial_slices(n_samples: int, expected: list[tuple[int, int]]) -> None:
    assert FE.frame_step == 77  # round(16000 / 1.3 / 160)
    assert partial_slices(n_samples) == expected


def test_partial_features_pad_the_audio_to_the_last_partial() -> None:
    basis = mel_filterbank(16_000, 400, 40)
    features = partial_features(tone(3.0), FE, basis)
    assert features.shape == (3, 160, 40)
    np.testing.assert_allclose(features[1, :83], features[0, 77:], rtol=1e-6)  # overlapping frames agree
    short = partial_features(tone(0.5), FE, basis)
    assert short.shape == (1, 160, 40)
    assert np.all(short[0, 53:] == 0) and np.all(short[0, 10:45].sum(axis=1) > 0)  # speech, then padding


# --- the engine ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedder() -> GE2EEmbedder:
    return GE2EEmbedder()


def test_registered_with_its_dimension(embedder) -> None:
    made = create_embedder(SpeakerIdSettings(engine="ge2e", embedding_dim=256))
    assert isinstance(made, GE2EEmbedder) and made.dim == embedder.dim == 256
    with pytest.raises(ConfigError, match="256-dim.*embedding_dim is 192"):
        create_embedder(SpeakerIdSettings(engine="ge2e", embedding_dim=192))


def test_vectors_are_unit_length_and_partials_are_averaged(embedder) -> None:
    pcm = float_to_pcm(np.random.default_rng(2).normal(0, 0.1, 48_000))
    vector = embedder.embed(pcm)
    assert vector.shape == (256,) and vector.dtype == np.float32
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    partials = embedder.partials(pcm)
    assert partials.shape == (3, 256) and np.all(partials >= 0)  # after the ReLU
    np.testing.assert_allclose(np.linalg.norm(partials, axis=1), 1.0, atol=1e-5)
    mean = partials.mean(axis=0)
    np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), atol=1e-6)
    assert np.array_equal(embedder.embed(pcm), vector)  # deterministic
    assert np.all(np.isfinite(embedder.embed(silence(1.0))))


def test_too_short_audio_is_an_engine_error(embedder) -> None:
    assert embedder.embed(silence(0.5)).shape == (256,)
    with pytest.raises(EngineError, match="too short"):
        embedder.embed(silence(0.5)[:-2])


def test_missing_package_is_a_config_error_naming_it(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "resemblyzer" else real(name, *a))
    with pytest.raises(ConfigError, match=r"'ge2e' needs the package resemblyzer \(pip install --no-deps"):
        create_embedder(SpeakerIdSettings(engine="ge2e"))


def test_missing_or_bad_weights_are_config_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="is missing"):
        GE2EEmbedder(tmp_path / "nothing.pt")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="cannot load"):
        GE2EEmbedder(tmp_path / "bad.pt")


def test_the_package_is_never_imported(embedder) -> None:
    import sys

    assert "resemblyzer" not in sys.modules and "librosa" not in sys.modules
    assert ge2e.bundled_weights().name == "pretrained.pt"


# --- the real model on real speech ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def clips() -> dict[str, list[bytes]]:
    """Speaker id -> its 10 clips as PCM16 16 kHz mono, in file order."""
    return speaker_clips()


@pytest.mark.integration
def test_same_reader_scores_higher_than_different_readers(embedder, clips) -> None:
    """Measured: every one of the 225 same-reader pairs scores above every one of the 1,000 different-reader
    pairs but one (EER 0.05%); same-reader pairs >= 0.76, different-reader pairs <= 0.77."""
    labelled = [(reader, embedder.embed(pcm)) for reader, pcms in clips.items() for pcm in pcms]
    same, different = [], []
    for (a, va), (b, vb) in itertools.combinations(labelled, 2):
        (same if a == b else different).append(cosine(va, vb))
    assert (len(same), len(different)) == (225, 1000)
    assert np.mean(same) > np.mean(different) + 0.15
    assert np.mean(np.array(same)[:, None] > np.array(different)[None, :]) >= 0.99


@pytest.mark.integration
def test_enrol_and_identify_through_the_services(make_settings, make_services, model, clips) -> None:
    """``[voice.speaker_id] engine = "ge2e"`` end to end: build_services -> SpeakerRegistry -> enrol/identify."""
    settings = make_settings(voice={"speaker_id": {"engine": "ge2e", "embedding_dim": 256}})
    services = make_services(settings, model)
    registry = services.voice.speakers
    owner = services.keys.owner_user_id()
    profiles = {}
    for reader, pcms in clips.items():
        for pcm in pcms[:3]:
            profiles[reader], _ = registry.enroll(owner, f"reader {reader}", pcm)
    right = 0
    for reader, pcms in clips.items():
        for pcm in pcms[3:]:
            match = registry.identify(pcm)
            right += match.known and match.speaker_id == profiles[reader].id
    assert right >= 33  # of 35
