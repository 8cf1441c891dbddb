"""The satellite simulator with a fake bus and a fake clock: chunking, real-time pacing, reply assembly,
playback_done, heartbeats and the event log. The real-broker test is tests/integration/voice/."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from assistant.config import MqttSettings
from assistant.voice.messages import ControlAction, ControlMessage, OutputFrame, StatusMessage, WakeEvent, output_frames
from assistant.voice.satellite import (
    PLAYBACK_DONE,
    Satellite,
    SatelliteError,
    SatelliteEvent,
    chunk_pcm,
    pcm_bytes,
    send_offsets,
)

ROOM = "kitchen"
SECOND = 32_000  # bytes of PCM16 16 kHz mono


class FakeClock:
    def __init__(self, now: float = 100.0):
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FakeBus:
    """Records what the satellite publishes; ``server`` (if set) is called after each audio chunk."""

    def __init__(self, settings: MqttSettings, *, role: str, origin: str, on_output: Callable, on_wake: Callable,
                 on_control: Callable, clock: FakeClock, connects: bool = True, publish_cost: float = 0.0):
        self.settings, self.role, self.origin = settings, role, origin
        self.on_output, self.on_wake, self.on_control = on_output, on_wake, on_control
        self.clock, self.connects, self.publish_cost = clock, connects, publish_cost
        self.audio: list[tuple[float, str, bytes]] = []
        self.status: list[StatusMessage] = []
        self.control: list[ControlMessage] = []
        self.started = self.stopped = 0
        self.server: Callable[[FakeBus], None] | None = None

    def start(self) -> None:
        self.started += 1

    def stop(self) -> None:
        self.stopped += 1

    def wait_connected(self, timeout: float) -> bool:
        return self.connects

    def publish_audio(self, room_id: str, pcm: bytes) -> bool:
        self.audio.append((self.clock(), room_id, pcm))
        self.clock.now += self.publish_cost
        if self.server is not None:
            self.server(self)
        return True

    def publish_status(self, msg: StatusMessage) -> bool:
        self.status.append(msg)
        return True

    def publish_control(self, msg: ControlMessage) -> bool:
        self.control.append(msg)
        return True

    def reply(self, pcm: bytes, stream_id: int, room_id: str = ROOM, chunk: int = 16_000) -> None:
        for frame in output_frames(pcm, stream_id, chunk):
            self.on_output(room_id, frame)


def make(clock: FakeClock | None = None, *, connects: bool = True, publish_cost: float = 0.0,
         **kwargs) -> tuple[Satellite, FakeBus, FakeClock]:
    clock = clock or FakeClock()
    buses: list[FakeBus] = []

    def factory(settings: MqttSettings, **kw) -> FakeBus:
        buses.append(FakeBus(settings, clock=clock, connects=connects, publish_cost=publish_cost, **kw))
        return buses[0]

    kwargs.setdefault("heartbeat_secs", 3600.0)
    satellite = Satellite(ROOM, MqttSettings(port=18830), clock=clock, sleep=clock.sleep, bus_factory=factory,
                          **kwargs)
    return satellite, buses[0], clock


def tone(seconds: float) -> bytes:
    return bytes(range(1, 201)) * int(seconds * SECOND / 200)


# --- chunking and pacing maths ------------------------------------------------------------------------


def test_chunk_sizes() -> None:
    assert pcm_bytes(40) == 1280
    assert pcm_bytes(1500) == 48_000
    assert pcm_bytes(1) == 32
    chunks = chunk_pcm(bytes(3000), 40)
    assert [len(c) for c in chunks] == [1280, 1280, 440]
    assert chunk_pcm(b"", 40) == []


def test_send_offsets_are_when_each_chunk_was_recorded() -> None:
    chunks = chunk_pcm(bytes(3000), 40)
    assert send_offsets(chunks) == pytest.approx([0.04, 0.08, 3000 / SECOND])


def test_realtime_stream_is_paced_and_ends_with_tail_silence() -> None:
    satellite, bus, clock = make(tail_silence_ms=1500, chunk_ms=40)
    pcm = tone(1.0)
    satellite.stream(pcm)
    sent = b"".join(chunk for _t, _room, chunk in bus.audio)
    assert sent == pcm + bytes(48_000)
    assert len(bus.audio) == 63  # 2.5 s / 40 ms = 62.5
    assert {room for _t, room, _c in bus.audio} == {ROOM}
    assert [len(c) for _t, _r, c in bus.audio[:-1]] == [1280] * 62
    assert len(bus.audio[-1][2]) == 640
    times = [t - 100.0 for t, _r, _c in bus.audio]
    assert times == pytest.approx([0.04 * (i + 1) for i in range(62)] + [2.5])
    assert sum(clock.sleeps) == pytest.approx(2.5)


def test_pacing_catches_up_without_drift_when_publishing_is_slow() -> None:
    # each publish costs 60 ms, more than a 40 ms chunk: no sleeping until the schedule is ahead again
    satellite, bus, clock = make(tail_silence_ms=0, chunk_ms=40, publish_cost=0.06)
    satellite.stream(tone(0.2))  # 5 chunks due at 0.04 .. 0.20
    times = [t - 100.0 for t, _r, _c in bus.audio]
    assert times == pytest.approx([0.04, 0.10, 0.16, 0.22, 0.28])
    assert clock.sleeps == pytest.approx([0.04])


def test_no_realtime_sends_without_sleeping() -> None:
    satellite, bus, clock = make(realtime=False, tail_silence_ms=100, chunk_ms=100)
    satellite.stream(tone(0.5))
    assert clock.sleeps == []
    assert len(bus.audio) == 6
    assert b"".join(c for _t, _r, c in bus.audio).endswith(bytes(3200))


def test_odd_pcm_is_refused() -> None:
    satellite, _bus, _clock = make()
    with pytest.raises(ValueError, match="even number of bytes"):
        satellite.stream(b"\x00\x01\x02")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"chunk_ms": 0}, "chunk_ms must be 1..2000"),
    ({"chunk_ms": 2001}, "chunk_ms must be 1..2000"),
    ({"heartbeat_secs": 0}, "heartbeat_secs must be positive"),
    ({"tail_silence_ms": -1}, "tail_silence_ms must be 0 or more"),
])
def test_bad_arguments(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make(**kwargs)


def test_bad_room_id() -> None:
    with pytest.raises(ValueError, match="room_id must be"):
        Satellite("kitchen/+", MqttSettings())


def test_bus_role_and_origin() -> None:
    satellite, bus, _clock = make()
    assert (bus.role, bus.origin) == ("satellite", "satellite-kitchen")
    assert satellite.origin == "satellite-kitchen"
    assert len(Satellite("r" * 64, MqttSettings()).origin) == 64


# --- replies ----------------------------------------------------------------------------------------------


def test_reply_frames_are_assembled_until_the_last() -> None:
    satellite, bus, _clock = make()
    reply = tone(1.2)
    frames = output_frames(reply, 7, 16_000)
    assert len(frames) == 3
    for frame in frames[:-1]:
        bus.on_output(ROOM, frame)
    assert satellite.wait_reply(0.01) is None
    bus.on_output(ROOM, frames[-1])
    assert satellite.wait_reply(0.01) == reply
    kinds = [(e.kind, e.detail) for e in satellite.events]
    assert kinds == [("output_start", "stream 7"), ("output_end", "stream 7 1.20s")]


def test_each_stream_id_is_a_new_reply_and_other_rooms_are_ignored() -> None:
    satellite, bus, _clock = make()
    bus.reply(tone(0.5), 1, room_id="hall")
    bus.reply(tone(0.5), 1)
    bus.reply(tone(0.25), 2)
    assert satellite.wait_reply(0.01) == tone(0.5)
    assert satellite.wait_reply(0.01) == tone(0.25)
    assert satellite.wait_reply(0.01) is None


def test_a_new_stream_replaces_an_unfinished_one_and_redelivery_is_ignored() -> None:
    satellite, bus, _clock = make()
    first = output_frames(tone(1.0), 3, 16_000)
    bus.on_output(ROOM, first[0])
    bus.reply(tone(0.5), 4)
    bus.on_output(ROOM, OutputFrame(4, 0, b"\x01\x00", last=True))  # a QoS 1 duplicate after completion
    assert satellite.wait_reply(0.01) == tone(0.5)
    assert satellite.wait_reply(0.01) is None
    assert [e.kind for e in satellite.events] == ["output_start", "output_start", "output_end"]


def test_empty_last_frame() -> None:
    satellite, bus, _clock = make()
    bus.on_output(ROOM, OutputFrame(9, 0, tone(0.1)))
    bus.on_output(ROOM, OutputFrame(9, 1, b"", last=True))
    assert satellite.wait_reply(0.01) == tone(0.1)


def test_wake_and_control_events() -> None:
    satellite, bus, _clock = make()
    bus.on_wake(WakeEvent(ROOM, "hey_jarvis", 0.912))
    bus.on_wake(WakeEvent("hall", "hey_jarvis", 0.9))
    bus.on_control(ControlMessage(ROOM, ControlAction.VOLUME, 30))
    bus.on_control(ControlMessage(ROOM, ControlAction.MUTE))
    assert [(e.kind, e.detail) for e in satellite.events] == [
        ("wake", "hey_jarvis 0.91"), ("control", "volume 30 from server"), ("control", "mute from server")]


# --- a whole run --------------------------------------------------------------------------------------------


def serve_one_reply(reply: bytes) -> Callable[[FakeBus], None]:
    """A fake server: a wake event after the first chunk, the reply after the last one."""

    def server(bus: FakeBus) -> None:
        if len(bus.audio) == 1:
            bus.on_wake(WakeEvent(ROOM, "hey_jarvis", 0.91))
        if len(bus.audio) == 12:  # 1.0 s of speech + 0.2 s of silence in 100 ms chunks
            bus.reply(reply, 1)

    return server


def test_run_streams_plays_the_reply_and_sends_playback_done() -> None:
    seen: list[SatelliteEvent] = []
    satellite, bus, clock = make(on_event=seen.append, tail_silence_ms=200, chunk_ms=100)
    reply = tone(1.5)
    bus.server = serve_one_reply(reply)
    result = satellite.run(tone(1.0), reply_timeout=0.01)
    assert result.replies == 1
    assert result.reply_pcm == reply
    assert [e.kind for e in result.events] == ["connected", "heartbeat", "stream_start", "wake", "output_start",
                                               "output_end", "stream_end", "playback_done"]
    assert seen == result.events
    assert [e.at_s for e in result.events] == sorted(e.at_s for e in result.events)
    assert result.events[-1].at_s == pytest.approx(1.2 + 1.5)  # streamed 1.2 s, then played 1.5 s
    (done,) = bus.control
    assert (done.room_id, done.action, done.value, done.origin) == (ROOM, ControlAction.COMMAND, PLAYBACK_DONE,
                                                                    "satellite-kitchen")
    assert bus.status[0].room_id == ROOM
    assert (bus.started, bus.stopped) == (1, 1)
    assert clock.sleeps[-1] == pytest.approx(1.5)


def test_run_without_a_reply() -> None:
    satellite, bus, _clock = make(realtime=False)
    result = satellite.run(tone(0.5), reply_timeout=0.01)
    assert result.replies == 0
    assert result.reply_pcm == b""
    assert "playback_done" not in [e.kind for e in result.events]
    assert bus.control == []
    assert bus.stopped == 1


def test_run_lingers_for_a_second_reply() -> None:
    satellite, bus, _clock = make(realtime=False)

    def server(b: FakeBus) -> None:
        if len(b.audio) == 1:
            b.reply(tone(0.5), 1)
            b.reply(tone(0.25), 2)

    bus.server = server
    result = satellite.run(tone(0.2), reply_timeout=0.01, linger_secs=0.2)
    assert result.replies == 2
    assert result.reply_pcm == tone(0.5) + tone(0.25)
    assert [e.kind for e in result.events].count("playback_done") == 2
    assert len(bus.control) == 2


def test_connection_failure_is_reported_and_stops() -> None:
    satellite, bus, _clock = make(connects=False, connect_timeout=0.5)
    with pytest.raises(SatelliteError, match="could not connect to the MQTT broker at 127.0.0.1:18830 within 0.5 s"):
        satellite.run(tone(0.2))
    assert bus.audio == []
    assert bus.stopped == 1


def test_heartbeats_repeat_until_stop() -> None:
    satellite, bus, _clock = make(heartbeat_secs=0.01)
    satellite.start()
    deadline = time.monotonic() + 30
    while len(bus.status) < 3:
        assert time.monotonic() < deadline, "heartbeats did not repeat"
        time.sleep(0.01)
    satellite.stop()
    count = len(bus.status)
    assert not [t for t in threading.enumerate() if t.name == "heartbeat-kitchen"]
    assert len(bus.status) == count
    assert all(s.name == "satellite-kitchen" and s.uptime_s is not None for s in bus.status)
    satellite.stop()  # twice is fine
    assert bus.stopped == 1
