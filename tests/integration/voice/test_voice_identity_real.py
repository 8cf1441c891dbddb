"""Identity gates memory, with the real parts: a SQLite store whose memory for the default user is
embedded by the packaged MiniLM, the real chat service, the voice pipeline and service, and the speaker
registry's real `remote` engine talking to the speaker companion service (uvicorn on loopback, the
d-vector model) that then goes down. Wake word, VAD, STT and TTS are the fakes of the unit tests (the
lightest way through the worker to the chat), and the chat model is the scripted one, so that what the
model RECEIVED (its system prompt) can be inspected."""

from __future__ import annotations

import asyncio

import pytest

from api.companions.speaker import create_app
from assistant.chat.service import ChatRequest
from assistant.config import SpeakerIdSettings
from assistant.voice.audio import silence
from assistant.voice.bus import LoopbackBus
from assistant.voice.pipeline import Engines
from tests.assistant.voice.test_voice_pipeline import (
    FakeStt,
    FakeTts,
    FakeVad,
    FakeWake,
    Led,
    tone,
    wait_for,
    wake_chunk,
)
from tests.integration.support import speaker_clips
from tests.integration.voice.test_voice_speaker_real import Served

pytestmark = pytest.mark.integration

GUEST = "00000000-0000-0000-0000-00000000a11c"  # [voice] default_user_id, the default
FACT = "My favourite colour is teal."
QUESTION = "what is my favourite colour?"


def test_a_speaker_service_that_went_down_answers_without_memories(make_settings, make_services, model) -> None:
    with Served(create_app(SpeakerIdSettings())) as companion:
        settings = make_settings(memory={"embedding_backend": "sentence-transformers"},
                                 voice={"speaker_id": {"engine": "remote", "url": companion.url}},
                                 tool_calling={"selection": "auto"})
        services = make_services(settings, model)
        voice = services.voice
        assert str(voice.settings.default_user_id) == GUEST
        # real speech (enrolment checks it with Silero): a reliable profile (3 samples) for the default user
        for pcm in speaker_clips()["1688"][:3]:
            profile, _ = voice.speakers.enroll(GUEST, "Guest", pcm)
        assert voice.speakers.reliable(profile)
    # the companion service is down from here on
    services.memory.add(GUEST, FACT)
    bus = LoopbackBus()
    engines = Engines(wake=lambda _room: FakeWake(), vad=FakeVad, stt=FakeStt(text=f"Hey Jarvis, {QUESTION}"),
                      tts=FakeTts(), speakers=voice.speakers, words=("hey_jarvis",))
    pipeline = voice.start(services.chat, bus=bus, engines=engines, led=Led())
    room = voice.rooms.create("Hall")
    audio = wake_chunk() + silence(0.1) + tone(1.0) + silence(1.0)
    for i in range(0, len(audio), 2560):
        bus.send_audio(room.id, audio[i:i + 2560])
    wait_for(lambda: any(e.kind == "run_end" for run in pipeline.runs for e in run.events), timeout=120)

    events = {e.kind: e for e in pipeline.runs[-1].events}
    assert "engine_error" not in events and [r for r, _ in bus.outputs] == [room.id]  # answered out loud
    speaker = events["speaker"]
    assert (speaker.reason, speaker.memories, speaker.user_id, speaker.known) == ("speaker_service_down", "none",
                                                                                   GUEST, False)
    assert events["response"].text  # the scripted model's answer
    messages, _ = model.calls[-1]
    assert messages[-1].content == QUESTION
    assert all(FACT not in m.content for m in messages)  # the default user's memory stayed out
    assert [m.content for m in services.memory.list(GUEST)] == [FACT]  # and nothing was learned
    assert voice.speaker_unavailable() == 1
    assert "voice_speaker_unavailable_total 1.0" in services.metrics.prometheus().decode()

    # The same question as that user in a text chat does bring the memory: the gate, not chance, kept it out.
    asyncio.run(services.chat.chat(GUEST, ChatRequest(QUESTION.capitalize())))
    assert any(FACT in m.content for m in model.calls[-1][0] if m.role == "system")
    voice.stop()
