"""End to end, every component real: piper speaks the question, the satellite simulator streams it over
mosquitto, the served assistant wakes (pyopen-wakeword), cuts the utterance (Silero), transcribes it
(faster-whisper tiny.en), answers with the embedded model, speaks (piper) and publishes the reply; the
session passes through every state and ends after the follow-up window."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from gpiozero.pins.mock import MockFactory

from assistant.config import GpioSettings, MqttSettings, SttSettings, TtsSettings
from assistant.voice.audio import duration_s, silence, write_wav
from assistant.voice.gpio import create_privacy_led
from assistant.voice.satellite import Satellite
from assistant.voice.sessions import SessionEvent
from assistant.voice.stt import create_stt
from assistant.voice.tts import create_tts
from tests.integration.support import serve
from tests.integration.voice.mosquitto import Mosquitto, mosquitto  # noqa: F401

pytestmark = pytest.mark.integration

QUESTION = "Hey Jarvis, what is the capital of France?"
FOLLOW_UP_MS = 2_000


def test_a_spoken_question_is_answered_out_loud(tmp_path: Path, default_model_path: Path,
                                                mosquitto: Mosquitto) -> None:  # noqa: F811
    question = silence(0.5) + create_tts(TtsSettings()).synthesize(QUESTION)
    live, key = serve(
        tmp_path,
        inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0, "max_tokens": 48},
        security={"rate_limit_enabled": False},
        voice={"mqtt": {"host": mosquitto.host, "port": mosquitto.port, "topic_prefix": "home"},
               "conversation": {"follow_up_window_ms": FOLLOW_UP_MS}},
        tool_calling={"selection": "auto"},  # the question needs no tool: a short prompt
    )
    headers = {"Authorization": f"Bearer {key}"}
    transitions: list[SessionEvent] = []
    with live, httpx.Client(base_url=live.base_url, headers=headers, timeout=30) as http:
        voice = live.services.voice
        voice.sessions.listeners.append(transitions.append)
        pin_factory = MockFactory()
        led = create_privacy_led(GpioSettings(enabled=True, privacy_led_pin=17), pin_factory=pin_factory)
        lit: list[bool] = []
        pipeline = voice.start(live.services.chat, led=led)
        pipeline.listeners.append(lambda _e: lit.append(led.is_lit))
        room = http.post("/v1/voice/rooms", json={"name": "Kitchen"}).json()

        satellite = Satellite(room["id"], MqttSettings(host=mosquitto.host, port=mosquitto.port,
                                                       topic_prefix="home"), heartbeat_secs=1.0)
        result = satellite.run(question, reply_timeout=240, linger_secs=0.5)

        status = http.get("/v1/voice/status").json()
        assert status["enabled"] and status["mqtt_connected"] and status["wake_word_available"]
        assert http.get(f"/v1/voice/rooms/{room['id']}").json()["is_online"]  # the heartbeats
        deadline = time.monotonic() + 30
        while http.get(f"/v1/voice/rooms/{room['id']}/session").status_code != 404:
            assert time.monotonic() < deadline, "the session did not end after the follow-up window"
            time.sleep(0.2)

    kinds = [e.kind for e in result.events]
    assert "wake" in kinds and "output_end" in kinds and "playback_done" in kinds, kinds
    assert result.replies == 1 and duration_s(result.reply_pcm) > 0.5
    write_wav(tmp_path / "reply.wav", result.reply_pcm)

    states = [(e.from_state and e.from_state.value, e.to_state.value, e.trigger.value) for e in transitions]
    assert states == [(None, "listening", "wake_word"), ("listening", "processing", "speech_captured"),
                      ("processing", "responding", "response_ready"), ("responding", "follow_up", "playback_complete"),
                      ("follow_up", "ended", "follow_up_timeout")], states

    run = pipeline.runs[-1]
    events = {e.kind: e for e in run.events}
    assert events["wake"].word == "hey_jarvis"
    assert "capital of france" in events["transcript"].text.lower()
    assert "paris" in events["response"].text.lower(), events["response"].text
    assert not events["speaker"].known  # nobody enrolled: the default voice user answered
    assert "paris" in create_stt(SttSettings()).transcribe(result.reply_pcm).text.lower()  # it is said out loud
    latencies = run.latencies()
    assert latencies["eos_to_audio_s"] > latencies["llm"] > 0
    assert True in lit and pin_factory.pin(17).state == 0  # lit while capturing, off afterwards


class _SilentWake:
    words = ("hey_jarvis",)

    def process(self, pcm: bytes) -> list:
        return []

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_presence_follows_real_heartbeats_with_a_short_timeout(make_settings, make_services,
                                                               mosquitto: Mosquitto) -> None:  # noqa: F811
    from assistant.config import VadSettings
    from assistant.voice.pipeline import Engines
    from assistant.voice.vad import create_vad

    services = make_services(make_settings(voice={
        "mqtt": {"host": mosquitto.host, "port": mosquitto.port},
        "rooms": {"heartbeat_timeout_ms": 1_000, "stale_check_interval_secs": 1}}))
    voice = services.voice
    engines = Engines(wake=lambda _room: _SilentWake(), vad=lambda: create_vad(VadSettings(engine="energy")),
                      stt=None, tts=None, words=("hey_jarvis",))
    voice.start(services.chat, engines=engines, respond=lambda *_a, **_k: ("", ""))
    room = voice.rooms.create("Hall")
    satellite = Satellite(room.id, MqttSettings(host=mosquitto.host, port=mosquitto.port), heartbeat_secs=0.2)
    satellite.start()
    try:
        deadline = time.monotonic() + 20
        while not voice.rooms.get(room.id).is_online:
            assert time.monotonic() < deadline, "the heartbeats did not make the room online"
            time.sleep(0.1)
        assert voice.status().active_rooms == 1 and voice.status().mqtt_connected
    finally:
        satellite.stop()
    stopped = time.monotonic()
    while voice.rooms.get(room.id).is_online:
        assert time.monotonic() < stopped + 20, "the room stayed online without heartbeats"
        time.sleep(0.1)
    assert time.monotonic() - stopped >= 0.5  # not before heartbeat_timeout_ms after the last heartbeat (~1 s)
    assert voice.status().active_rooms == 0
