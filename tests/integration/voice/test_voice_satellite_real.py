"""The satellite simulator against a real mosquitto, with a plain server-role VoiceBus playing the server:
the library (real-time streaming, heartbeats, a follow-up reply) and the ``assistant satellite`` command in
a subprocess (any-rate WAV input, --out, credentials, no reply, broker unreachable)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import soundfile

from assistant.config import MqttSettings
from assistant.voice.audio import decode_audio, write_wav
from assistant.voice.bus import VoiceBus
from assistant.voice.messages import ControlAction, ControlMessage, StatusMessage, WakeEvent
from assistant.voice.satellite import PLAYBACK_DONE, Satellite, SatelliteEvent, pcm_bytes
from tests.integration.voice.mosquitto import Mosquitto, mosquitto, mosquitto_factory  # noqa: F401

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
WAKEWORD = ROOT.parent / "shared" / "benchmarks" / "wakeword"
HEY_MYCROFT = WAKEWORD / "hey_mycroft_test.wav"  # 0.95 s, 16 kHz mono
ROOM = "kitchen"
TIMEOUT = 30.0
ASSISTANT = [sys.executable, "-m", "api.cli"]


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def tone(seconds: float, hz: float = 440.0) -> bytes:
    t = np.arange(int(seconds * 16_000)) / 16_000
    return (0.3 * np.sin(2 * np.pi * hz * t) * 32767).astype("<i2").tobytes()


class FakeServer:
    """Collects a room's input audio; sends a wake event on the first chunk and ``reply`` once ``expected``
    bytes have arrived; sends ``follow_up`` after the first playback_done."""

    def __init__(self, settings: MqttSettings, *, expected: int, reply: bytes | None,
                 follow_up: bytes | None = None):
        self.expected, self.reply, self.follow_up = expected, reply, follow_up
        self.audio = bytearray()
        self.status: list[StatusMessage] = []
        self.control: list[ControlMessage] = []
        self.lock = threading.Lock()
        self.bus = VoiceBus(settings, role="server", on_audio=self._on_audio, on_status=self.status.append,
                            on_control=self._on_control)
        self.bus.start()
        assert self.bus.wait_connected(TIMEOUT)

    def _on_audio(self, room_id: str, pcm: bytes) -> None:
        assert room_id == ROOM
        with self.lock:
            if not self.audio:
                self.bus.publish_wake(WakeEvent(ROOM, "hey_jarvis", 0.91))
            self.audio += pcm
            complete = len(self.audio) == self.expected
        if complete and self.reply is not None:
            self.bus.publish_output(ROOM, self.reply)

    def _on_control(self, message: ControlMessage) -> None:
        self.control.append(message)
        if message.value == PLAYBACK_DONE and len(self.control) == 1 and self.follow_up is not None:
            self.bus.publish_output(ROOM, self.follow_up)

    def close(self) -> None:
        self.bus.stop()


@pytest.fixture
def make_server(mosquitto: Mosquitto) -> Iterator[Callable[..., FakeServer]]:  # noqa: F811
    made: list[FakeServer] = []

    def make(settings: MqttSettings | None = None, **kwargs) -> FakeServer:
        made.append(FakeServer(settings or MqttSettings(host=mosquitto.host, port=mosquitto.port), **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.close()


def without_heartbeats(events: list[SatelliteEvent]) -> list[str]:
    return [e.kind for e in events if e.kind != "heartbeat"]


def assert_causal_order(kinds: list[str]) -> None:
    """The orders that causes guarantee: the wake event answers the first chunk, the reply answers the whole
    stream, playback follows the reply. (stream_end and the reply's arrival race each other.)"""
    assert sorted(kinds) == sorted(["connected", "stream_start", "wake", "stream_end", "output_start", "output_end",
                                    "playback_done"]), kinds
    at = {kind: kinds.index(kind) for kind in kinds}
    assert at["connected"] < at["stream_start"] < at["wake"]
    assert at["stream_start"] < at["output_start"] < at["output_end"] < at["playback_done"]
    assert at["stream_end"] < at["playback_done"] == len(kinds) - 1


def test_satellite_streams_in_real_time_and_plays_the_reply(mosquitto: Mosquitto,  # noqa: F811
                                                            make_server: Callable[..., FakeServer]) -> None:
    pcm = decode_audio(HEY_MYCROFT)
    tail = pcm_bytes(1500)
    reply = tone(1.3)
    server = make_server(expected=len(pcm) + tail, reply=reply)
    seen: list[SatelliteEvent] = []
    satellite = Satellite(ROOM, MqttSettings(host=mosquitto.host, port=mosquitto.port), heartbeat_secs=0.5,
                          on_event=seen.append)
    result = satellite.run(pcm, reply_timeout=TIMEOUT)

    assert bytes(server.audio) == pcm + bytes(tail)  # the recording, then 1.5 s of silence for the VAD
    assert result.replies == 1
    assert result.reply_pcm == reply
    assert_causal_order(without_heartbeats(result.events))
    assert result.events == seen
    assert [e.at_s for e in result.events] == sorted(e.at_s for e in result.events)
    wake = next(e for e in result.events if e.kind == "wake")
    assert wake.detail == "hey_jarvis 0.91"
    # heartbeats from the start until the end: at least the first and one per 0.5 s of a 2.45 s stream
    beats = [e for e in result.events if e.kind == "heartbeat"]
    assert len(beats) >= 3
    assert result.events[1].kind == "heartbeat"
    eventually(lambda: len(server.control) == 1)
    eventually(lambda: len(server.status) >= len(beats))
    assert all(s.room_id == ROOM and s.name == "satellite-kitchen" for s in server.status)
    (done,) = server.control
    assert (done.room_id, done.action, done.value, done.origin) == (ROOM, ControlAction.COMMAND, PLAYBACK_DONE,
                                                                    "satellite-kitchen")


def test_a_follow_up_reply_is_a_second_stream(mosquitto: Mosquitto,  # noqa: F811
                                              make_server: Callable[..., FakeServer]) -> None:
    pcm = tone(0.5, 220)
    server = make_server(expected=len(pcm) + pcm_bytes(1500), reply=tone(0.6), follow_up=tone(0.4, 660))
    with Satellite(ROOM, MqttSettings(host=mosquitto.host, port=mosquitto.port), realtime=False) as satellite:
        satellite.stream(pcm)
        first = satellite.wait_reply(TIMEOUT)
        assert first == tone(0.6)
        satellite.play(first)  # its playback_done makes the server send the follow-up
        second = satellite.wait_reply(TIMEOUT)
        assert second == tone(0.4, 660)
        satellite.play(second)
    kinds = without_heartbeats(satellite.events)
    assert kinds[-6:] == ["output_start", "output_end", "playback_done"] * 2
    assert [e.detail for e in satellite.events if e.kind == "output_start"] == ["stream 1", "stream 2"]
    eventually(lambda: [m.value for m in server.control] == [PLAYBACK_DONE] * 2)


# --- the command, in a subprocess -------------------------------------------------------------------------


def assistant(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ASSISTANT, *args], check=False, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if not k.startswith("ASSISTANT_")})


def stereo_48k(path: Path) -> Path:
    """hey_mycroft as 48 kHz stereo: the command must resample and downmix it."""
    samples, rate = soundfile.read(HEY_MYCROFT, dtype="float32")
    assert rate == 16_000
    upsampled = np.repeat(samples, 3)
    soundfile.write(path, np.stack([upsampled, upsampled * 0.5], axis=1), 48_000, subtype="PCM_16")
    return path


def test_command_streams_prints_events_and_saves_the_reply(tmp_path: Path, mosquitto: Mosquitto,  # noqa: F811
                                                           make_server: Callable[..., FakeServer]) -> None:
    wav = stereo_48k(tmp_path / "hey.wav")
    pcm = decode_audio(wav)
    reply = tone(0.8)
    server = make_server(expected=len(pcm) + pcm_bytes(1500), reply=reply)
    out = tmp_path / "reply.wav"
    result = assistant("satellite", "--room", ROOM, "--wav", str(wav), "--broker", f"127.0.0.1:{mosquitto.port}",
                       "--out", str(out), "--no-realtime", "--timeout", str(TIMEOUT))
    assert result.returncode == 0, result.stdout + result.stderr
    assert bytes(server.audio) == pcm + bytes(pcm_bytes(1500))
    lines = result.stdout.splitlines()
    assert any(line.startswith("+") and line.endswith("s wake hey_jarvis 0.91") for line in lines), lines
    assert_causal_order([line.split()[1] for line in lines if line.startswith("+") and " heartbeat " not in line])
    assert f"reply: 0.80 s, saved to {out}" in result.stdout
    saved, rate = soundfile.read(out, dtype="int16")
    assert rate == 16_000
    assert saved.tobytes() == reply
    eventually(lambda: [m.value for m in server.control] == [PLAYBACK_DONE])


def test_command_with_credentials_and_prefix(tmp_path: Path, mosquitto_factory,  # noqa: F811
                                             make_server: Callable[..., FakeServer]) -> None:
    broker = mosquitto_factory(users={"sat": "s3cret", "srv": "srv-pw"})
    wav = write_wav(tmp_path / "short.wav", tone(0.3))
    settings = MqttSettings(host=broker.host, port=broker.port, username="srv", password="srv-pw", topic_prefix="home")
    server = make_server(settings, expected=len(tone(0.3)) + pcm_bytes(1500), reply=tone(0.2))
    common = ["satellite", "--room", ROOM, "--wav", str(wav), "--broker", f"{broker.host}:{broker.port}",
              "--prefix", "home", "--no-realtime", "--timeout", str(TIMEOUT)]
    ok = assistant(*common, "--username", "sat", "--password", "s3cret")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "reply: 0.20 s" in ok.stdout
    assert len(server.audio) == len(tone(0.3)) + pcm_bytes(1500)
    refused = assistant(*common, "--username", "sat", "--password", "wrong", "--connect-timeout", "3")
    assert refused.returncode == 1
    assert f"could not connect to the MQTT broker at {broker.host}:{broker.port} within 3 s" in refused.stderr


def test_command_without_a_reply_exits_1(tmp_path: Path, mosquitto: Mosquitto,  # noqa: F811
                                         make_server: Callable[..., FakeServer]) -> None:
    wav = write_wav(tmp_path / "short.wav", tone(0.3))
    server = make_server(expected=len(tone(0.3)) + pcm_bytes(1500), reply=None)
    result = assistant("satellite", "--room", ROOM, "--wav", str(wav), "--broker", f"127.0.0.1:{mosquitto.port}",
                       "--no-realtime", "--timeout", "3")
    assert result.returncode == 1
    assert "no reply within 3 s after streaming" in result.stderr
    assert "wake hey_jarvis 0.91" in result.stdout
    eventually(lambda: len(server.audio) == len(tone(0.3)) + pcm_bytes(1500))
