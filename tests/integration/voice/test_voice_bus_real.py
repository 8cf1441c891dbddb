"""The voice bus against a real mosquitto: QoS per topic, drops, reconnection, credentials."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from assistant.config import MqttSettings
from assistant.voice.bus import VoiceBus
from assistant.voice.messages import ControlAction, ControlMessage, OutputFrame, StatusMessage, TopicKind, WakeEvent
from tests.integration.voice.mosquitto import Mosquitto, mosquitto, mosquitto_factory  # noqa: F401

pytestmark = pytest.mark.integration

AT = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
TIMEOUT = 30.0


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


class Raw:
    """A plain paho client that records every message (subscribed at QoS 2, so the publisher's QoS shows)."""

    def __init__(self, broker: Mosquitto, **auth: str):
        self.messages: list[tuple[str, int, bytes]] = []
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        if auth:
            self.client.username_pw_set(auth["username"], auth["password"])
        subscribed = threading.Event()
        self.client.on_message = lambda _c, _u, m: self.messages.append((m.topic, m.qos, bytes(m.payload)))
        self.client.on_subscribe = lambda *_a: subscribed.set()
        self.client.on_connect = lambda c, *_a: c.subscribe("#", qos=2)
        self.client.connect(broker.host, broker.port)
        self.client.loop_start()
        assert subscribed.wait(TIMEOUT)

    def publish(self, topic: str, payload: bytes, qos: int = 0) -> None:
        self.client.publish(topic, payload, qos=qos).wait_for_publish(TIMEOUT)

    def on(self, topic: str) -> list[tuple[int, bytes]]:
        return [(qos, payload) for t, qos, payload in self.messages if t == topic]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def raw(mosquitto: Mosquitto) -> Iterator[Raw]:  # noqa: F811
    client = Raw(mosquitto)
    yield client
    client.close()


def settings_for(broker: Mosquitto, **extra) -> MqttSettings:
    return MqttSettings(host=broker.host, port=broker.port, topic_prefix="home", keep_alive_secs=5, **extra)


def started(bus: VoiceBus) -> VoiceBus:
    bus.start()
    assert bus.wait_connected(TIMEOUT)
    return bus


def test_each_topic_kind_round_trips_with_its_qos(mosquitto: Mosquitto, raw: Raw):  # noqa: F811
    got: dict[str, list] = {"audio": [], "status": [], "control": [], "wake": [], "output": [], "sat_control": []}
    server = started(VoiceBus(settings_for(mosquitto), on_audio=lambda r, p: got["audio"].append((r, p)),
                              on_status=got["status"].append, on_control=got["control"].append))
    satellite = started(VoiceBus(settings_for(mosquitto), role="satellite", origin="sat-kitchen",
                                 on_wake=got["wake"].append, on_control=got["sat_control"].append,
                                 on_output=lambda r, f: got["output"].append((r, f))))
    try:
        pcm = bytes(range(256)) * 4
        satellite.publish_audio("kitchen", pcm)
        status = StatusMessage("kitchen", AT, name="Kitchen", uptime_s=3.0)
        satellite.publish_status(status)
        from_satellite = ControlMessage("kitchen", ControlAction.COMMAND, "stop", "sat-kitchen", AT)
        satellite.publish_control(from_satellite)
        wake = WakeEvent("kitchen", "hey_jarvis", 0.8, AT)
        server.publish_wake(wake)
        to_satellite = ControlMessage("kitchen", ControlAction.VOLUME, 30, "server", AT)
        server.publish_control(to_satellite)
        reply = bytes(range(100)) * 5
        server.output_chunk_bytes = 200
        server.publish_output("kitchen", reply)

        eventually(lambda: got["audio"] and got["status"] and got["control"] and got["wake"]
                   and got["sat_control"] and len(got["output"]) == 3)
        assert got["audio"] == [("kitchen", pcm)]
        assert got["status"] == [status]
        assert got["control"] == [from_satellite]  # the server's own volume message is not echoed back
        assert got["sat_control"] == [to_satellite]
        assert got["wake"] == [wake]
        frames: list[OutputFrame] = [f for _, f in got["output"]]
        assert b"".join(f.pcm for f in frames) == reply and [f.last for f in frames] == [False, False, True]

        eventually(lambda: len(raw.messages) >= 8)
        assert raw.on("home/audio/kitchen/input") == [(0, pcm)]
        assert raw.on("home/status/kitchen") == [(0, status.to_bytes())]
        assert raw.on("home/wake/kitchen") == [(1, wake.to_bytes())]
        assert {qos for qos, _ in raw.on("home/control/kitchen")} == {1}
        assert [qos for qos, _ in raw.on("home/audio/kitchen/output")] == [1, 1, 1]
    finally:
        server.stop()
        satellite.stop()


def test_bad_messages_are_dropped_and_counted_while_the_bus_keeps_working(mosquitto: Mosquitto, raw: Raw):  # noqa: F811
    audio: list[tuple[str, bytes]] = []
    statuses: list[StatusMessage] = []
    server = started(VoiceBus(settings_for(mosquitto), max_bytes={TopicKind.INPUT: 1024},
                              on_audio=lambda r, p: audio.append((r, p)), on_status=statuses.append))
    try:
        raw.publish("home/audio/kitchen/input", bytes(2048))
        raw.publish("home/audio/kitchen/input", b"\x00\x01\x02")
        raw.publish("home/status/kitchen", b"{not json", qos=1)
        raw.publish("home/status/kitchen", b'{"v": 9, "room_id": "kitchen", "at": "2025-03-01T12:00:00Z"}', qos=1)
        raw.publish("home/control/kitchen", b'{"v": 1, "room_id": "kitchen", "action": "volume", "value": 500,'
                                            b' "at": "2025-03-01T12:00:00Z", "origin": "sat"}', qos=1)
        eventually(lambda: sum(server.dropped.values()) == 5)
        assert server.dropped == {("input", "oversized"): 1, ("input", "odd_length"): 1,
                                  ("status", "malformed_json"): 1, ("status", "bad_version"): 1,
                                  ("control", "invalid"): 1}
        raw.publish("home/audio/kitchen/input", b"\x01\x00")
        raw.publish("home/status/kitchen", StatusMessage("kitchen", AT).to_bytes(), qos=1)
        eventually(lambda: audio and statuses)
        assert audio == [("kitchen", b"\x01\x00")] and statuses == [StatusMessage("kitchen", AT)]
        assert server.connected
    finally:
        server.stop()


def test_reconnects_and_resubscribes_after_the_broker_restarts(mosquitto: Mosquitto):  # noqa: F811
    statuses: list[StatusMessage] = []
    server = started(VoiceBus(settings_for(mosquitto), reconnect_min_delay=1, reconnect_max_delay=2,
                              on_status=statuses.append))
    try:
        mosquitto.stop()
        eventually(lambda: not server.connected)
        mosquitto.start()  # same port; persistence off, so the broker forgot every subscription
        eventually(lambda: server.connected)
        raw = Raw(mosquitto)
        try:
            # a QoS 0 message sent before the resubscription lands is lost, so keep sending until one arrives
            deadline = time.monotonic() + TIMEOUT
            while not statuses:
                assert time.monotonic() < deadline, "no status after the broker restarted"
                raw.publish("home/status/hall", StatusMessage("hall", AT).to_bytes())
                time.sleep(0.2)
            assert statuses[0] == StatusMessage("hall", AT)
        finally:
            raw.close()
    finally:
        server.stop()


def test_username_and_password_are_sent(mosquitto_factory):  # noqa: F811
    broker = mosquitto_factory(users={"voice": "s3cret"})
    refused = VoiceBus(settings_for(broker, username="voice", password="wrong"))
    refused.start()
    try:
        bus = started(VoiceBus(settings_for(broker, username="voice", password="s3cret"), role="satellite"))
        try:
            raw = Raw(broker, username="voice", password="s3cret")
            try:
                bus.publish_status(StatusMessage("kitchen", AT))
                eventually(lambda: raw.on("home/status/kitchen"))
            finally:
                raw.close()
        finally:
            bus.stop()
        assert not refused.connected
    finally:
        refused.stop()
