"""Cognitive load: the spec's weights and thresholds, each component's formula, the estimate from stored
activity, and the format instruction the chat prompt gets (with the CognitiveLoadEstimate signal)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from assistant.chat.service import ChatRequest
from assistant.config.extended import CognitiveLoadSettings
from assistant.extended.cognitive import (
    INSTRUCTIONS,
    Activity,
    AnswerFormat,
    answer_format,
    circadian,
    clauses,
    complexity,
    duration,
    estimate_from,
    latency,
    multitask,
    reply_latencies,
    session_start,
    weighted_load,
)
from assistant.observability.signals import SignalKind

SPEC = CognitiveLoadSettings()
UTC_TZ = ZoneInfo("UTC")
ONES = dict.fromkeys(("circadian", "duration", "latency", "complexity", "multitask"), 1.0)


def at(hour: int, minute: int = 0) -> float:
    return datetime(2026, 3, 2, hour, minute, tzinfo=UTC).timestamp()


# --- the spec's numbers ---------------------------------------------------------------------------------


def test_the_spec_weights_sum_to_one() -> None:
    weights = (SPEC.circadian_weight, SPEC.duration_weight, SPEC.latency_weight, SPEC.complexity_weight,
               SPEC.multitask_weight)
    assert weights == (0.3, 0.25, 0.2, 0.15, 0.1)
    assert sum(weights) == pytest.approx(1.0)
    assert SPEC.fatigue_onset_minutes == 30


def test_all_components_one_is_load_one_and_all_zero_is_zero() -> None:
    assert weighted_load(ONES, SPEC) == pytest.approx(1.0)
    assert weighted_load(dict.fromkeys(ONES, 0.0), SPEC) == 0.0


@pytest.mark.parametrize(("component", "weight"), [("circadian", 0.3), ("duration", 0.25), ("latency", 0.2),
                                                   ("complexity", 0.15), ("multitask", 0.1)])
def test_each_component_alone_gives_its_weight(component: str, weight: float) -> None:
    assert weighted_load({**dict.fromkeys(ONES, 0.0), component: 1.0}, SPEC) == pytest.approx(weight)


@pytest.mark.parametrize(("load", "expected"), [
    (0.0, AnswerFormat.NARRATIVE), (0.39, AnswerFormat.NARRATIVE), (0.3999, AnswerFormat.NARRATIVE),
    (0.4, AnswerFormat.BULLET_POINTS), (0.69, AnswerFormat.BULLET_POINTS), (0.7, AnswerFormat.TLDR_FIRST),
    (1.0, AnswerFormat.TLDR_FIRST),
])
def test_format_thresholds(load: float, expected: AnswerFormat) -> None:
    assert answer_format(load) is expected


def test_thresholds_hold_for_loads_summed_from_components() -> None:
    """0.3 + 0.1 is 0.4000000000000001 in floating point: still exactly the 0.4 threshold."""
    zero = dict.fromkeys(ONES, 0.0)
    bullet = weighted_load({**zero, "circadian": 1.0, "multitask": 1.0}, SPEC)
    tldr = weighted_load({**zero, "circadian": 1.0, "duration": 1.0, "complexity": 1.0}, SPEC)
    narrative = weighted_load({**zero, "circadian": 1.0, "multitask": 0.9}, SPEC)
    assert answer_format(bullet) is AnswerFormat.BULLET_POINTS and bullet == pytest.approx(0.4)
    assert answer_format(tldr) is AnswerFormat.TLDR_FIRST and tldr == pytest.approx(0.7)
    assert answer_format(narrative) is AnswerFormat.NARRATIVE and narrative == pytest.approx(0.39)


def test_other_weights_are_normalised() -> None:
    doubled = CognitiveLoadSettings(circadian_weight=0.6, duration_weight=0.5, latency_weight=0.4,
                                    complexity_weight=0.3, multitask_weight=0.2)
    assert weighted_load(ONES, doubled) == pytest.approx(1.0)
    assert weighted_load({**dict.fromkeys(ONES, 0.0), "circadian": 1.0}, doubled) == pytest.approx(0.3)


# --- the components ------------------------------------------------------------------------------------


def test_circadian() -> None:
    assert circadian(4) == pytest.approx(1.0)
    assert circadian(16) == pytest.approx(0.0)
    assert circadian(10) == pytest.approx(0.5)
    assert circadian(22) == pytest.approx(0.5)
    assert circadian(0) == pytest.approx(circadian(8))


def test_duration_beyond_the_fatigue_onset() -> None:
    assert duration(0) == 0.0 and duration(30) == 0.0
    assert duration(60) == pytest.approx(0.5)
    assert duration(90) == pytest.approx(1.0) and duration(300) == 1.0
    assert duration(20, fatigue_onset_minutes=10) == pytest.approx(0.5)


def test_latency() -> None:
    assert latency(None) == 0.0 and latency(3) == 0.0 and latency(10) == 0.0
    assert latency(65) == pytest.approx(0.5)
    assert latency(120) == 1.0 and latency(600) == 1.0


def test_complexity_grows_with_length_words_and_clauses() -> None:
    assert complexity("") == 0.0 and clauses("") == 1
    assert clauses("I went home, and then I slept because I was tired.") == 3
    short, long = complexity("Hi there"), complexity(2 * (
        "I need to plan the move, which means booking the van, because the lease ends on Friday, and I still have "
        "to pack the kitchen, sort the books, call the bank, cancel the internet, and tell my landlord when I "
        "will hand back the keys, although he has not answered my last three e-mails about the deposit yet, so "
        "I am not sure he will even be there, unless his sister comes instead, which happened last time too. "))
    assert 0.0 < short < 0.05
    assert long == pytest.approx(1.0)


def test_multitask() -> None:
    assert multitask(1, 0) == 0.0
    assert multitask(2, 1) == pytest.approx(1 / 3)
    assert multitask(4, 0) == 1.0
    assert multitask(1, 6) == 1.0


def test_a_gap_over_thirty_minutes_starts_a_session() -> None:
    now = at(12)
    times = [now - 200 * 60, now - 100 * 60, now - 75 * 60, now - 50 * 60, now - 25 * 60]
    assert session_start(times, now) == now - 100 * 60  # gaps of 25 minutes back to 100 minutes ago; then 100
    assert session_start([], now) == now
    assert session_start([now - 31 * 60], now) == now


def test_reply_latency_is_answer_to_next_message_in_the_same_conversation() -> None:
    acts = [Activity(100, "user", "a"), Activity(100, "assistant", "a"), Activity(130, "user", "b"),
            Activity(160, "user", "a"), Activity(160, "assistant", "a"), Activity(4000, "user", "a")]
    assert reply_latencies(acts, since=0) == [60.0]  # b had no answer before; 4000 is a new session


# --- from activity -------------------------------------------------------------------------------------


def test_a_long_tired_night_session_is_tldr_first() -> None:
    now = at(4)  # the circadian trough
    acts = []
    for minutes in range(95, 0, -5):  # a session of 95 minutes, an exchange every 5 minutes
        ts = now - minutes * 60
        acts += [Activity(ts, "user", "a", "Short question?"), Activity(ts, "assistant", "a")]
    e = estimate_from(acts, now, SPEC, UTC_TZ, "And the next one?", "a")
    assert e.components["circadian"] == 1.0 and e.components["duration"] == 1.0
    assert e.components["latency"] == 1.0  # 5 minutes between an answer and the next message
    assert e.details["session_minutes"] == pytest.approx(95.0)
    assert e.load >= 0.7 and e.format is AnswerFormat.TLDR_FIRST
    assert e.instruction == INSTRUCTIONS[AnswerFormat.TLDR_FIRST] and "TL;DR" in e.instruction


def test_a_fresh_afternoon_message_is_narrative() -> None:
    e = estimate_from([], at(16), SPEC, UTC_TZ, "hello", None)
    assert e.components == {"circadian": 0.0, "duration": 0.0, "latency": 0.0,
                            "complexity": pytest.approx(complexity("hello"), abs=1e-4), "multitask": 0.0}
    assert e.format is AnswerFormat.NARRATIVE and e.instruction == ""


def test_four_conversations_at_once_is_full_multitasking() -> None:
    now = at(16)
    acts = [Activity(now - 60 * i, "user", c) for i, c in enumerate("abc", start=1)]
    e = estimate_from(acts, now, SPEC, UTC_TZ, "and this", "d")
    assert e.details["conversations_in_window"] == 4 and e.components["multitask"] == 1.0


def test_local_time_is_the_configured_zone() -> None:
    e = estimate_from([], at(3), SPEC, ZoneInfo("Asia/Tokyo"), "hi")  # 12:00 in Tokyo
    assert e.details["local_time"].startswith("2026-03-02T12:00")
    assert e.components["circadian"] == pytest.approx(circadian(12), abs=1e-4)


# --- through the chat service (real storage, scripted model) --------------------------------------------


@pytest.fixture
def cognitive_services(make_settings, make_services, model):  # noqa: ANN001, ANN201
    services = make_services(make_settings(cognitive_load={"enabled": True}), model)
    assert services.cognitive is not None and services.chat.cognitive is services.cognitive
    return services


def backdate(services, conversation_id: str, created_at: str, epoch: float) -> None:  # noqa: ANN001
    """Move one stored exchange (both of its messages) to ``epoch``."""
    iso = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    services.db.execute("UPDATE messages SET created_at = ? WHERE conversation_id = ? AND created_at = ?",
                        (iso, conversation_id, created_at))


def test_stored_activity_drives_the_prompt_section_and_the_signal(cognitive_services, model) -> None:  # noqa: ANN001
    services = cognitive_services
    user = services.keys.owner_user_id()
    now = at(4)
    conversation = None
    for minutes in range(95, 0, -5):
        conversation, _, created = services.conversations.record_exchange(
            user_id=user, conversation_id=conversation, user_message="what next?", reply="this", model="m",
            prompt_tokens=1, completion_tokens=1)
        backdate(services, conversation, created, now - minutes * 60)
    services.cognitive.clock = lambda: now
    model.enqueue("TL;DR: rest.")
    reply = asyncio.run(services.chat.chat(user, ChatRequest("Should I go on?", conversation_id=conversation,
                                                             enabled_tools=())))
    messages, _ = model.calls[-1]
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    assert INSTRUCTIONS[AnswerFormat.TLDR_FIRST] in system
    (signal,) = services.signals.recent(SignalKind.COGNITIVE_LOAD_ESTIMATE)
    assert signal.user_id == str(user) and signal.value >= 0.7
    assert signal.data["format"] == "TlDrFirst" and signal.data["message_id"] == reply.id
    assert set(signal.data["components"]) == {"circadian", "duration", "latency", "complexity", "multitask"}


def test_disabled_means_no_section_and_no_signal(make_settings, make_services, model) -> None:  # noqa: ANN001
    services = make_services(make_settings(cognitive_load={"enabled": False}), model)
    assert services.cognitive is None and services.chat.cognitive is None
    asyncio.run(services.chat.chat(services.keys.owner_user_id(), ChatRequest("hi", enabled_tools=())))
    messages, _ = model.calls[-1]
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content == services.settings.inference.system_prompt
    assert not services.signals.recent(SignalKind.COGNITIVE_LOAD_ESTIMATE)


@pytest.mark.parametrize(("load", "fmt"), [(0.39, AnswerFormat.NARRATIVE), (0.4, AnswerFormat.BULLET_POINTS),
                                          (0.7, AnswerFormat.TLDR_FIRST)])
def test_the_prompt_builder_emits_the_format_section(cognitive_services, load: float,  # noqa: ANN001
                                                     fmt: AnswerFormat) -> None:
    chat = cognitive_services.chat
    assert answer_format(load) is fmt
    sections: dict[str, int] = {}
    request = ChatRequest("hello")
    messages = chat._prompt("u", request, "", instruction=INSTRUCTIONS[answer_format(load)], sections=sections)
    system = chat.settings.system_prompt
    if fmt is AnswerFormat.NARRATIVE:
        assert sections["cognitive_load"] == 0
        assert [m.content for m in messages] == [system, "hello"]
    else:
        assert sections["cognitive_load"] == len(INSTRUCTIONS[fmt]) > 0
        assert messages[0].content == f"{system}\n\n{INSTRUCTIONS[fmt]}"
        word = "bullet points" if fmt is AnswerFormat.BULLET_POINTS else "TL;DR"
        assert word in messages[0].content
    # with tools the instruction opens the second system message: the first (and its KV cache) stays
    separate = chat._prompt("u", request, "", separate_context=True, instruction=INSTRUCTIONS[fmt])
    assert separate[0].content == system
    if fmt is not AnswerFormat.NARRATIVE:
        assert separate[1].content == INSTRUCTIONS[fmt]


def test_an_unreachable_estimate_leaves_the_prompt_as_configured(cognitive_services, model) -> None:  # noqa: ANN001
    class Broken:
        def estimate(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            raise RuntimeError("no database")

    cognitive_services.chat.cognitive = Broken()
    reply = asyncio.run(cognitive_services.chat.chat(cognitive_services.keys.owner_user_id(),
                                                     ChatRequest("hi", enabled_tools=())))
    assert reply.content == "You said: hi"
    assert model.calls[-1][0][0].content == cognitive_services.settings.inference.system_prompt

