"""The voice pipeline: satellite audio in, spoken answers out, one worker thread per room.

Per room, audio chunks from ``{prefix}/audio/{room}/input`` go through:

1. **wake** — while the room has no session, the wake-word engine listens. A detection starts a
   session (Listening), publishes a wake event, and lights the privacy LED.
2. **capture** — the speech segmenter (VAD) cuts the utterance; its end moves the session to
   Processing and the LED goes off. No speech within ``no_speech_timeout_ms`` ends the session.
3. **speaker** — the speaker is identified; only a confidently identified one is answered as their
   user with their memories and personal tools, anyone else (unknown, low confidence, a failing speaker
   engine: counted, never the end of the exchange) as the configured ``default_user_id`` without any
   (see :mod:`assistant.voice.worker`), 4. **stt** — speech-to-text, 5. **llm** — chat for that user
   (the session keeps one conversation per speaker identity), then Responding, 6. **tts** — speech,
   published as output frames,
   7. **playback** — the satellite's ``playback_done`` control message (or the reply's duration plus
   ``PLAYBACK_GRACE_S``) moves the session to FollowUp. Speech within the follow-up window resumes it
   (back to 2); the window's end, or ``max_session_duration_ms``, ends it.

Every exchange is a :class:`VoiceRun` whose typed :class:`VoiceEvent` s are emitted to listeners as
they happen, with per-stage latencies. Each engine call is bounded by its ``timeout_ms``; an engine
error or timeout (except the speaker engine's, see 3.) is reported as an :class:`EngineFailed` event
and ends the session (Processing and Responding end on error, as the state machine says). A worker
runs its exchange inline: audio that arrives while the session is Processing or Responding is
discarded (those states accept no input). An engine call that times out keeps running in the
background until it returns; its result is ignored.

Modules: the run and its events are :mod:`assistant.voice.runs`; a room's worker (the stages), the
engines and the bus it uses are :mod:`assistant.voice.worker`; this module connects the bus to
rooms, sessions and workers, and re-exports both, so ``from assistant.voice.pipeline import ...``
keeps working.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime
from typing import Any, TypeVar

from assistant.clock import utcnow
from assistant.config import VoiceSettings
from assistant.errors import AssistantError, NotFoundError
from assistant.voice.engines import EngineError
from assistant.voice.messages import ControlAction, ControlMessage, StatusMessage
from assistant.voice.rooms import RoomStore
from assistant.voice.runs import (
    AudioPublished,
    EngineFailed,
    NoSpeech,
    PlaybackComplete,
    ResponseReady,
    RunEnded,
    SessionChanged,
    SpeakerIdentified,
    SpeechEnded,
    SpeechStarted,
    Stage,
    Transcribed,
    VoiceEvent,
    VoiceRun,
    WakeDetected,
)
from assistant.voice.sessions import SessionEvent, SessionManager, SessionState
from assistant.voice.whisper import playback_volume
from assistant.voice.worker import (
    MAX_QUEUED_CHUNKS,
    PLAYBACK_GRACE_S,
    WAKE_CONTEXT_S,
    WAKE_PREFIX,
    Bus,
    Engines,
    Identity,
    Mode,
    Responder,
    RoomWorker,
    build_engines,
    strip_wake_phrase,
)

__all__ = [
    "MAX_QUEUED_CHUNKS", "PLAYBACK_GRACE_S", "WAKE_CONTEXT_S", "WAKE_PREFIX", "AudioPublished", "Bus",
    "EngineFailed", "Engines", "EventListener", "Identity", "Mode", "NoSpeech", "PlaybackComplete", "Responder",
    "ResponseReady", "RoomWorker", "RunEnded", "SessionChanged", "SpeakerIdentified", "SpeechEnded",
    "SpeechStarted", "Stage", "Transcribed", "VoiceEvent", "VoicePipeline", "VoiceRun", "WakeDetected",
    "build_engines", "strip_wake_phrase",
]

log = logging.getLogger("assistant.voice.pipeline")

T = TypeVar("T")

TICK_SECS = 0.25  # how often session timeouts are applied without audio flowing
KEEP_RUNS = 50


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
        self.speaker_unavailable = 0  # exchanges answered as unknown because the speaker engine failed
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

    def count_speaker_unavailable(self, room_id: str, error: str) -> None:
        """An exchange whose speaker engine failed or timed out: it goes on as an unknown speaker."""
        with self._lock:
            self.speaker_unavailable += 1
            n = self.speaker_unavailable
        log.warning("voice room %s: speaker identification unavailable (%d so far), answering as an unknown "
                    "speaker: %s", room_id, n, error)

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
