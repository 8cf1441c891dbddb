"""The voice pipeline with fake engines: every stage, the session's states, errors, timeouts, follow-up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from assistant.config import VoiceSettings
from assistant.errors import ServiceUnavailableError
from assistant.storage.db import Database
from assistant.voice.audio import SAMPLE_RATE, float_to_pcm, silence
from assistant.voice.messages import ControlAction, ControlMessage, StatusMessage, WakeEvent
from assistant.voice.pipeline import (
    Engines,
    Stage,
    VoicePipeline,
    strip_wake_phrase,
)
from assistant.voice.rooms import RoomStore
from assistant.voice.sessions import SessionManager, SessionState
from assistant.voice.wake import WakeDetection

WAKE_SAMPLE = 12_345  # a chunk holding this sample value "is" the wake word for the fake engine
TIMEOUT = 20.0


def tone(seconds: float, amplitude: float = 0.5) -> bytes:
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return float_to_pcm(amplitude * np.sin(2 * np.pi * 220 * t))


def wake_chunk() -> bytes:
    return np.full(1280, WAKE_SAMPLE, dtype="<i2").tobytes()


class FakeWake:
    words = ("hey_jarvis",)

    def __init__(self) -> None:
        self.resets = 0

    def process(self, pcm: bytes) -> list[WakeDetection]:
        samples = np.frombuffer(pcm, dtype="<i2")
        return [WakeDetection("hey_jarvis", 0.93, 0.0)] if (samples == WAKE_SAMPLE).any() else []

    def reset(self) -> None:
        self.resets += 1

    def close(self) -> None:
        pass


class FakeVad:
    """Speech when the 512-sample chunk is loud."""

    chunk_samples = 512

    def speech_probability(self, chunk: bytes) -> float:
        samples = np.frombuffer(chunk, dtype="<i2")
        return 1.0 if np.abs(samples).max(initial=0) > 1000 else 0.0

    def reset(self) -> None:
        pass


@dataclass
class FakeStt:
    text: str = "Hey Jarvis, what is the capital of France?"
    fail: Exception | None = None
    delay: float = 0.0
    heard: list[bytes] = field(default_factory=list)
    prompts: list[str | None] = field(default_factory=list)

    def transcribe(self, pcm: bytes, *, prompt: str | None = None):
        from assistant.voice.stt import Transcript

        self.heard.append(pcm)
        self.prompts.append(prompt)
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise self.fail
        return Transcript(self.text, "en", len(pcm) / 32000, 0.01)


class FakeTts:
    voice = "fake"

    def synthesize(self, text: str) -> bytes:
        return tone(0.25)


class FakeBus:
    connected = True

    def __init__(self) -> None:
        self.outputs: list[tuple[str, bytes]] = []
        self.wakes: list[WakeEvent] = []
        self.controls: list[ControlMessage] = []

    def publish_output(self, room_id: str, pcm: bytes) -> int:
        self.outputs.append((room_id, pcm))
        return 1

    def publish_wake(self, msg: WakeEvent) -> bool:
        self.wakes.append(msg)
        return True

    def publish_control(self, msg: ControlMessage) -> bool:
        self.controls.append(msg)
        return True


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += timedelta(milliseconds=ms)


class Led:
    def __init__(self) -> None:
        self.states: list[bool] = []

    def on(self) -> None:
        self.states.append(True)

    def off(self) -> None:
        if self.states and self.states[-1]:
            self.states.append(False)


@dataclass
class Rig:
    pipeline: VoicePipeline
    bus: FakeBus
    stt: FakeStt
    sessions: SessionManager
    clock: Clock
    room_id: str
    led: Led
    asked: list[tuple[str, str, str | None, bool]]  # (user id, text, conversation id, personal)

    def send(self, pcm: bytes, chunk: int = 2560) -> None:
        for i in range(0, len(pcm), chunk):
            self.pipeline.handle_audio(self.room_id, pcm[i:i + chunk])

    def utterance(self, wake: bool = True) -> None:
        self.send((wake_chunk() if wake else b"") + silence(0.1) + tone(1.0) + silence(1.0))

    def events(self) -> list[str]:
        return [e.kind for run in self.pipeline.runs for e in run.events]

    def state(self) -> SessionState | None:
        session = self.sessions.get_active_session(self.room_id)
        return session.state if session else None


def wait_for(check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


@pytest.fixture
def rig(tmp_path):
    settings = VoiceSettings(default_user_id="00000000-0000-4000-8000-00000000beef")
    db = Database(tmp_path / "voice.db")
    clock = Clock()
    rooms = RoomStore(db, settings.rooms, clock=clock)
    sessions = SessionManager(settings.conversation, clock=clock)
    room = rooms.create("Kitchen")
    bus, stt, led = FakeBus(), FakeStt(), Led()
    asked: list[tuple[str, str, str | None, bool]] = []

    def respond(user_id: str, text: str, conversation_id: str | None, *, personal: bool) -> tuple[str, str]:
        asked.append((user_id, text, conversation_id, personal))
        return "Paris is the capital of France.", (conversation_id or f"conv-{len(asked)}")

    engines = Engines(wake=lambda _room: FakeWake(), vad=FakeVad, stt=stt, tts=FakeTts(), words=("hey_jarvis",))
    pipeline = VoicePipeline(settings, rooms=rooms, sessions=sessions, bus=bus, engines=engines, respond=respond,
                             led=led, clock=clock)
    yield Rig(pipeline, bus, stt, sessions, clock, room.id, led, asked)
    pipeline.stop()
    db.close()


def playback_done(rig: Rig) -> None:
    rig.pipeline.handle_control(ControlMessage(rig.room_id, ControlAction.COMMAND, "playback_done", "sat"))


def test_a_whole_exchange_passes_every_state_and_stage(rig: Rig) -> None:
    states: list[str] = []
    rig.sessions.listeners.append(lambda e: states.append(e.to_state.value))
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.state() is SessionState.RESPONDING
    assert [w.word for w in rig.bus.wakes] == ["hey_jarvis"] and rig.bus.wakes[0].room_id == rig.room_id
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    assert states == ["listening", "processing", "responding", "follow_up"]
    run = rig.pipeline.runs[-1]
    kinds = [e.kind for e in run.events]
    assert kinds[:3] == ["wake", "speech_started", "speech_ended"]
    for kind in ("speaker", "transcript", "response", "audio_out", "playback_done", "run_end"):
        assert kind in kinds
    transcript = next(e for e in run.events if e.kind == "transcript")
    assert transcript.text == "what is the capital of France?"  # the wake phrase is not a question
    assert rig.asked == [("00000000-0000-4000-8000-00000000beef", "what is the capital of France?", None, False)]
    assert next(e for e in run.events if e.kind == "playback_done").source == "satellite"
    latencies = run.latencies()
    assert {Stage.STT, Stage.LLM, Stage.TTS, Stage.PUBLISH} <= set(latencies)
    assert latencies["non_llm_s"] == pytest.approx(latencies["eos_to_audio_s"] - latencies[Stage.LLM])
    assert 1.0 <= latencies["utterance_s"] <= 1.0 + 0.3 + 0.8  # pre-roll + trailing silence up to silence_ms
    assert rig.led.states == [True, False]  # lit while capturing only
    session = rig.sessions.get_active_session(rig.room_id)
    assert session.exchange_count == 1 and session.conversation_id == "conv-1"


def test_follow_up_speech_resumes_the_session_and_keeps_the_conversation(rig: Rig) -> None:
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.stt.text = "And of Germany?"
    rig.utterance(wake=False)
    wait_for(lambda: len(rig.bus.outputs) == 2)
    assert rig.asked[1][1:3] == ("And of Germany?", "conv-1")
    assert len(rig.bus.wakes) == 1  # no second wake word needed
    assert rig.sessions.get_active_session(rig.room_id).exchange_count == 2


def test_the_follow_up_window_ends_the_session(rig: Rig) -> None:
    ended = threading.Event()
    rig.sessions.listeners.append(lambda e: e.to_state is SessionState.ENDED and ended.set())
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.clock.advance(9_999)
    rig.pipeline.tick()
    assert rig.state() is SessionState.FOLLOW_UP
    rig.clock.advance(1)  # 10,000 ms: follow_up_window_ms
    rig.pipeline.tick()
    assert ended.is_set() and rig.state() is None
    # back to the wake word: speech alone starts nothing
    rig.utterance(wake=False)
    rig.send(wake_chunk())
    wait_for(lambda: len(rig.bus.wakes) == 2)


def test_no_speech_after_the_wake_word_ends_the_session(rig: Rig) -> None:
    reasons: list[str | None] = []
    rig.sessions.listeners.append(lambda e: reasons.append(e.reason))
    rig.send(wake_chunk() + silence(5.2))  # no_speech_timeout_ms 5000
    wait_for(lambda: "no_speech" in rig.events())
    wait_for(lambda: rig.state() is None)
    assert reasons[-1] == "no_speech" and rig.led.states == [True, False]


@pytest.mark.parametrize("failure", [ServiceUnavailableError("stt down"), RuntimeError("model crashed")])
def test_an_engine_error_ends_the_session_and_is_reported(rig: Rig, failure: Exception) -> None:
    rig.stt.fail = failure
    reasons: list[str | None] = []
    rig.sessions.listeners.append(lambda e: reasons.append(e.reason))
    rig.utterance()
    wait_for(lambda: "engine_error" in rig.events())
    wait_for(lambda: rig.state() is None)
    error = next(e for e in rig.pipeline.runs[-1].events if e.kind == "engine_error")
    assert error.stage == "stt" and ("stt down" in error.error or "model crashed" in error.error)
    assert reasons[-1] == "stt_error" and not rig.bus.outputs
    rig.stt.fail = None  # the room works again
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)


def test_an_engine_timeout_ends_the_session(rig: Rig) -> None:
    rig.pipeline.settings.stt.timeout_ms = 50
    rig.stt.delay = 1.0
    rig.utterance()
    wait_for(lambda: "engine_error" in rig.events())
    error = next(e for e in rig.pipeline.runs[-1].events if e.kind == "engine_error")
    assert "within 50 ms" in error.error
    wait_for(lambda: rig.state() is None)


def test_an_empty_transcript_ends_the_session(rig: Rig) -> None:
    rig.stt.text = "Hey Jarvis."
    rig.utterance()
    wait_for(lambda: "engine_error" in rig.events())
    assert "nothing was understood" in next(e for e in rig.pipeline.runs[-1].events if e.kind == "engine_error").error
    assert not rig.asked


def test_playback_falls_back_to_a_timer_without_playback_done(rig: Rig, monkeypatch) -> None:
    monkeypatch.setattr("assistant.voice.worker.PLAYBACK_GRACE_S", 0.05)
    rig.utterance()
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    assert next(e for e in rig.pipeline.runs[-1].events if e.kind == "playback_done").source == "timer"


def test_heartbeats_and_unknown_rooms(rig: Rig) -> None:
    rig.pipeline.handle_status(StatusMessage(rig.room_id, rig.clock()))
    assert rig.pipeline.rooms.get(rig.room_id).is_online
    rig.pipeline.handle_status(StatusMessage("nowhere", rig.clock()))
    rig.pipeline.handle_audio("nowhere", silence(0.1))
    assert rig.pipeline.dropped == {("status", "unknown_room"): 1, ("input", "unknown_room"): 1}
    rig.clock.advance(30_000)  # heartbeat_timeout_ms
    rig.pipeline._last_presence_check = float("-inf")
    rig.pipeline.tick()
    assert not rig.pipeline.rooms.get(rig.room_id).is_online


def test_max_session_duration_ends_a_listening_session(rig: Rig) -> None:
    rig.send(wake_chunk())
    wait_for(lambda: rig.state() is SessionState.LISTENING)
    rig.clock.advance(300_000)  # max_session_duration_ms
    rig.pipeline.tick()
    assert rig.state() is None
    wait_for(lambda: rig.led.states == [True, False])


def test_volume_is_capped_in_quiet_hours(rig: Rig) -> None:
    from assistant.voice.whisper import WhisperMode

    rig.pipeline.whisper = WhisperMode(rig.pipeline.settings.whisper_mode)
    rig.clock.now = datetime(2025, 3, 1, 23, 0, tzinfo=UTC)  # quiet 22:00-07:00 UTC
    rig.pipeline.publish_control(ControlMessage(rig.room_id, ControlAction.VOLUME, 80))
    rig.clock.now = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    rig.pipeline.publish_control(ControlMessage(rig.room_id, ControlAction.VOLUME, 80))
    assert [m.value for m in rig.bus.controls] == [30, 80]


@pytest.mark.parametrize(("text", "expected"), [
    ("Hey Jarvis, what time is it?", "what time is it?"),
    ("Jarvis. Turn on the lights.", "Turn on the lights."),
    ("What is Jarvis?", "What is Jarvis?"),
    ("  okay nabu play music", "okay nabu play music"),
])
def test_strip_wake_phrase(text: str, expected: str) -> None:
    assert strip_wake_phrase(text, ("hey_jarvis", "alexa")) == expected


def test_dropped_messages_are_a_prometheus_metric(rig: Rig) -> None:
    from assistant.observability.metrics import Metrics

    rig.pipeline.handle_audio("nowhere", silence(0.1))
    metrics = Metrics()
    assert b"voice_dropped_messages_total" not in metrics.prometheus()  # voice not running
    bus_drops = {("input", "oversized"): 2}
    metrics.voice_dropped = lambda: {**bus_drops, **rig.pipeline.dropped}
    text = metrics.prometheus().decode()
    assert 'voice_dropped_messages_total{kind="input",reason="oversized"} 2.0' in text
    assert 'voice_dropped_messages_total{kind="input",reason="unknown_room"} 1.0' in text


class FakeSpeakers:
    """A SpeakerRegistry stand-in: one enrolled profile that every utterance matches."""

    def __init__(self, match) -> None:
        self.match = match

    def list(self) -> list[object]:
        return [object()]

    def identify(self, pcm: bytes):
        return self.match


def test_an_identified_speaker_is_answered_as_their_user(rig: Rig) -> None:
    from assistant.voice.speakers import SpeakerMatch

    rig.pipeline.engines.speakers = FakeSpeakers(SpeakerMatch("spk-1", "user-alice", "Alice", 0.91, reliable=True))
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.asked[0][0] == "user-alice" and rig.asked[0][3] is True  # with Alice's memories
    assert rig.sessions.get_active_session(rig.room_id).speaker_id == "spk-1"
    speaker = next(e for e in rig.pipeline.runs[-1].events if e.kind == "speaker")
    assert (speaker.known, speaker.name, speaker.score) == (True, "Alice", 0.91)


def test_an_unknown_speaker_is_answered_as_the_default_user(rig: Rig) -> None:
    from assistant.voice.speakers import SpeakerMatch

    rig.pipeline.engines.speakers = FakeSpeakers(SpeakerMatch(None, None, None, 0.75))  # at the threshold: unknown
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.asked[0][0] == "00000000-0000-4000-8000-00000000beef" and rig.asked[0][3] is False  # no memories
    assert rig.sessions.get_active_session(rig.room_id).speaker_id is None


def test_the_loopback_bus_drives_a_started_voice_service(make_settings, make_services) -> None:
    from assistant.voice.bus import LoopbackBus

    services = make_services(make_settings(voice={}))
    voice = services.voice
    bus = LoopbackBus()
    engines = Engines(wake=lambda _room: FakeWake(), vad=FakeVad, stt=FakeStt(), tts=FakeTts(), words=("hey_jarvis",))
    pipeline = voice.start(services.chat, bus=bus, engines=engines, led=Led())
    room = voice.rooms.create("Den")
    for i in range(0, 80_000, 2560):
        bus.send_audio(room.id, (wake_chunk() + silence(0.1) + tone(1.0) + silence(1.0))[i:i + 2560])
    wait_for(lambda: voice.sessions.get_active_session(room.id) is not None
             and voice.sessions.get_active_session(room.id).state is SessionState.FOLLOW_UP)
    assert [r for r, _ in bus.outputs] == [room.id] and bus.wakes[0].room_id == room.id
    assert next(e for e in pipeline.runs[-1].events if e.kind == "playback_done").source == "satellite"
    response = next(e for e in pipeline.runs[-1].events if e.kind == "response")
    assert response.text.startswith("You said:")  # the real chat service, with the scripted model
    assert not voice.status().mqtt_connected
    voice.stop()
    assert voice.pipeline is None


# --- the transcript: its normalised form and Whisper's initial prompt ---------------------------------------


class FakeProfiles:
    """A SpeakerRegistry stand-in for the prompt: enrolled profiles with names, nobody identified."""

    def __init__(self, *names: str, fail: bool = False) -> None:
        from assistant.voice.speakers import SpeakerProfile

        self.profiles = [SpeakerProfile(f"spk-{i}", f"user-{i}", name, 3, "") for i, name in enumerate(names)]
        self.fail = fail

    def list(self) -> list[object]:
        if self.fail:
            raise RuntimeError("database is locked")
        return self.profiles

    def identify(self, pcm: bytes):
        from assistant.voice.speakers import SpeakerMatch

        return SpeakerMatch(None, None, None, 0.2)


def test_the_transcript_event_carries_the_normalised_text(rig: Rig) -> None:
    rig.stt.text = "Hey Jarvis, set a timer for ten minutes."
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    transcript = next(e for e in rig.pipeline.runs[-1].events if e.kind == "transcript")
    assert transcript.text == "set a timer for ten minutes."  # the raw text is what the model gets
    assert transcript.normalised == "set a timer for 10 minutes"
    assert rig.asked[0][1] == "set a timer for ten minutes."
    assert transcript.as_dict()["normalised"] == "set a timer for 10 minutes"


def test_a_transcript_of_only_hesitation_is_not_understood(rig: Rig) -> None:
    rig.stt.text = "Uh..."
    rig.utterance()
    wait_for(lambda: "engine_error" in rig.events())
    assert "nothing was understood" in next(e for e in rig.pipeline.runs[-1].events if e.kind == "engine_error").error
    assert not rig.asked


def test_the_prompt_holds_enrolled_names_and_the_sessions_last_exchanges(rig: Rig) -> None:
    rig.pipeline.engines.speakers = FakeProfiles("Alice", "Bob", "alice")
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.stt.prompts == ["Alice, Bob."]  # no exchange yet: the names only, deduplicated
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.stt.text = "And of Germany?"
    rig.utterance(wake=False)
    wait_for(lambda: len(rig.bus.outputs) == 2)
    assert rig.stt.prompts[1] == ("Alice, Bob. what is the capital of France? Paris is the capital of France.")
    transcript = [e for run in rig.pipeline.runs for e in run.events if e.kind == "transcript"][-1]
    assert transcript.prompt_chars == len(rig.stt.prompts[1])


def test_a_new_session_starts_without_the_last_sessions_words(rig: Rig) -> None:
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.clock.advance(10_000)  # the follow-up window ends the session
    rig.pipeline.tick()
    wait_for(lambda: rig.state() is None)
    rig.utterance()
    wait_for(lambda: len(rig.bus.outputs) == 2)
    assert rig.stt.prompts == [None, None]  # nobody enrolled, and the new session has no exchange yet


def test_the_prompt_keeps_the_most_recent_words_bounded(rig: Rig) -> None:
    for n in range(4):
        rig.stt.text = f"question number {n} " + "word " * 60
        rig.utterance(wake=n == 0)
        wait_for(lambda n=n: len(rig.bus.outputs) == n + 1)
        playback_done(rig)
        wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    last = rig.stt.prompts[-1]
    assert last is not None and len(last) <= 200
    assert last.endswith("Paris is the capital of France.") and "question number 0" not in last


def test_no_prompt_when_prompt_context_is_off(rig: Rig) -> None:
    rig.pipeline.settings.stt.prompt_context = False
    rig.pipeline.engines.speakers = FakeProfiles("Alice")
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.stt.prompts == [None]
    assert next(e for e in rig.pipeline.runs[-1].events if e.kind == "transcript").prompt_chars == 0


def test_a_failing_speaker_store_only_drops_the_names_from_the_prompt(rig: Rig, caplog) -> None:
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.pipeline.engines.speakers = FakeProfiles("Alice", fail=True)
    worker = rig.pipeline._workers[rig.room_id]
    assert worker._stt_prompt(True) == "what is the capital of France? Paris is the capital of France."
    assert "speaker names for the STT prompt unavailable" in caplog.text


def test_someone_else_in_the_follow_up_gets_no_context_in_the_prompt(rig: Rig) -> None:
    from assistant.voice.speakers import SpeakerMatch

    speakers = FakeSpeakers(SpeakerMatch("spk-1", "user-alice", "Alice", 0.91, reliable=True))
    rig.pipeline.engines.speakers = speakers
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    speakers.match = SpeakerMatch(None, None, None, 0.3)  # not Alice: her exchange is not their context
    rig.stt.text = "And of Germany?"
    rig.utterance(wake=False)
    wait_for(lambda: len(rig.bus.outputs) == 2)
    assert rig.stt.prompts == [None, None]  # the fake's profile has no name, and the context is Alice's
