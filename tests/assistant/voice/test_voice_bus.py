"""The voice bus without a broker: topics, payload formats, and dispatch of (bad) messages."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

import paho.mqtt.client as mqtt
import pytest

from assistant.config import MqttSettings
from assistant.voice.bus import VoiceBus, _refusal, probe_broker, tls_context
from assistant.voice.messages import (
    ControlAction,
    ControlMessage,
    MessageError,
    OutputFrame,
    StatusMessage,
    TopicKind,
    Topics,
    WakeEvent,
    output_frames,
)

AT = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def deliver(bus: VoiceBus, topic: str, payload: bytes) -> None:
    message = mqtt.MQTTMessage(topic=topic.encode())
    message.payload = payload
    bus._handle_message(bus._client, None, message)


def test_topics_follow_the_spec_table_under_a_configurable_prefix():
    t = Topics("home/voice")
    assert t.topic(TopicKind.INPUT, "kitchen") == "home/voice/audio/kitchen/input"
    assert t.topic(TopicKind.OUTPUT, "kitchen") == "home/voice/audio/kitchen/output"
    assert t.topic(TopicKind.WAKE, "kitchen") == "home/voice/wake/kitchen"
    assert t.topic(TopicKind.CONTROL, "kitchen") == "home/voice/control/kitchen"
    assert t.topic(TopicKind.STATUS, "kitchen") == "home/voice/status/kitchen"
    assert t.pattern(TopicKind.INPUT) == "home/voice/audio/+/input"
    assert t.parse("home/voice/status/kitchen") == (TopicKind.STATUS, "kitchen")
    assert t.parse("home/voice/audio/kitchen/input") == (TopicKind.INPUT, "kitchen")
    assert t.parse("other/status/kitchen") is None
    assert t.parse("home/voice/audio/kitchen/other") is None
    with pytest.raises(MessageError):
        t.topic(TopicKind.WAKE, "a/b")
    with pytest.raises(ValueError):
        Topics("bad/#")


def test_json_messages_round_trip_with_version():
    wake = WakeEvent("kitchen", "hey_jarvis", 0.91, AT)
    assert json.loads(wake.to_bytes()) == {"v": 1, "room_id": "kitchen", "word": "hey_jarvis", "score": 0.91,
                                           "at": "2025-03-01T12:00:00.000Z"}
    assert WakeEvent.from_bytes(wake.to_bytes()) == wake
    control = ControlMessage("kitchen", ControlAction.VOLUME, 30, "server", AT)
    assert ControlMessage.from_bytes(control.to_bytes()) == control
    mute = ControlMessage("kitchen", ControlAction.MUTE, origin="sat-1", at=AT)
    assert "value" not in json.loads(mute.to_bytes())
    assert ControlMessage.from_bytes(mute.to_bytes()) == mute
    status = StatusMessage("kitchen", AT, name="Kitchen", uptime_s=12.5, extra={"rssi": -60})
    assert StatusMessage.from_bytes(status.to_bytes()) == status


@pytest.mark.parametrize("payload", [
    b"not json", b"[1]", b'{"v": 2, "room_id": "k", "word": "w", "score": 0.5, "at": "2025-03-01T12:00:00Z"}',
    b'{"v": 1, "room_id": "k", "word": "w", "score": 1.5, "at": "2025-03-01T12:00:00Z"}',
    b'{"v": 1, "room_id": "k", "word": "w", "score": 0.5, "at": "2025-03-01T12:00:00"}',
    b'{"v": 1, "room_id": "k", "word": "w", "score": 0.5}',
    b'{"v": 1, "room_id": "k", "word": "w", "score": 0.5, "at": "2025-03-01T12:00:00Z", "x": 1}',
    b'{"v": 1, "room_id": "a/b", "word": "w", "score": 0.5, "at": "2025-03-01T12:00:00Z"}',
])
def test_wake_parsing_is_strict(payload):
    with pytest.raises(MessageError):
        WakeEvent.from_bytes(payload)


@pytest.mark.parametrize("action,value", [("volume", 101), ("volume", True), ("volume", "5"), ("mute", 1),
                                          ("command", ""), ("explode", None)])
def test_control_values_are_checked_per_action(action, value):
    payload = {"v": 1, "room_id": "k", "action": action, "value": value, "at": "2025-03-01T12:00:00Z",
               "origin": "sat"}
    with pytest.raises(MessageError):
        ControlMessage.from_bytes(json.dumps(payload).encode())


def test_output_frames_carry_a_header_and_flag_the_last():
    pcm = bytes(range(200)) * 5  # 1000 bytes
    frames = output_frames(pcm, 7, 301)
    assert [len(f.pcm) for f in frames] == [300, 300, 300, 100]
    assert [f.last for f in frames] == [False, False, False, True]
    assert [f.seq for f in frames] == [0, 1, 2, 3]
    assert b"".join(OutputFrame.from_bytes(f.to_bytes()).pcm for f in frames) == pcm
    assert OutputFrame.from_bytes(frames[-1].to_bytes()).last
    assert output_frames(b"", 1, 100) == [OutputFrame(1, 0, b"", last=True)]
    for bad in (b"AO", b"XX" + bytes(10), OutputFrame(1, 0, b"abc").to_bytes()):
        with pytest.raises(MessageError):
            OutputFrame.from_bytes(bad)


def test_client_honours_settings():
    settings = MqttSettings(keep_alive_secs=17, max_inflight=5, username="u", password="p")
    bus = VoiceBus(settings)
    assert bus._client._max_inflight_messages == 5
    assert bus._client._username == b"u"
    assert bus.connected is False


def test_dispatch_calls_typed_callbacks_and_counts_drops():
    seen: list[object] = []
    bus = VoiceBus(MqttSettings(), max_bytes={TopicKind.INPUT: 8},
                   on_audio=lambda room, pcm: seen.append((room, pcm)),
                   on_control=seen.append, on_status=seen.append)
    deliver(bus, "assistant/audio/kitchen/input", b"\x01\x00\x02\x00")
    status = StatusMessage("kitchen", AT)
    deliver(bus, "assistant/status/kitchen", status.to_bytes())
    control = ControlMessage("kitchen", ControlAction.COMMAND, "stop", "sat-1", AT)
    deliver(bus, "assistant/control/kitchen", control.to_bytes())
    deliver(bus, "assistant/control/kitchen", ControlMessage("kitchen", ControlAction.MUTE, at=AT).to_bytes())
    assert seen == [("kitchen", b"\x01\x00\x02\x00"), status, control]  # own "server" echo ignored

    deliver(bus, "assistant/audio/kitchen/input", bytes(10))
    deliver(bus, "assistant/audio/kitchen/input", b"\x01")
    deliver(bus, "assistant/status/kitchen", b"{")
    deliver(bus, "assistant/status/hall", status.to_bytes())
    deliver(bus, "assistant/nothing/kitchen", b"")
    assert bus.dropped == {("input", "oversized"): 1, ("input", "odd_length"): 1,
                           ("status", "malformed_json"): 1, ("status", "room_mismatch"): 1,
                           ("unknown", "unknown_topic"): 1}
    assert len(seen) == 3


def test_a_failing_callback_is_counted_not_raised():
    def boom(_msg):
        raise RuntimeError("bug")

    bus = VoiceBus(MqttSettings(), on_status=boom)
    deliver(bus, "assistant/status/kitchen", StatusMessage("kitchen", AT).to_bytes())
    assert bus.dropped == {("status", "callback_error"): 1}


# --- credentials and TLS settings (the real broker: tests/integration/voice/test_voice_bus_tls_real.py) ------


@pytest.mark.parametrize(("fields", "error"), [
    ({"ca_file": "/x.pem"}, "need tls = true"),
    ({"tls_insecure": True}, "need tls = true"),
    ({"tls": True, "key_file": "/k.pem"}, "key_file needs cert_file"),
    ({"password": "secret"}, "password needs username"),
])
def test_inconsistent_mqtt_settings_are_refused(fields: dict, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        MqttSettings(**fields)


def test_credentials_and_tls_reach_the_client() -> None:
    assert tls_context(MqttSettings()) is None
    secure = tls_context(MqttSettings(tls=True))
    assert secure is not None and secure.check_hostname and secure.verify_mode.name == "CERT_REQUIRED"
    assert tls_context(MqttSettings(tls=True, tls_insecure=True)).check_hostname is False  # type: ignore[union-attr]
    bus = VoiceBus(MqttSettings(username="voice", password="s3cret", tls=True))
    assert (bus._client._username, bus._client._password) == (b"voice", b"s3cret")
    assert bus._client._ssl_context is not None and bus.last_error is None


def test_a_refusal_and_an_unreachable_broker_are_named() -> None:
    assert _refusal("Not authorized").endswith("Not authorized; check voice.mqtt.username and password")
    assert _refusal("Server unavailable") == "the broker refused the connection: Server unavailable"
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert "cannot be reached" in (probe_broker(MqttSettings(port=port), timeout=2) or "")
