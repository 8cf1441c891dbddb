"""The voice session state machine of the spec, one active session per room at most.

| State | Trigger (operation) | Condition | Next |
|---|---|---|---|
| (none) | wake word (:meth:`SessionManager.start_or_resume_session`) | room has no active session | Listening |
| Listening | speech captured (:meth:`~SessionManager.mark_processing`) | | Processing |
| Listening | max session duration reached (checked lazily) | ``max_session_duration_ms`` | Ended |
| Processing | model response ready (:meth:`~SessionManager.mark_responding`) | | Responding |
| Processing | error or timeout (:meth:`~SessionManager.end_session`) | | Ended |
| Responding | playback complete (:meth:`~SessionManager.enter_follow_up`) | | FollowUp |
| Responding | error (:meth:`~SessionManager.end_session`) | | Ended |
| FollowUp | follow-up speech (:meth:`~SessionManager.start_or_resume_session`) | within the window | Listening |
| FollowUp | timeout (checked lazily) | ``follow_up_window_ms`` | Ended |

Listening and FollowUp accept input; Processing, Responding and Ended do not. Ended is terminal.
``end_session`` may also end a Listening or FollowUp session explicitly (a room deleted, the
satellite gone). Timeouts are applied whenever the manager is asked about a room (and by
:meth:`SessionManager.expire`, for a periodic sweep), using the injectable ``clock``: a session
whose deadline has passed is Ended at that moment, with the deadline as its end time.

Resuming a FollowUp session whose total duration has already reached ``max_session_duration_ms``
ends it (``max_duration``) and starts a new session instead. Every transition emits a
:class:`SessionEvent` to the listeners; an operation not allowed from the current state raises
:class:`InvalidTransition` naming the room, the session, its state and the states allowed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from uuid import uuid4

from assistant.clock import utcnow
from assistant.config import VoiceConversationSettings
from assistant.errors import ConflictError

Clock = Callable[[], datetime]


class SessionState(StrEnum):
    LISTENING = "listening"
    PROCESSING = "processing"
    RESPONDING = "responding"
    FOLLOW_UP = "follow_up"
    ENDED = "ended"

    @property
    def accepts_input(self) -> bool:
        return self in (SessionState.LISTENING, SessionState.FOLLOW_UP)


class Trigger(StrEnum):
    WAKE_WORD = "wake_word"
    SPEECH_CAPTURED = "speech_captured"
    RESPONSE_READY = "response_ready"
    PLAYBACK_COMPLETE = "playback_complete"
    FOLLOW_UP_SPEECH = "follow_up_speech"
    MAX_DURATION = "max_duration"
    FOLLOW_UP_TIMEOUT = "follow_up_timeout"
    ENDED = "ended"  # end_session: an error, an engine timeout, or an explicit end (reason given)


ACTIVE = frozenset(s for s in SessionState if s is not SessionState.ENDED)


class InvalidTransition(ConflictError):
    """An operation not allowed from the session's current state (409 ``CONFLICT`` if it ever
    reaches the API)."""


@dataclass(frozen=True)
class VoiceSession:
    id: str
    room_id: str
    speaker_id: str | None
    conversation_id: str
    state: SessionState
    follow_up_window_ms: int
    exchange_count: int
    started_at: datetime
    last_activity_at: datetime
    follow_up_started_at: datetime | None = None
    ended_at: datetime | None = None
    end_reason: str | None = None


@dataclass(frozen=True)
class SessionEvent:
    """One transition: ``from_state`` is None when the session starts."""

    session_id: str
    room_id: str
    from_state: SessionState | None
    to_state: SessionState
    trigger: Trigger
    at: datetime
    reason: str | None = None


Listener = Callable[[SessionEvent], None]


@dataclass
class SessionManager:
    settings: VoiceConversationSettings = field(default_factory=VoiceConversationSettings)
    clock: Clock = utcnow
    listeners: list[Listener] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._active: dict[str, VoiceSession] = {}  # room_id -> its one active session
        self._ended: dict[str, VoiceSession] = {}  # room_id -> its last ended session
        self._lock = threading.RLock()

    # --- operations ------------------------------------------------------------------------

    def start_or_resume_session(self, room_id: str, speaker_id: str | None = None,
                                conversation_id: str | None = None) -> VoiceSession:
        """Wake word or follow-up speech: a new Listening session when the room has none, or the
        room's FollowUp session back to Listening (its speaker kept unless one is given)."""
        with self._lock:
            now = self.clock()
            current = self._current(room_id, now)
            if current is not None and current.state is SessionState.FOLLOW_UP:
                if now - current.started_at >= self._max_duration:
                    self._end(current, Trigger.MAX_DURATION, current.started_at + self._max_duration, None)
                else:
                    return self._move(current, SessionState.LISTENING, Trigger.FOLLOW_UP_SPEECH, now,
                                      speaker_id=speaker_id or current.speaker_id, follow_up_started_at=None)
            elif current is not None:
                raise InvalidTransition(
                    f"room {room_id} already has an active session {current.id} in state {current.state}: "
                    "a session starts only when the room has none, and resumes only from follow_up",
                    {"room_id": room_id, "session_id": current.id, "state": current.state.value},
                )
            session = VoiceSession(
                id=str(uuid4()), room_id=room_id, speaker_id=speaker_id,
                conversation_id=conversation_id or str(uuid4()), state=SessionState.LISTENING,
                follow_up_window_ms=self.settings.follow_up_window_ms, exchange_count=0,
                started_at=now, last_activity_at=now,
            )
            self._active[room_id] = session
            self._emit(SessionEvent(session.id, room_id, None, SessionState.LISTENING, Trigger.WAKE_WORD, now))
            return session

    def mark_processing(self, room_id: str) -> VoiceSession:
        """Speech captured: Listening → Processing."""
        return self._step(room_id, "mark_processing", SessionState.LISTENING, SessionState.PROCESSING,
                          Trigger.SPEECH_CAPTURED)

    def mark_responding(self, room_id: str) -> VoiceSession:
        """Model response ready: Processing → Responding (one more exchange)."""
        return self._step(room_id, "mark_responding", SessionState.PROCESSING, SessionState.RESPONDING,
                          Trigger.RESPONSE_READY, count=True)

    def enter_follow_up(self, room_id: str) -> VoiceSession:
        """Playback complete: Responding → FollowUp; the follow-up window starts now."""
        return self._step(room_id, "enter_follow_up", SessionState.RESPONDING, SessionState.FOLLOW_UP,
                          Trigger.PLAYBACK_COMPLETE, window=True)

    def end_session(self, room_id: str, reason: str = "ended") -> VoiceSession:
        """End the room's active session (an error, an engine timeout, an explicit end)."""
        with self._lock:
            now = self.clock()
            current = self._current(room_id, now)
            if current is None:
                raise InvalidTransition(f"end_session: room {room_id} has no active session",
                                        {"room_id": room_id})
            return self._end(current, Trigger.ENDED, now, reason)

    def annotate(self, room_id: str, *, speaker_id: str | None = None,
                 conversation_id: str | None = None) -> VoiceSession:
        """Record who is speaking and the chat conversation of the room's active session; not a
        transition (the state and the activity time stay as they are). None leaves a value as it is."""
        changes = {k: v for k, v in (("speaker_id", speaker_id), ("conversation_id", conversation_id)) if v}
        return self._annotated("annotate", room_id, changes)

    def set_speaker(self, room_id: str, speaker_id: str | None) -> VoiceSession:
        """Who spoke the session's latest exchange: a confidently identified profile, or None (someone
        not identified); not a transition."""
        return self._annotated("set_speaker", room_id, {"speaker_id": speaker_id})

    def _annotated(self, operation: str, room_id: str, changes: dict[str, str | None]) -> VoiceSession:
        with self._lock:
            current = self._current(room_id, self.clock())
            if current is None:
                raise InvalidTransition(f"{operation}: room {room_id} has no active session", {"room_id": room_id})
            annotated = replace(current, **changes)
            self._active[room_id] = annotated
            return annotated

    def get_active_session(self, room_id: str) -> VoiceSession | None:
        """The room's active session after applying timeouts, or None."""
        with self._lock:
            return self._current(room_id, self.clock())

    def active_sessions(self) -> list[VoiceSession]:
        with self._lock:
            now = self.clock()
            return [s for s in (self._current(room, now) for room in list(self._active)) if s is not None]

    def expire(self) -> list[VoiceSession]:
        """Apply every timeout now; the sessions this ended."""
        with self._lock:
            before = set(self._active)
            self.active_sessions()
            return [self._ended[room] for room in before if room not in self._active]

    # --- internals -------------------------------------------------------------------------

    @property
    def _max_duration(self) -> timedelta:
        return timedelta(milliseconds=self.settings.max_session_duration_ms)

    def _current(self, room_id: str, now: datetime) -> VoiceSession | None:
        session = self._active.get(room_id)
        if session is None:
            return None
        if session.state is SessionState.LISTENING and now - session.started_at >= self._max_duration:
            self._end(session, Trigger.MAX_DURATION, session.started_at + self._max_duration, None)
            return None
        if session.state is SessionState.FOLLOW_UP and session.follow_up_started_at is not None:
            deadline = session.follow_up_started_at + timedelta(milliseconds=session.follow_up_window_ms)
            if now >= deadline:
                self._end(session, Trigger.FOLLOW_UP_TIMEOUT, deadline, None)
                return None
        return session

    def _step(self, room_id: str, operation: str, source: SessionState, target: SessionState, trigger: Trigger,
              *, count: bool = False, window: bool = False) -> VoiceSession:
        with self._lock:
            now = self.clock()
            current = self._current(room_id, now)
            if current is None:
                raise InvalidTransition(f"{operation}: room {room_id} has no active session",
                                        {"room_id": room_id})
            if current.state is not source:
                raise InvalidTransition(
                    f"{operation}: session {current.id} of room {room_id} is {current.state}, "
                    f"{operation} needs {source}",
                    {"room_id": room_id, "session_id": current.id, "state": current.state.value,
                     "allowed": [source.value]},
                )
            changes: dict[str, object] = {}
            if count:
                changes["exchange_count"] = current.exchange_count + 1
            if window:
                changes["follow_up_started_at"] = now
            return self._move(current, target, trigger, now, **changes)

    def _move(self, session: VoiceSession, target: SessionState, trigger: Trigger, now: datetime,
              **changes: object) -> VoiceSession:
        moved = replace(session, state=target, last_activity_at=now, **changes)
        self._active[session.room_id] = moved
        self._emit(SessionEvent(session.id, session.room_id, session.state, target, trigger, now))
        return moved

    def _end(self, session: VoiceSession, trigger: Trigger, at: datetime, reason: str | None) -> VoiceSession:
        reason = reason or trigger.value
        ended = replace(session, state=SessionState.ENDED, last_activity_at=at, ended_at=at, end_reason=reason,
                        follow_up_started_at=None)
        del self._active[session.room_id]
        self._ended[session.room_id] = ended
        self._emit(SessionEvent(session.id, session.room_id, session.state, SessionState.ENDED, trigger, at, reason))
        return ended

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self.listeners):
            listener(event)
