"""A room's worker: the pipeline's stages for one room, in order on its own thread — wake word,
capture (VAD), speaker, speech-to-text, the model, speech, playback, follow-up (see
:mod:`assistant.voice.pipeline`) — and the engines and bus they use.

Identity gates memory. Only a *confident* speaker (:attr:`SpeakerMatch.confident`: matched, with a
reliable profile) is answered as their own user with their personal data: memories in the prompt,
learning from the exchange, every tool. Anyone else — nobody enrolled, a score below the raw floor or
the household's calibrated threshold, a profile with too few samples, or a speaker engine that failed
or timed out — is answered as ``[voice] default_user_id`` with ``personal=False``: no memories, nothing
learned, only the tools that hold no personal data (:data:`assistant.tools.catalog.SHARED_CAPABILITIES`).
Such a speaker is not answered as the room's owner: a room belongs to whoever registered it, and
whoever stands in it is not that person; the household has no shared memory store, so "the room's
shared memories" are none. A speaker engine that fails does not end the exchange: it is answered as
an unknown speaker (``speaker_service_down``) and counted (``voice_speaker_unavailable_total``).
The :class:`SpeakerIdentified` event says which way it went and why (``memories``, ``reason``). A
session's conversation is kept only while its speaker's identity stays the same: when it changes (Alice,
then someone unidentified in the follow-up window) the next exchange starts a new conversation, so its
history never carries one person's answers to another.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from typing import Any, Protocol, TypeVar

from assistant.clock import utcnow
from assistant.config import VoiceSettings
from assistant.errors import AssistantError
from assistant.voice import vad
from assistant.voice.audio import SAMPLE_RATE, SAMPLE_WIDTH, duration_s
from assistant.voice.engines import EngineError
from assistant.voice.messages import ControlMessage, WakeEvent
from assistant.voice.normalise import normalise_transcript
from assistant.voice.runs import (
    AudioPublished,
    EngineFailed,
    NoSpeech,
    PlaybackComplete,
    ResponseReady,
    RunEnded,
    SpeakerIdentified,
    SpeechEnded,
    SpeechStarted,
    Stage,
    Transcribed,
    VoiceEvent,
    VoiceRun,
    WakeDetected,
)
from assistant.voice.sessions import InvalidTransition, SessionManager, SessionState
from assistant.voice.speakers import MatchReason, SpeakerMatch
from assistant.voice.stt import stt_prompt

log = logging.getLogger("assistant.voice.pipeline")

T = TypeVar("T")

PLAYBACK_GRACE_S = 2.0  # no playback_done from the satellite: follow-up starts this long after the reply's end
WAKE_CONTEXT_S = 0.3  # audio before the wake detection handed to the segmenter (its pre-roll)
MAX_QUEUED_CHUNKS = 1_000  # per room; more (a stuck worker) are dropped and counted
PROMPT_EXCHANGES = 2  # the session's last exchanges (utterance and reply) in Whisper's initial prompt


# --- engines and collaborators the pipeline needs ------------------------------------------------------------


class Bus(Protocol):
    @property
    def connected(self) -> bool: ...
    def publish_output(self, room_id: str, pcm: bytes) -> int: ...
    def publish_wake(self, msg: WakeEvent) -> bool: ...
    def publish_control(self, msg: ControlMessage) -> bool: ...


class Responder(Protocol):
    def __call__(self, user_id: str, text: str, conversation_id: str | None, *, personal: bool) -> tuple[str, str]:
        """The chat answer to ``text`` for ``user_id``: ``(reply text, conversation id)``. With ``personal``
        False it uses none of the user's memories or personal tools and learns nothing from the exchange."""
        ...


@dataclass(frozen=True)
class Identity:
    """Whom an exchange is answered as, and whether it may use that user's personal data."""

    user_id: str
    personal: bool


@dataclass
class Engines:
    """The engines, built and validated before audio flows (:func:`build_engines`). Wake-word and VAD
    engines hold per-stream state, so they are factories called once per room."""

    wake: Callable[[str], Any]  # room id -> WakeWordEngine
    vad: Callable[[], Any]  # -> VoiceActivityDetector
    stt: Any  # SpeechToText
    tts: Any  # TextToSpeech
    speakers: Any | None = None  # SpeakerRegistry; None: every speaker is unknown
    words: tuple[str, ...] = ()


def build_engines(settings: VoiceSettings, speakers: Any | None = None) -> Engines:
    """Create every configured engine and run each once, so a broken one fails now (ConfigError)."""
    from assistant.voice.stt import create_stt
    from assistant.voice.tts import create_tts
    from assistant.voice.vad import create_vad
    from assistant.voice.wake import create_wake_word

    probe = create_wake_word(settings.wake_word, stream_id="validate")
    words = tuple(probe.words)
    probe.close()
    create_vad(settings.vad)
    if speakers is not None:
        _ = speakers.embedder  # builds and validates the embedding model
    return Engines(wake=lambda room: create_wake_word(settings.wake_word, stream_id=room),
                   vad=lambda: create_vad(settings.vad), stt=create_stt(settings.stt), tts=create_tts(settings.tts),
                   speakers=speakers, words=words)


class RoomHost(Protocol):
    """What a room's worker uses of its pipeline (:class:`assistant.voice.pipeline.VoicePipeline`)."""

    settings: VoiceSettings
    sessions: SessionManager
    bus: Bus
    engines: Engines
    respond: Responder

    def new_run(self, room_id: str) -> VoiceRun: ...

    def emit(self, run: VoiceRun | None, cls: type[VoiceEvent], **fields: Any) -> VoiceEvent | None: ...

    def call(self, stage: Stage, timeout_ms: int, fn: Callable[..., T], *args: Any, run: VoiceRun | None,
             room_id: str | None = None) -> T: ...

    def led_on(self, room_id: str) -> None: ...

    def led_off(self, room_id: str) -> None: ...

    def count_speaker_unavailable(self, room_id: str, error: str) -> None: ...


class Mode(StrEnum):
    IDLE = "idle"  # no session: the wake-word engine listens
    CAPTURE = "capture"  # Listening: the segmenter cuts the utterance
    BUSY = "busy"  # Processing / Responding: audio is discarded
    FOLLOW_UP = "follow_up"  # FollowUp: speech resumes the session


WAKE_PREFIX = re.compile(r"^\W*(?:(?:hey|hi|ok|okay)\W+)?(?P<word>[a-z]+)\W+", re.IGNORECASE)


def strip_wake_phrase(text: str, words: tuple[str, ...]) -> str:
    """Drop a leading wake phrase ("Hey Jarvis, ...") that the capture may have caught the tail of."""
    names = {part for word in words for part in word.lower().split("_") if part not in {"hey", "hi", "ok", "okay"}}
    match = WAKE_PREFIX.match(text)
    if match and match.group("word").lower() in names:
        return text[match.end():].strip()
    return text.strip()


# --- one room ---------------------------------------------------------------------------------------------


class RoomWorker:
    """A room's audio, processed in order on its own thread."""

    def __init__(self, pipeline: RoomHost, room_id: str):
        self.pipeline = pipeline
        self.room_id = room_id
        self.queue: queue.Queue[bytes | None] = queue.Queue(MAX_QUEUED_CHUNKS)
        self.mode = Mode.IDLE
        self.run: VoiceRun | None = None
        self.wake = pipeline.engines.wake(room_id)
        self.segmenter = vad.SpeechSegmenter(pipeline.engines.vad(), pipeline.settings.vad)
        self.recent: deque[bytes] = deque()
        self.recent_bytes = 0
        self.conversation_id: str | None = None
        self.identity: Identity | None = None  # whose conversation conversation_id is
        self.exchanges: deque[str] = deque(maxlen=2 * PROMPT_EXCHANGES)  # this session's utterances and replies
        self.playback_done = threading.Event()
        self.stopping = False
        self._thread = threading.Thread(target=self._loop, name=f"voice-room-{room_id[:8]}", daemon=True)
        self._thread.start()

    def put(self, pcm: bytes | None) -> bool:
        try:
            self.queue.put_nowait(pcm)
            return True
        except queue.Full:
            return False

    def stop(self) -> None:
        self.stopping = True
        try:
            self.queue.put(None, timeout=5)
        except queue.Full:
            pass
        self._thread.join(timeout=30)
        close = getattr(self.wake, "close", None)
        if close is not None:
            close()

    def _loop(self) -> None:
        while True:
            pcm = self.queue.get()
            if self.stopping:
                return
            try:
                self._sync_with_session()
                if pcm:
                    self._chunk(pcm)
            except Exception:  # a room's worker never dies: the error is logged and the session ends
                log.exception("voice room %s: unexpected error; the session ends", self.room_id)
                self._end_session("internal_error")

    # --- state -------------------------------------------------------------------------------------

    def _sync_with_session(self) -> None:
        """A session ended elsewhere (follow-up window, max duration, room deleted): back to the wake word."""
        if self.mode in (Mode.CAPTURE, Mode.FOLLOW_UP) and self.pipeline.sessions.get_active_session(
                self.room_id) is None:
            self._reset("session_ended")

    def _reset(self, reason: str) -> None:
        self.pipeline.led_off(self.room_id)
        if self.run is not None and self.run.ended is None:
            self._end_run(reason)
        self.mode = Mode.IDLE
        self.conversation_id = None
        self.exchanges.clear()
        self.wake.reset()
        self.segmenter.reset()
        self._clear_recent()

    def _end_session(self, reason: str) -> None:
        try:
            self.pipeline.sessions.end_session(self.room_id, reason)
        except InvalidTransition:
            pass  # already ended (a timeout got there first)
        self._reset(reason)

    def _clear_recent(self) -> None:
        self.recent.clear()
        self.recent_bytes = 0

    def _remember(self, pcm: bytes) -> None:
        self.recent.append(pcm)
        self.recent_bytes += len(pcm)
        limit = int(WAKE_CONTEXT_S * SAMPLE_RATE) * SAMPLE_WIDTH
        while self.recent and self.recent_bytes - len(self.recent[0]) >= limit:
            self.recent_bytes -= len(self.recent.popleft())

    # --- audio -------------------------------------------------------------------------------------

    def _chunk(self, pcm: bytes) -> None:
        if self.mode is Mode.IDLE:
            self._remember(pcm)
            detections = self.pipeline.call(Stage.WAKE, self.pipeline.settings.wake_word.timeout_ms,
                                            self.wake.process, pcm, run=None, room_id=self.room_id)
            if detections:
                self._wake(detections[0])
        elif self.mode in (Mode.CAPTURE, Mode.FOLLOW_UP):
            for event in self.segmenter.feed(pcm):
                self._segment(event)
                if self.mode not in (Mode.CAPTURE, Mode.FOLLOW_UP):
                    break

    def _wake(self, detection: Any) -> None:
        sessions = self.pipeline.sessions
        if sessions.get_active_session(self.room_id) is not None:
            return  # a session is already running (started through another path)
        session = sessions.start_or_resume_session(self.room_id)
        self.run = self.pipeline.new_run(self.room_id)
        self.pipeline.emit(self.run, WakeDetected, word=detection.word, score=round(float(detection.score), 4))
        self.pipeline.bus.publish_wake(WakeEvent(self.room_id, detection.word, min(1.0, float(detection.score)),
                                                 utcnow()))
        self.pipeline.led_on(self.room_id)
        log.info("voice room %s: wake word %s (%.2f), session %s", self.room_id, detection.word,
                 detection.score, session.id)
        self.mode = Mode.CAPTURE
        self.conversation_id = None
        self.segmenter.reset()
        context = b"".join(self.recent)
        self._clear_recent()
        self.wake.reset()
        if context:
            for event in self.segmenter.feed(context):
                self._segment(event)

    def _segment(self, event: Any) -> None:
        if isinstance(event, vad.SpeechStarted):
            if self.mode is Mode.FOLLOW_UP and not self._resume():
                return
            self.pipeline.emit(self.run, SpeechStarted)
        elif isinstance(event, vad.NoSpeech):
            if self.mode is Mode.FOLLOW_UP:
                self.segmenter.reset()  # keep listening: the follow-up window decides, not the VAD
                return
            self.pipeline.emit(self.run, NoSpeech)
            self._end_session("no_speech")
        elif isinstance(event, vad.SpeechEnded):
            self._exchange(event.pcm, event.reason)

    def _resume(self) -> bool:
        session = self.pipeline.sessions.get_active_session(self.room_id)
        if session is None or session.state is not SessionState.FOLLOW_UP:
            self._reset("session_ended")
            return False
        self.pipeline.sessions.start_or_resume_session(self.room_id)
        self.run = self.pipeline.new_run(self.room_id)
        self.pipeline.led_on(self.room_id)
        self.mode = Mode.CAPTURE
        return True

    # --- one exchange --------------------------------------------------------------------------------

    def _exchange(self, pcm: bytes, reason: str) -> None:
        pipeline, run, settings = self.pipeline, self.run, self.pipeline.settings
        assert run is not None
        run.speech_end = time.monotonic()
        run.utterance_s = duration_s(pcm)
        pipeline.led_off(self.room_id)
        pipeline.emit(run, SpeechEnded, audio_s=round(run.utterance_s, 3), reason=reason)
        self.mode = Mode.BUSY
        try:
            pipeline.sessions.mark_processing(self.room_id)
        except InvalidTransition:  # the session timed out while we listened
            self._reset("session_ended")
            return
        stage = Stage.SPEAKER
        try:
            identity = self._identify(pcm)
            stage = Stage.STT
            text = self._transcribe(pcm, same_speaker=identity == self.identity)
            stage = Stage.LLM
            started = time.monotonic()
            kept = self.conversation_id if identity == self.identity else None  # a new speaker: a new conversation
            reply, conversation_id = pipeline.respond(identity.user_id, text, kept, personal=identity.personal)
            run.stages[Stage.LLM] = time.monotonic() - started
            self.conversation_id, self.identity = conversation_id, identity
            self.exchanges.extend((text, reply))
            pipeline.sessions.annotate(self.room_id, conversation_id=conversation_id)
            pipeline.emit(run, ResponseReady, text=reply, conversation_id=conversation_id)
            pipeline.sessions.mark_responding(self.room_id)
            stage = Stage.TTS
            speech = pipeline.call(Stage.TTS, settings.tts.timeout_ms, pipeline.engines.tts.synthesize,
                                   reply or "Sorry, I have no answer to that.", run=run)
            stage = Stage.PUBLISH
            self.playback_done.clear()
            started = time.monotonic()
            run.first_audio = started
            frames = pipeline.bus.publish_output(self.room_id, speech)
            run.stages[Stage.PUBLISH] = time.monotonic() - started
            pipeline.emit(run, AudioPublished, audio_s=round(duration_s(speech), 3), frames=frames)
        except (AssistantError, InvalidTransition) as exc:
            message = exc.message if isinstance(exc, AssistantError) else str(exc)
            pipeline.emit(run, EngineFailed, stage=str(stage), error=message)
            log.warning("voice room %s: %s failed: %s", self.room_id, stage, message)
            self._end_session(f"{stage}_error")
            return
        self._await_playback(duration_s(speech))

    def _transcribe(self, pcm: bytes, *, same_speaker: bool) -> str:
        """Speech-to-text (with the prompt of :meth:`_stt_prompt`), the wake phrase stripped, the transcript
        event emitted; EngineError when nothing was understood."""
        pipeline, run = self.pipeline, self.run
        prompt = self._stt_prompt(same_speaker)
        transcribe = pipeline.engines.stt.transcribe
        transcript = pipeline.call(Stage.STT, pipeline.settings.stt.timeout_ms,
                                   transcribe if prompt is None else partial(transcribe, prompt=prompt), pcm, run=run)
        text = strip_wake_phrase(transcript.text, pipeline.engines.words)
        normalised = normalise_transcript(text)
        pipeline.emit(run, Transcribed, text=text, normalised=normalised, audio_s=round(transcript.audio_s, 3),
                      prompt_chars=len(prompt or ""), prompt_echo=transcript.prompt_echo)
        if not re.search(r"\w", normalised):  # nothing, or only punctuation and hesitations ("Uh...")
            raise EngineError("nothing was understood: the transcript is empty")
        return text

    def _stt_prompt(self, same_speaker: bool) -> str | None:
        """Whisper's initial prompt (``[voice.stt] prompt_context``): the enrolled speakers' names and, while
        the speaker's identity is the one of the session's last exchanges (as for the conversation), those
        exchanges; None when off or empty. A failing speaker store only drops the names."""
        if not self.pipeline.settings.stt.prompt_context:
            return None
        registry, names = self.pipeline.engines.speakers, []
        if registry is not None:
            try:
                names = [getattr(profile, "name", "") for profile in registry.list()]
            except Exception:
                log.warning("voice room %s: speaker names for the STT prompt unavailable", self.room_id, exc_info=True)
        return stt_prompt(names, self.exchanges if same_speaker else ())

    def _identify(self, pcm: bytes) -> Identity:
        """Who spoke, and whether the exchange may use their personal data (see the module docstring)."""
        pipeline, run = self.pipeline, self.run
        match = self._match(pcm)
        personal = match.confident
        user_id = str(match.user_id) if personal else str(pipeline.settings.default_user_id)
        pipeline.sessions.set_speaker(self.room_id, match.speaker_id if personal else None)
        pipeline.emit(run, SpeakerIdentified, speaker_id=match.speaker_id, user_id=user_id, name=match.name,
                      score=round(float(match.score), 4), known=match.known, reason=str(match.reason),
                      normalised=_rounded(match.normalised), threshold=_rounded(match.threshold),
                      memories="personal" if personal else "none")
        if not personal:
            log.info("voice room %s: speaker not confidently identified (%s): answered without personal data",
                     self.room_id, match.reason)
        return Identity(user_id, personal)

    def _match(self, pcm: bytes) -> SpeakerMatch:
        """The registry's match; a failing or silent speaker engine is an unknown speaker (counted)."""
        pipeline = self.pipeline
        registry = pipeline.engines.speakers
        if registry is None or not registry.list():
            return SpeakerMatch(None, None, None, 0.0, reason=MatchReason.NO_PROFILES)
        try:
            return pipeline.call(Stage.SPEAKER, pipeline.settings.speaker_id.timeout_ms, registry.identify, pcm,
                                 run=self.run)
        except AssistantError as exc:  # EngineError (failed, timed out), ConfigError (engine cannot be built)
            pipeline.count_speaker_unavailable(self.room_id, exc.message)
            return SpeakerMatch(None, None, None, 0.0, reason=MatchReason.SERVICE_DOWN)

    def _await_playback(self, reply_s: float) -> None:
        done = self.playback_done.wait(timeout=reply_s + PLAYBACK_GRACE_S)
        self.pipeline.emit(self.run, PlaybackComplete, source="satellite" if done else "timer")
        try:
            self.pipeline.sessions.enter_follow_up(self.room_id)
        except InvalidTransition:
            self._reset("session_ended")
            return
        self._drain()  # what the microphone heard during playback is the reply itself
        self._end_run("follow_up")
        self.mode = Mode.FOLLOW_UP
        self.segmenter.reset()

    def _drain(self) -> None:
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            if item is None and self.stopping:
                self.queue.put_nowait(None)
                return

    def _end_run(self, reason: str) -> None:
        if self.run is not None and self.run.ended is None:
            self.run.ended = reason
            self.pipeline.emit(self.run, RunEnded, reason=reason)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)
