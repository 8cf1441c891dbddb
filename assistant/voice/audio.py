"""PCM helpers shared by every voice engine: the bus format is signed 16-bit little-endian, 16 kHz, mono.

``soundfile`` (libsndfile, bundled in its wheels) reads WAV and FLAC of any rate and channel count;
``scipy.signal.resample_poly`` converts rates (piper speaks at 22.05 kHz) with a proper anti-alias filter.
"""

from __future__ import annotations

import io
from math import gcd
from pathlib import Path

import numpy as np

from assistant.errors import ValidationFailed

SAMPLE_RATE = 16_000
SAMPLE_WIDTH = 2  # bytes per sample
BYTES_PER_SECOND = SAMPLE_RATE * SAMPLE_WIDTH
MAX_UPLOAD_SECONDS = 60


def pcm_to_float(pcm: bytes) -> np.ndarray:
    """PCM16 LE bytes -> float32 samples in [-1, 1)."""
    if len(pcm) % SAMPLE_WIDTH:
        raise ValueError(f"PCM 16-bit needs an even number of bytes, got {len(pcm)}")
    return np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0


def float_to_pcm(samples: np.ndarray) -> bytes:
    """float samples (any shape flattened, clipped to [-1, 1]) -> PCM16 LE bytes."""
    clipped = np.clip(np.asarray(samples, dtype=np.float32).reshape(-1), -1.0, 1.0)
    return (clipped * 32767.0).round().astype("<i2").tobytes()


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    if from_rate == to_rate:
        return np.asarray(samples, dtype=np.float32)
    from scipy.signal import resample_poly

    g = gcd(from_rate, to_rate)
    return resample_poly(np.asarray(samples, dtype=np.float32), to_rate // g, from_rate // g).astype(np.float32)


def duration_s(pcm: bytes, rate: int = SAMPLE_RATE) -> float:
    return len(pcm) / (rate * SAMPLE_WIDTH)


def silence(seconds: float) -> bytes:
    return bytes(int(seconds * SAMPLE_RATE) * SAMPLE_WIDTH)


def decode_audio(data: bytes | Path | str) -> bytes:
    """A WAV/FLAC file (path or bytes) of any rate and channel count -> PCM16 16 kHz mono.

    Raises :class:`ValueError` naming what is wrong when the data is not a readable audio file.
    """
    return decode_audio_rate(data)[0]


def decode_audio_rate(data: bytes | Path | str) -> tuple[bytes, int]:
    """:func:`decode_audio`, and the file's own sample rate."""
    import soundfile

    source = io.BytesIO(data) if isinstance(data, bytes | bytearray) else str(data)
    try:
        samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
    except (RuntimeError, soundfile.LibsndfileError) as exc:
        # libsndfile's message names the file object ("Error opening <_io.BytesIO object at 0x…>: ...");
        # keep only its reason, which is what a client can act on.
        reason = str(getattr(exc, "error_string", "") or exc).split(": ", 1)[-1]
        raise ValueError(f"not a readable WAV or FLAC file: {reason}") from None
    return float_to_pcm(resample(samples.mean(axis=1), int(rate), SAMPLE_RATE)), int(rate)


def speed_perturb(pcm: bytes, factor: float) -> bytes:
    """The audio played ``factor`` times faster (pitch and formants shift with it), as Kaldi's speed
    perturbation: resampled by ``1/factor`` and read at the original rate. ``factor`` 1.0 returns ``pcm``."""
    if factor == 1.0:
        return pcm
    from fractions import Fraction

    ratio = Fraction(factor).limit_denominator(40)
    return float_to_pcm(resample(pcm_to_float(pcm), ratio.numerator, ratio.denominator))


def wav_bytes(pcm: bytes, rate: int = SAMPLE_RATE) -> bytes:
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, np.frombuffer(pcm, dtype="<i2"), rate, format="WAV", subtype="PCM_16")
    return out.getvalue()


def write_wav(path: Path | str, pcm: bytes, rate: int = SAMPLE_RATE) -> Path:
    path = Path(path)
    path.write_bytes(wav_bytes(pcm, rate))
    return path


def decode_upload(body: bytes, content_type: str | None, *, max_seconds: int = MAX_UPLOAD_SECONDS,
                  min_rate: int | None = None) -> bytes:
    """An uploaded sample -> PCM16 16 kHz mono: a WAV/FLAC file (``audio/wav``, ``audio/x-wav``,
    ``audio/flac``, or any body starting with ``RIFF``/``fLaC``), else raw PCM16 LE 16 kHz mono
    (``application/octet-stream`` or ``audio/L16``, whose ``rate`` and ``channels`` parameters, when
    given, must be 16000 and 1). With ``min_rate``, a file recorded at a lower rate is refused: upsampling
    cannot restore the band it lacks. Raises :class:`ValidationFailed` (422) with the reason."""
    kind = (content_type or "").split(";")[0].strip().lower()
    _check_l16_parameters(kind, content_type or "")
    if not body:
        raise ValidationFailed("the audio body is empty", fields=[{"field": "body", "error": "empty"}])
    is_file = body[:4] in (b"RIFF", b"fLaC") or kind in {"audio/wav", "audio/x-wav", "audio/wave", "audio/flac"}
    if is_file:
        try:
            pcm, rate = decode_audio_rate(body)
        except ValueError as exc:
            raise ValidationFailed(str(exc), fields=[{"field": "body", "error": "not a WAV or FLAC file"}]) from None
    else:
        if len(body) % SAMPLE_WIDTH:
            raise ValidationFailed(f"raw PCM 16-bit needs an even number of bytes, got {len(body)}",
                                   fields=[{"field": "body", "error": "odd length"}])
        pcm, rate = body, SAMPLE_RATE
    if duration_s(pcm) > max_seconds:
        raise ValidationFailed(f"the audio is {duration_s(pcm):.1f} s long; at most {max_seconds} s are accepted",
                               fields=[{"field": "body", "error": "too long"}])
    if duration_s(pcm) < 0.5:
        raise ValidationFailed(f"the audio is {duration_s(pcm):.2f} s long; at least 0.5 s of speech is needed",
                               fields=[{"field": "body", "error": "too short"}])
    if min_rate is not None and rate < min_rate:
        raise ValidationFailed(f"the file is sampled at {rate} Hz; at least {min_rate} Hz is needed (a "
                               "resampled low-rate recording lacks the upper band voices are told apart by)",
                               fields=[{"field": "body", "error": "wrong sample rate"}])
    return pcm


def _check_l16_parameters(kind: str, content_type: str) -> None:
    """``audio/L16; rate=8000`` (or ``channels=2``) names a format other than the bus's: refuse it."""
    if kind != "audio/l16":
        return
    params = dict(part.strip().lower().split("=", 1) for part in content_type.split(";")[1:] if "=" in part)
    if params.get("rate", str(SAMPLE_RATE)).strip() != str(SAMPLE_RATE):
        raise ValidationFailed(f"raw PCM must be {SAMPLE_RATE} Hz; the Content-Type says rate={params['rate']} "
                               "(send a WAV file to have it converted)",
                               fields=[{"field": "body", "error": "wrong sample rate"}])
    if params.get("channels", "1").strip() != "1":
        raise ValidationFailed(f"raw PCM must be mono; the Content-Type says channels={params['channels']}",
                               fields=[{"field": "body", "error": "not mono"}])
