"""What a voice run records: one exchange in a room (:class:`VoiceRun`), its typed events as they
happen (:class:`VoiceEvent` and subclasses) and its per-stage latencies (:class:`Stage`). See
:mod:`assistant.voice.pipeline` for the stages themselves."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar
from uuid import uuid4


@dataclass(frozen=True)
class VoiceEvent:
    """Something that happened in a room's run; ``t_s`` is seconds since the run started."""

    kind: ClassVar[str] = "event"
    run_id: str
    room_id: str
    t_s: float
    at: datetime

    def summary(self) -> str:
        fields = {k: v for k, v in self.__dict__.items() if k not in {"run_id", "room_id", "t_s", "at"}}
        detail = " ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in fields.items())
        return f"+{self.t_s:6.2f}s {self.kind:<17} {detail}".rstrip()

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.__dict__}


@dataclass(frozen=True)
class WakeDetected(VoiceEvent):
    kind: ClassVar[str] = "wake"
    word: str = ""
    score: float = 0.0


@dataclass(frozen=True)
class SpeechStarted(VoiceEvent):
    kind: ClassVar[str] = "speech_started"


@dataclass(frozen=True)
class SpeechEnded(VoiceEvent):
    kind: ClassVar[str] = "speech_ended"
    audio_s: float = 0.0
    reason: str = "silence"


@dataclass(frozen=True)
class NoSpeech(VoiceEvent):
    kind: ClassVar[str] = "no_speech"


@dataclass(frozen=True)
class SpeakerIdentified(VoiceEvent):
    """Who spoke and what the exchange may use: ``user_id`` answers; ``memories`` is ``"personal"``
    (that user's memories and personal tools, and learning) only for a confidently identified speaker,
    else ``"none"``; ``reason`` says why (:class:`assistant.voice.speakers.MatchReason`: ``matched``,
    ``unreliable_profile``, ``no_profiles``, ``below_floor``, ``below_calibrated``,
    ``speaker_service_down``). ``score`` is the raw cosine, ``normalised`` the cohort-normalised score
    and ``threshold`` the household threshold it was held to (None when not computed)."""

    kind: ClassVar[str] = "speaker"
    speaker_id: str | None = None
    user_id: str = ""
    name: str | None = None
    score: float = 0.0
    known: bool = False
    reason: str = ""
    normalised: float | None = None
    threshold: float | None = None
    memories: str = "none"  # "personal" | "none"


@dataclass(frozen=True)
class Transcribed(VoiceEvent):
    """``text``: what the model gets (the wake phrase stripped); ``normalised``: the same in Whisper's
    normalised form (numbers as digits, no punctuation); ``prompt_chars``: the length of the initial prompt
    Whisper was given (0: none); ``prompt_echo``: the prompted transcript only repeated the prompt, so this is
    the audio transcribed again without it."""

    kind: ClassVar[str] = "transcript"
    text: str = ""
    audio_s: float = 0.0
    normalised: str = ""
    prompt_chars: int = 0
    prompt_echo: bool = False


@dataclass(frozen=True)
class ResponseReady(VoiceEvent):
    kind: ClassVar[str] = "response"
    text: str = ""
    conversation_id: str = ""


@dataclass(frozen=True)
class AudioPublished(VoiceEvent):
    kind: ClassVar[str] = "audio_out"
    audio_s: float = 0.0
    frames: int = 0


@dataclass(frozen=True)
class PlaybackComplete(VoiceEvent):
    kind: ClassVar[str] = "playback_done"
    source: str = "satellite"  # or "timer"


@dataclass(frozen=True)
class SessionChanged(VoiceEvent):
    kind: ClassVar[str] = "session"
    session_id: str = ""
    from_state: str | None = None
    to_state: str = ""
    trigger: str = ""
    reason: str | None = None


@dataclass(frozen=True)
class EngineFailed(VoiceEvent):
    kind: ClassVar[str] = "engine_error"
    stage: str = ""
    error: str = ""


@dataclass(frozen=True)
class RunEnded(VoiceEvent):
    kind: ClassVar[str] = "run_end"
    reason: str = ""


class Stage(StrEnum):
    WAKE = "wake"
    SPEAKER = "speaker"
    STT = "stt"
    LLM = "llm"
    TTS = "tts"
    PUBLISH = "publish"


@dataclass
class VoiceRun:
    """One exchange in a room: from the wake word (or follow-up speech) to playback complete."""

    room_id: str
    id: str = field(default_factory=lambda: str(uuid4()))
    started: float = field(default_factory=time.monotonic)
    events: list[VoiceEvent] = field(default_factory=list)
    stages: dict[str, float] = field(default_factory=dict)  # stage -> seconds
    utterance_s: float | None = None
    speech_end: float | None = None  # monotonic time the end of speech was detected
    first_audio: float | None = None  # monotonic time the first output frame was published
    ended: str | None = None

    def t(self) -> float:
        return time.monotonic() - self.started

    def latencies(self) -> dict[str, float]:
        """Per-stage seconds, plus ``eos_to_audio_s`` (end of speech -> first output audio), ``non_llm_s``
        (that minus the model) and ``non_llm_ratio`` (``non_llm_s`` / utterance length; target <= 0.6)."""
        out = dict(self.stages)
        if self.speech_end is not None and self.first_audio is not None:
            total = self.first_audio - self.speech_end
            out["eos_to_audio_s"] = total
            out["non_llm_s"] = total - self.stages.get(Stage.LLM, 0.0)
            if self.utterance_s:
                out["utterance_s"] = self.utterance_s
                out["non_llm_ratio"] = out["non_llm_s"] / self.utterance_s
        return out

    def timeline(self) -> list[str]:
        return [e.summary() for e in self.events]
