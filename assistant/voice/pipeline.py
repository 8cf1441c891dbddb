"""The voice pipeline: satellite audio in, spoken answers out, one worker thread per room.

Per room, audio chunks from ``{prefix}/audio/{room}/input`` go through:

1. **wake** — while the room has no session, the wake-word engine listens. A detection starts a
   session (Listening), publishes a wake event, and lights the privacy LED.
2. **capture** — the speech segmenter (VAD) cuts the utterance; its end moves the session to
   Processing and the LED goes off. No speech within ``no_speech_timeout_ms`` ends the session.
3. **speaker** — the speaker is identified (unknown below ``match_threshold``: the configured
   ``default_user_id`` answers), 4. **stt** — speech-to-text, 5. **llm** — chat for that user (the
   session keeps one conversation), then Responding, 6. **tts** — speech, published as output frames,
   7. **playback** — the satellite's ``playback_done`` control message (or the reply's duration plus
   ``PLAYBACK_GRACE_S``) moves the session to FollowUp. Speech within the follow-up window resumes it
   (back to 2); the window's end, or ``max_session_duration_ms``, ends it.

Every exchange is a :class:`VoiceRun` whose typed :class:`VoiceEvent` s are emitted to listeners as
they happen, with per-stage latencies. Each engine call is bounded by its ``timeout_ms``; an engine
error or timeout is reported as an :class:`EngineFailed` event and ends the session (Processing and
Responding end on error, as the state machine says). A worker runs its exchange inline: audio that
arrives while the session is Processing or Responding is discarded (those states accept no input).
An engine call that times out keeps running in the background until it returns; its result is ignored.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Protocol, TypeVar
from uuid import uuid4

from assistant.clock import utcnow
from assistant.config import VoiceSettings
from assistant.errors import AssistantError, NotFoundError
from assistant.voice import vad
from assistant.voice.audio import SAMPLE_RATE, SAMPLE_WIDTH, duration_s
from assistant.voice.engines import EngineError
from assistant.voice.messages import ControlAction, ControlMessage, StatusMessage, WakeEvent
from assistant.voice.rooms import RoomStore
from assistant.voice.sessions import InvalidTransition, SessionEvent, SessionManager, SessionState
from assistant.voice.whisper import playback_volume

log = logging.getLogger("assistant.voice.pipeline")

T = TypeVar("T")

PLAYBACK_GRACE_S = 2.0  # no playback_done from the satellite: follow-up starts this long after the reply's end
WAKE_CONTEXT_S = 0.3  # audio before the wake detection handed to the segmenter (its pre-roll)
TICK_SECS = 0.25  # how often session timeouts are applied without audio flowing
MAX_QUEUED_CHUNKS = 1_000  # per room; more (a stuck worker) are dropped and counted
KEEP_RUNS = 50


# --- engines and collaborators the pipeline needs ------------------------------------------------------------


class Bus(Protocol):
    @property
    def connected(self) -> bool: ...
    def publish_output(self, room_id: str, pcm: bytes) -> int: ...
    def publish_wake(self, msg: WakeEvent) -> bool: ...
    def publish_control(self, msg: ControlMessage) -> bool: ...


class Responder(Protocol):
    def __call__(self, user_id: str, text: str, conversation_id: str | None) -> tuple[str, str]:
        """The chat answer to ``text`` for ``user_id``: ``(reply text, conversation id)``."""
        ...


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


# --- events ---------------------------------------------------------------------------------------------


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
    kind: ClassVar[str] = "speaker"
    speaker_id: str | None = None
    user_id: str = ""
    name: str | None = None
    score: float = 0.0
    known: bool = False


@dataclass(frozen=True)
class Transcribed(VoiceEvent):
    kind: ClassVar[str] = "transcript"
    text: str = ""
    audio_s: float = 0.0


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

    def __init__(self, pipeline: VoicePipeline, room_id: str):
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
            user_id = self._identify(pcm)
            stage = Stage.STT
            transcript = pipeline.call(Stage.STT, settings.stt.timeout_ms, pipeline.engines.stt.transcribe, pcm,
                                       run=run)
            text = strip_wake_phrase(transcript.text, pipeline.engines.words)
            pipeline.emit(run, Transcribed, text=text, audio_s=round(transcript.audio_s, 3))
            if not text:
                raise EngineError("nothing was understood: the transcript is empty")
            stage = Stage.LLM
            started = time.monotonic()
            reply, conversation_id = pipeline.respond(user_id, text, self.conversation_id)
            run.stages[Stage.LLM] = time.monotonic() - started
            self.conversation_id = conversation_id
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

    def _identify(self, pcm: bytes) -> str:
        pipeline, run = self.pipeline, self.run
        default_user = str(pipeline.settings.default_user_id)
        registry = pipeline.engines.speakers
        if registry is None or not registry.list():
            pipeline.emit(run, SpeakerIdentified, user_id=default_user, known=False)
            return default_user
        match = pipeline.call(Stage.SPEAKER, pipeline.settings.speaker_id.timeout_ms, registry.identify, pcm, run=run)
        known = match.speaker_id is not None
        user_id = str(match.user_id) if known else default_user
        if known:
            pipeline.sessions.annotate(self.room_id, speaker_id=match.speaker_id)
        pipeline.emit(run, SpeakerIdentified, speaker_id=match.speaker_id, user_id=user_id, name=match.name,
                      score=round(float(match.score), 4), known=known)
        return user_id

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


# --- the pipeline -----------------------------------------------------------------------------------------


EventListener = Callable[[VoiceEvent], None]


class VoicePipeline:
    """Connects the bus to rooms, sessions and engines. ``start`` runs the timer thread (session timeouts,
    presence check every ``stale_check_interval_secs``, whisper mode); audio starts workers on demand."""

    def __init__(self, settings: VoiceSettings, *, rooms: RoomStore, sessions: SessionManager, bus: Bus,
                 engines: Engines, respond: Responder, led: Any = None, whisper: Any = None,
                 clock: Callable[[], datetime] = utcnow):
        self.settings = settings
        self.rooms = rooms
        self.sessions = sessions
        self.bus = bus
        self.engines = engines
        self.respond = respond
        self.led = led
        self.whisper = whisper
        self.clock = clock
        self.listeners: list[EventListener] = []
        self.runs: deque[VoiceRun] = deque(maxlen=KEEP_RUNS)
        self.dropped: Counter[tuple[str, str]] = Counter()  # (topic kind, reason) -> messages dropped
        self._workers: dict[str, RoomWorker] = {}
        self._lock = threading.RLock()
        self._capturing: set[str] = set()
        self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="voice-engine")
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None
        self._last_presence_check = 0.0
        sessions.listeners.append(self._on_session_event)

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._timer is None:
            self._timer = threading.Thread(target=self._tick_loop, name="voice-timer", daemon=True)
            self._timer.start()

    def stop(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join(timeout=10)
        with self._lock:
            workers, self._workers = list(self._workers.values()), {}
        for worker in workers:
            worker.stop()
        self._executor.shutdown(wait=False, cancel_futures=True)
        if self._on_session_event in self.sessions.listeners:
            self.sessions.listeners.remove(self._on_session_event)
        if self.led is not None:
            self.led.off()

    # --- bus callbacks -----------------------------------------------------------------------------

    def handle_audio(self, room_id: str, pcm: bytes) -> None:
        worker = self._worker(room_id)
        if worker is not None and not worker.put(pcm):
            self._drop("input", "queue_full", room_id)

    def handle_status(self, message: StatusMessage) -> None:
        try:
            self.rooms.heartbeat(message.room_id)
        except NotFoundError:
            self._drop("status", "unknown_room", message.room_id)

    def handle_control(self, message: ControlMessage) -> None:
        if message.action is ControlAction.COMMAND and message.value == "playback_done":
            with self._lock:
                worker = self._workers.get(message.room_id)
            if worker is not None:
                worker.playback_done.set()

    def remove_room(self, room_id: str) -> None:
        with self._lock:
            worker = self._workers.pop(room_id, None)
        if worker is not None:
            threading.Thread(target=worker.stop, daemon=True).start()

    def _worker(self, room_id: str) -> RoomWorker | None:
        with self._lock:
            worker = self._workers.get(room_id)
            if worker is not None:
                return worker
            try:
                self.rooms.get(room_id)
            except NotFoundError:
                self._drop("input", "unknown_room", room_id)
                return None
            worker = self._workers[room_id] = RoomWorker(self, room_id)
            return worker

    def _drop(self, kind: str, reason: str, room_id: str) -> None:
        self.dropped[(kind, reason)] += 1
        if self.dropped[(kind, reason)] in (1, 10, 100, 1000):
            log.warning("voice pipeline dropped audio/status for room %s: %s (%d so far)", room_id, reason,
                        self.dropped[(kind, reason)])

    # --- control publishing (RoomStore's publisher) -------------------------------------------------

    def publish_control(self, message: ControlMessage) -> None:
        """Volume changes go out at most at the whisper-mode volume during quiet hours."""
        if self.whisper is not None and message.action is ControlAction.VOLUME and isinstance(message.value, int):
            volume = playback_volume(message.value, self.clock(), self.settings.whisper_mode)
            if volume != message.value:
                message = ControlMessage(message.room_id, ControlAction.VOLUME, volume, message.origin, message.at)
        self.bus.publish_control(message)

    # --- timers ------------------------------------------------------------------------------------

    def _tick_loop(self) -> None:
        while not self._stop.wait(TICK_SECS):
            try:
                self.tick()
            except Exception:
                log.exception("voice pipeline tick failed")

    def tick(self) -> None:
        """Apply session timeouts (waking the room's worker), and every ``stale_check_interval_secs`` the
        presence check and whisper mode."""
        for ended in self.sessions.expire():
            with self._lock:
                worker = self._workers.get(ended.room_id)
            if worker is not None:
                worker.put(b"")
        now = time.monotonic()
        if now - self._last_presence_check >= self.settings.rooms.stale_check_interval_secs:
            self._last_presence_check = now
            self.rooms.check_stale()
            if self.whisper is not None:
                for message in self.whisper.tick(self.rooms.list(), self.clock()):
                    self.bus.publish_control(message)

    # --- events, engines, LED ------------------------------------------------------------------------

    def new_run(self, room_id: str) -> VoiceRun:
        run = VoiceRun(room_id)
        self.runs.append(run)
        return run

    def emit(self, run: VoiceRun | None, cls: type[VoiceEvent], **fields: Any) -> VoiceEvent | None:
        if run is None:
            return None
        event = cls(run_id=run.id, room_id=run.room_id, t_s=round(run.t(), 3), at=utcnow(), **fields)
        run.events.append(event)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:
                log.exception("voice event listener failed")
        return event

    def _on_session_event(self, event: SessionEvent) -> None:
        worker = self._workers.get(event.room_id)
        run = worker.run if worker is not None else None
        if run is not None and run.ended is None:
            self.emit(run, SessionChanged, session_id=event.session_id,
                      from_state=event.from_state.value if event.from_state else None,
                      to_state=event.to_state.value, trigger=event.trigger.value, reason=event.reason)
        if event.to_state is SessionState.ENDED:
            self.led_off(event.room_id)

    def call(self, stage: Stage, timeout_ms: int, fn: Callable[..., T], *args: Any, run: VoiceRun | None,
             room_id: str | None = None) -> T:
        """Run one engine call bounded by ``timeout_ms``; its time is recorded on the run."""
        started = time.monotonic()
        future = self._executor.submit(fn, *args)
        try:
            result = future.result(timeout=timeout_ms / 1000)
        except FutureTimeout:
            raise EngineError(f"the {stage} engine did not answer within {timeout_ms} ms") from None
        except AssistantError:
            raise
        except Exception as exc:
            raise EngineError(f"the {stage} engine failed: {type(exc).__name__}: {exc}") from exc
        if run is not None:
            run.stages[stage] = run.stages.get(stage, 0.0) + time.monotonic() - started
        return result

    def led_on(self, room_id: str) -> None:
        with self._lock:
            self._capturing.add(room_id)
            if self.led is not None:
                self.led.on()

    def led_off(self, room_id: str) -> None:
        with self._lock:
            self._capturing.discard(room_id)
            if self.led is not None and not self._capturing:
                self.led.off()
