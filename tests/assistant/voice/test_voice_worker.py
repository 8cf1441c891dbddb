"""Identity gates memory (assistant/voice/worker.py): who a voice exchange is answered as, whether it may
use that user's memories and personal tools, what the event log says, and a speaker engine that fails.
Fake engines and the rig of test_voice_pipeline.py; the chat side is tested through the ChatBridge."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from assistant.errors import ConfigError
from assistant.tools.base import ToolRegistry
from assistant.tools.catalog import CAPABILITIES, SHARED_CAPABILITIES, Toolbox
from assistant.voice.engines import EngineError
from assistant.voice.service import ChatBridge
from assistant.voice.sessions import SessionState
from assistant.voice.speakers import MatchReason, SpeakerMatch
from tests.assistant.voice.test_voice_pipeline import FakeSpeakers, Rig, playback_done, rig, wait_for  # noqa: F401

DEFAULT_USER = "00000000-0000-4000-8000-00000000beef"  # the rig's [voice] default_user_id
ALICE = SpeakerMatch("spk-1", "user-alice", "Alice", 0.91, reliable=True, reason=MatchReason.MATCHED,
                     normalised=3.2, threshold=2.1)


class FailingSpeakers(FakeSpeakers):
    def __init__(self, error: Exception | None = None, delay: float = 0.0) -> None:
        super().__init__(None)
        self.error, self.delay = error, delay

    def identify(self, pcm: bytes):
        if self.delay:
            time.sleep(self.delay)
        raise self.error


class NobodyEnrolled(FakeSpeakers):
    def list(self) -> list[object]:
        return []


def speaker_event(rig: Rig):  # noqa: ANN201, F811
    return next(e for e in rig.pipeline.runs[-1].events if e.kind == "speaker")


def test_a_confident_speaker_is_answered_as_their_user_with_their_memories(rig: Rig) -> None:  # noqa: F811
    rig.pipeline.engines.speakers = FakeSpeakers(ALICE)
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.asked == [("user-alice", "what is the capital of France?", None, True)]
    assert rig.sessions.get_active_session(rig.room_id).speaker_id == "spk-1"
    event = speaker_event(rig)
    assert (event.user_id, event.known, event.reason, event.memories) == ("user-alice", True, "matched", "personal")
    assert (event.score, event.normalised, event.threshold) == (0.91, 3.2, 2.1)
    assert rig.pipeline.speaker_unavailable == 0


@pytest.mark.parametrize("match", [
    SpeakerMatch("spk-1", "user-alice", "Alice", 0.88, reliable=False, reason=MatchReason.UNRELIABLE_PROFILE),
    SpeakerMatch(None, None, None, 0.70, reason=MatchReason.BELOW_FLOOR),
    SpeakerMatch(None, None, None, 0.81, reason=MatchReason.BELOW_CALIBRATED, normalised=1.4, threshold=2.1),
], ids=lambda m: str(m.reason))
def test_a_speaker_not_confidently_identified_gets_no_personal_data(rig: Rig, match: SpeakerMatch) -> None:  # noqa: F811
    rig.pipeline.engines.speakers = FakeSpeakers(match)
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.asked == [(DEFAULT_USER, "what is the capital of France?", None, False)]
    assert rig.sessions.get_active_session(rig.room_id).speaker_id is None
    event = speaker_event(rig)
    assert (event.user_id, event.memories, event.reason) == (DEFAULT_USER, "none", str(match.reason))
    assert (event.speaker_id, event.known, event.score) == (match.speaker_id, match.known, match.score)
    assert (event.normalised, event.threshold) == (match.normalised, match.threshold)


@pytest.mark.parametrize("speakers", [None, NobodyEnrolled(ALICE)], ids=["no registry", "nobody enrolled"])
def test_without_profiles_nobody_gets_personal_data(rig: Rig, speakers) -> None:  # noqa: ANN001, F811
    rig.pipeline.engines.speakers = speakers
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert rig.asked[0][0] == DEFAULT_USER and rig.asked[0][3] is False
    assert (speaker_event(rig).reason, speaker_event(rig).memories) == ("no_profiles", "none")


@pytest.mark.parametrize("error", [EngineError("speaker companion service at http://x is unreachable"),
                                   ConfigError("speaker engine 'remote': not reachable"),
                                   RuntimeError("onnxruntime crashed")], ids=lambda e: type(e).__name__)
def test_a_failing_speaker_engine_answers_as_unknown_and_is_counted(rig: Rig, error: Exception) -> None:  # noqa: F811
    rig.pipeline.engines.speakers = FailingSpeakers(error)
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)  # the exchange went on: answered and spoken
    assert "engine_error" not in rig.events()
    assert rig.asked == [(DEFAULT_USER, "what is the capital of France?", None, False)]
    event = speaker_event(rig)
    assert (event.reason, event.memories, event.known, event.speaker_id) == ("speaker_service_down", "none", False,
                                                                               None)
    assert rig.pipeline.speaker_unavailable == 1
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.utterance(wake=False)
    wait_for(lambda: len(rig.bus.outputs) == 2)
    assert rig.pipeline.speaker_unavailable == 2


def test_a_speaker_engine_timeout_answers_as_unknown(rig: Rig) -> None:  # noqa: F811
    rig.pipeline.settings.speaker_id.timeout_ms = 50
    rig.pipeline.engines.speakers = FailingSpeakers(EngineError("never reached"), delay=1.0)
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    assert speaker_event(rig).reason == "speaker_service_down" and rig.asked[0][3] is False
    assert rig.pipeline.speaker_unavailable == 1


def test_a_new_speaker_in_the_follow_up_starts_a_new_conversation(rig: Rig) -> None:  # noqa: F811
    speakers = FakeSpeakers(ALICE)
    rig.pipeline.engines.speakers = speakers
    rig.utterance()
    wait_for(lambda: rig.bus.outputs)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    speakers.match = SpeakerMatch(None, None, None, 0.6, reason=MatchReason.BELOW_FLOOR)  # someone else
    rig.utterance(wake=False)
    wait_for(lambda: len(rig.bus.outputs) == 2)
    playback_done(rig)
    wait_for(lambda: rig.state() is SessionState.FOLLOW_UP)
    rig.utterance(wake=False)  # the same unknown speaker again: their own conversation goes on
    wait_for(lambda: len(rig.bus.outputs) == 3)
    assert [(user, cid, personal) for user, _, cid, personal in rig.asked] == [
        ("user-alice", None, True), (DEFAULT_USER, None, False), (DEFAULT_USER, "conv-2", False)]
    session = rig.sessions.get_active_session(rig.room_id)
    assert session.speaker_id is None and session.conversation_id == "conv-2"


# --- the chat side: what a non-personal turn asks of the chat service ----------------------------------


@dataclass
class RecordingChat:
    toolbox: Toolbox | None
    requests: list = field(default_factory=list)

    async def chat(self, user_id: str, request):  # noqa: ANN001, ANN201
        from assistant.chat.service import ChatReply
        from assistant.llm.base import TokenUsage

        self.requests.append((user_id, request))
        return ChatReply("m1", "c1", " ok ", "scripted", TokenUsage(1, 1), "2025-01-01T00:00:00Z")


def every_tool() -> Toolbox:
    return Toolbox(ToolRegistry(t for cap in CAPABILITIES for t in cap.tools))


def test_shared_tools_are_the_ones_without_personal_data() -> None:
    assert every_tool().shared_tools() == ("get_weather", "search_transit", "search_web")
    personal = {t.name for cap in CAPABILITIES if cap.name not in SHARED_CAPABILITIES for t in cap.tools}
    assert {"store_memory", "recall_memory", "list_reminders", "list_calendar_events", "search_emails",
            "search_contacts", "list_tasks", "draft_email"} <= personal


@pytest.mark.parametrize(("toolbox", "tools"), [(every_tool(), ("get_weather", "search_transit", "search_web")),
                                                (None, ())], ids=["tools", "no tools"])
def test_the_bridge_gates_memories_learning_and_tools(toolbox: Toolbox | None, tools: tuple[str, ...]) -> None:
    chat = RecordingChat(toolbox)
    bridge = ChatBridge(chat)
    try:
        assert bridge("user-x", "hello", None, personal=False) == ("ok", "c1")
        assert bridge("user-alice", "hello", "c1", personal=True) == ("ok", "c1")
    finally:
        bridge.close()
    (_, anonymous), (_, alice) = chat.requests
    assert (anonymous.use_memories, anonymous.learn, anonymous.enabled_tools) == (False, False, tools)
    assert (alice.use_memories, alice.learn, alice.enabled_tools) == (True, True, None)
    assert alice.conversation_id == "c1"
