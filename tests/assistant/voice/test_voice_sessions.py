"""The voice session state machine, transition by transition, and a hypothesis state machine."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from assistant.config import VoiceConversationSettings
from assistant.voice.sessions import InvalidTransition, SessionEvent, SessionManager, SessionState, Trigger

S = SessionState
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += timedelta(milliseconds=ms)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def events() -> list[SessionEvent]:
    return []


@pytest.fixture
def manager(clock: FakeClock, events: list[SessionEvent]) -> SessionManager:
    settings = VoiceConversationSettings(follow_up_window_ms=10_000, max_session_duration_ms=300_000)
    return SessionManager(settings, clock, [events.append])


def run_to_follow_up(manager: SessionManager, room: str = "r1") -> None:
    manager.start_or_resume_session(room)
    manager.mark_processing(room)
    manager.mark_responding(room)
    manager.enter_follow_up(room)


def test_accepting_states() -> None:
    assert {s for s in S if s.accepts_input} == {S.LISTENING, S.FOLLOW_UP}


def test_wake_word_starts_a_listening_session(manager: SessionManager, events: list[SessionEvent]) -> None:
    session = manager.start_or_resume_session("r1", speaker_id="spk", conversation_id="c1")
    assert (session.state, session.room_id, session.speaker_id, session.conversation_id) == (S.LISTENING, "r1", "spk", "c1")
    assert session.exchange_count == 0 and session.follow_up_window_ms == 10_000
    assert events == [SessionEvent(session.id, "r1", None, S.LISTENING, Trigger.WAKE_WORD, T0)]
    assert manager.get_active_session("r1") == session


def test_full_cycle_emits_each_transition(manager: SessionManager, events: list[SessionEvent]) -> None:
    run_to_follow_up(manager)
    session = manager.get_active_session("r1")
    assert session.state is S.FOLLOW_UP and session.exchange_count == 1
    assert [(e.from_state, e.to_state, e.trigger) for e in events] == [
        (None, S.LISTENING, Trigger.WAKE_WORD),
        (S.LISTENING, S.PROCESSING, Trigger.SPEECH_CAPTURED),
        (S.PROCESSING, S.RESPONDING, Trigger.RESPONSE_READY),
        (S.RESPONDING, S.FOLLOW_UP, Trigger.PLAYBACK_COMPLETE),
    ]


def test_follow_up_speech_resumes_the_same_session(manager: SessionManager, clock: FakeClock,
                                                    events: list[SessionEvent]) -> None:
    run_to_follow_up(manager)
    first = manager.get_active_session("r1")
    clock.advance(9_999)
    resumed = manager.start_or_resume_session("r1")
    assert resumed.id == first.id and resumed.state is S.LISTENING and resumed.exchange_count == 1
    assert resumed.conversation_id == first.conversation_id
    assert events[-1].trigger is Trigger.FOLLOW_UP_SPEECH


def test_follow_up_window_timeout_ends_the_session(manager: SessionManager, clock: FakeClock,
                                                   events: list[SessionEvent]) -> None:
    run_to_follow_up(manager)
    old = manager.get_active_session("r1")
    clock.advance(10_000)
    assert manager.get_active_session("r1") is None
    assert events[-1].to_state is S.ENDED and events[-1].trigger is Trigger.FOLLOW_UP_TIMEOUT
    assert events[-1].at == T0 + timedelta(milliseconds=10_000)
    fresh = manager.start_or_resume_session("r1")
    assert fresh.id != old.id and fresh.exchange_count == 0


def test_max_duration_ends_a_listening_session(manager: SessionManager, clock: FakeClock,
                                               events: list[SessionEvent]) -> None:
    manager.start_or_resume_session("r1")
    clock.advance(299_999)
    assert manager.get_active_session("r1").state is S.LISTENING
    clock.advance(1)
    assert manager.expire()[0].end_reason == "max_duration"
    assert manager.get_active_session("r1") is None
    assert events[-1].trigger is Trigger.MAX_DURATION


def test_resume_after_max_duration_starts_a_new_session(manager: SessionManager, clock: FakeClock,
                                                        events: list[SessionEvent]) -> None:
    first = manager.start_or_resume_session("r1")
    for _ in range(34):  # 34 x 9 s, each within the follow-up window: past the 300 s maximum in total
        manager.mark_processing("r1")
        manager.mark_responding("r1")
        manager.enter_follow_up("r1")
        clock.advance(9_000)
        session = manager.start_or_resume_session("r1")
        if session.id != first.id:
            break
    assert session.id != first.id and session.exchange_count == 0
    assert clock.now - first.started_at >= timedelta(minutes=5)
    ended = [e for e in events if e.to_state is S.ENDED]
    assert [(e.session_id, e.trigger) for e in ended] == [(first.id, Trigger.MAX_DURATION)]


@pytest.mark.parametrize("state", [S.PROCESSING, S.RESPONDING])
def test_error_ends_processing_and_responding(manager: SessionManager, state: SessionState,
                                              events: list[SessionEvent]) -> None:
    manager.start_or_resume_session("r1")
    manager.mark_processing("r1")
    if state is S.RESPONDING:
        manager.mark_responding("r1")
    ended = manager.end_session("r1", "stt timeout")
    assert ended.state is S.ENDED and ended.end_reason == "stt timeout"
    assert (events[-1].from_state, events[-1].to_state, events[-1].reason) == (state, S.ENDED, "stt timeout")
    assert manager.get_active_session("r1") is None


def test_invalid_transitions_raise_precise_errors(manager: SessionManager) -> None:
    with pytest.raises(InvalidTransition, match="mark_processing: room r1 has no active session"):
        manager.mark_processing("r1")
    with pytest.raises(InvalidTransition, match="end_session: room r1 has no active session"):
        manager.end_session("r1")
    manager.start_or_resume_session("r1")
    with pytest.raises(InvalidTransition, match="is listening, mark_responding needs processing") as info:
        manager.mark_responding("r1")
    assert info.value.details["allowed"] == ["processing"]
    with pytest.raises(InvalidTransition, match="is listening, enter_follow_up needs responding"):
        manager.enter_follow_up("r1")
    with pytest.raises(InvalidTransition, match="already has an active session"):
        manager.start_or_resume_session("r1")
    manager.mark_processing("r1")
    with pytest.raises(InvalidTransition, match="in state processing"):
        manager.start_or_resume_session("r1")


def test_rooms_are_independent(manager: SessionManager) -> None:
    manager.start_or_resume_session("a")
    manager.start_or_resume_session("b")
    manager.mark_processing("a")
    assert {s.room_id: s.state for s in manager.active_sessions()} == {"a": S.PROCESSING, "b": S.LISTENING}


ROOMS = st.sampled_from(["kitchen", "hall"])
OPS = {"mark_processing", "mark_responding", "enter_follow_up"}
ALLOWED = {"mark_processing": S.LISTENING, "mark_responding": S.PROCESSING, "enter_follow_up": S.RESPONDING}
NEXT = {"mark_processing": S.PROCESSING, "mark_responding": S.RESPONDING, "enter_follow_up": S.FOLLOW_UP}


class SessionMachine(RuleBasedStateMachine):
    """A model of the spec's table checked against the manager under a fake clock."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.events: list[SessionEvent] = []
        self.manager = SessionManager(VoiceConversationSettings(follow_up_window_ms=1_000,
                                                                max_session_duration_ms=5_000),
                                      self.clock, [self.events.append])
        self.model: dict[str, tuple[SessionState, datetime, datetime | None]] = {}  # state, started, follow-up since
        self.ended_ids: set[str] = set()

    def expected(self, room: str) -> SessionState | None:
        if room not in self.model:
            return None
        state, started, since = self.model[room]
        now = self.clock.now
        if state is S.LISTENING and now - started >= timedelta(milliseconds=5_000):
            del self.model[room]
            return None
        if state is S.FOLLOW_UP and now - since >= timedelta(milliseconds=1_000):
            del self.model[room]
            return None
        return state

    @rule(ms=st.integers(0, 3_000))
    def advance(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(room=ROOMS)
    def start_or_resume(self, room: str) -> None:
        state = self.expected(room)
        if state in (S.LISTENING, S.PROCESSING, S.RESPONDING):
            with pytest.raises(InvalidTransition):
                self.manager.start_or_resume_session(room)
            return
        session = self.manager.start_or_resume_session(room)
        assert session.state is S.LISTENING
        started = session.started_at
        assert started == self.clock.now or state is S.FOLLOW_UP
        self.model[room] = (S.LISTENING, started, None)

    @rule(room=ROOMS, op=st.sampled_from(sorted(OPS)))
    def step(self, room: str, op: str) -> None:
        state = self.expected(room)
        if state is not ALLOWED[op]:
            with pytest.raises(InvalidTransition):
                getattr(self.manager, op)(room)
            return
        session = getattr(self.manager, op)(room)
        assert session.state is NEXT[op]
        _, started, _ = self.model[room]
        self.model[room] = (NEXT[op], started, self.clock.now if op == "enter_follow_up" else None)

    @rule(room=ROOMS)
    def end(self, room: str) -> None:
        state = self.expected(room)
        if state is None:
            with pytest.raises(InvalidTransition):
                self.manager.end_session(room, "error")
            return
        ended = self.manager.end_session(room, "error")
        assert ended.state is S.ENDED
        self.ended_ids.add(ended.id)
        del self.model[room]

    @invariant()
    def matches_the_model(self) -> None:
        for room in ("kitchen", "hall"):
            expected = self.expected(room)
            active = self.manager.get_active_session(room)
            assert (active.state if active else None) is expected
            if active is not None:
                assert active.id not in self.ended_ids  # ended is terminal

    @invariant()
    def one_active_session_per_room_and_ended_is_terminal(self) -> None:
        rooms = [s.room_id for s in self.manager.active_sessions()]
        assert len(rooms) == len(set(rooms))
        for e in self.events:
            if e.to_state is S.ENDED:
                self.ended_ids.add(e.session_id)
        ended_then_moved = [e for e in self.events if e.session_id in self.ended_ids and e.from_state is S.ENDED]
        assert not ended_then_moved


TestSessionMachine = SessionMachine.TestCase
TestSessionMachine.settings = hsettings(max_examples=60, stateful_step_count=40, deadline=None)


def test_annotations_and_the_speaker_of_the_latest_exchange(manager: SessionManager,
                                                             events: list[SessionEvent]) -> None:
    manager.start_or_resume_session("r1")
    manager.annotate("r1", speaker_id="spk-1", conversation_id="c1")
    manager.annotate("r1", conversation_id="c2")  # None leaves the speaker as it is
    assert (manager.get_active_session("r1").speaker_id, manager.get_active_session("r1").conversation_id) == (
        "spk-1", "c2")
    transitions = len(events)
    manager.set_speaker("r1", None)  # someone not identified spoke next
    session = manager.get_active_session("r1")
    assert (session.speaker_id, session.conversation_id, session.state) == (None, "c2", SessionState.LISTENING)
    assert len(events) == transitions  # not a transition
    with pytest.raises(InvalidTransition, match="set_speaker: room r2 has no active session"):
        manager.set_speaker("r2", "spk-1")
