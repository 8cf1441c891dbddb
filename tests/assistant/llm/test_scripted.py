"""The scripted model: replies in order, echo when empty, recorded calls, scripted failures."""

from __future__ import annotations

import pytest

from assistant.errors import UpstreamError
from assistant.llm.base import ChatMessage, ChatModel, Delta, Finished, GenerationOptions, collect
from assistant.llm.scripted import ScriptedChatModel, count_tokens

USER = [ChatMessage("system", "be brief"), ChatMessage("user", "hello there")]


def test_is_a_chat_model() -> None:
    assert isinstance(ScriptedChatModel(), ChatModel)


def test_replies_come_in_order_then_it_echoes() -> None:
    model = ScriptedChatModel(["first reply", "second"])
    model.enqueue("third")
    answers = [collect(model.stream(USER, GenerationOptions())).content for _ in range(4)]
    assert answers == ["first reply", "second", "third", "You said: hello there"]


def test_stream_yields_word_deltas_and_one_finished() -> None:
    events = list(ScriptedChatModel(["one two  three"]).stream(USER, GenerationOptions()))
    assert [e.text for e in events if isinstance(e, Delta)] == ["one", " two", "  three"]
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    finished = events[-1]
    assert finished.model == "scripted"
    assert finished.finish_reason == "stop"
    assert finished.usage.completion == 3
    assert finished.usage.prompt == sum(count_tokens(m.content) + 4 for m in USER)
    assert finished.usage.total == finished.usage.prompt + 3


def test_calls_are_recorded() -> None:
    model = ScriptedChatModel()
    options = GenerationOptions(temperature=0.1, max_tokens=9)
    collect(model.stream(USER, options))
    assert len(model.calls) == 1
    messages, recorded = model.calls[0]
    assert messages == USER
    assert (recorded.temperature, recorded.max_tokens) == (0.1, 9)


def test_max_tokens_truncates_with_reason_length() -> None:
    result = collect(ScriptedChatModel(["a b c d e"]).stream(USER, GenerationOptions(max_tokens=2)))
    assert result.content == "a b"
    assert result.finish_reason == "length"
    assert result.usage.completion == 2


def test_should_stop_cancels() -> None:
    seen = []

    def should_stop() -> bool:
        return len(seen) >= 2

    events = []
    for event in ScriptedChatModel(["a b c d e"]).stream(USER, GenerationOptions(should_stop=should_stop)):
        events.append(event)
        if isinstance(event, Delta):
            seen.append(event)
    assert len(seen) == 2
    assert events[-1].finish_reason == "cancelled"
    assert events[-1].usage.completion == 2


def test_scripted_error_is_raised_and_the_next_reply_follows() -> None:
    model = ScriptedChatModel()
    model.enqueue(error=UpstreamError("engine says no"))
    model.enqueue("after")
    with pytest.raises(UpstreamError, match="engine says no"):
        collect(model.stream(USER, GenerationOptions()))
    assert collect(model.stream(USER, GenerationOptions())).content == "after"


def test_model_option_names_the_answering_model() -> None:
    result = collect(ScriptedChatModel(model="base").stream(USER, GenerationOptions(model="other")))
    assert result.model == "other"
    assert collect(ScriptedChatModel(model="base").stream(USER, GenerationOptions())).model == "base"


def test_health_and_models() -> None:
    healthy = ScriptedChatModel(model="m").health()
    assert (healthy.healthy, healthy.model, healthy.latency_ms) == (True, "m", 0)
    sick = ScriptedChatModel(healthy=False).health()
    assert sick.healthy is False
    assert sick.latency_ms is None
    assert sick.detail
    [info] = ScriptedChatModel(model="m").models()
    assert (info.id, info.default, info.context_length) == ("m", True, 4096)


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("one") == 1
    assert count_tokens("  one two\nthree ") == 3


def test_collect_needs_a_finished_event() -> None:
    with pytest.raises(RuntimeError, match="without a Finished"):
        collect(iter([Delta("x")]))


def test_json_schema_is_recorded_and_the_scripted_text_returned_as_is() -> None:
    model = ScriptedChatModel(["not json"])
    schema = {"type": "object"}
    result = collect(model.stream([ChatMessage("user", "hi")], GenerationOptions(json_schema=schema)))
    assert result.content == "not json"
    assert model.calls[0][1].json_schema == schema


def test_a_script_that_contradicts_tool_choice_fails_loudly() -> None:
    from assistant.errors import ValidationFailed
    from assistant.llm.base import ToolSpec
    from assistant.llm.scripted import ScriptMismatch

    a, b = ToolSpec("a", "A", {"type": "object"}), ToolSpec("b", "B", {"type": "object"})
    model = ScriptedChatModel()
    model.enqueue(tool_calls=[("b", {})])
    assert collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="b"))).tool_calls[0].name == "b"
    model.enqueue("just text")
    with pytest.raises(ScriptMismatch, match="needs a call"):
        collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="required")))
    with pytest.raises(ScriptMismatch, match="needs a call"):  # the echo when nothing is scripted, too
        collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="required")))
    model.enqueue(tool_calls=[("a", {})])
    with pytest.raises(ScriptMismatch):
        collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="b")))
    model.enqueue(tool_calls=[("a", {})])
    with pytest.raises(ScriptMismatch, match="allows no call"):
        collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="none")))
    model.enqueue("fine")
    assert collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="none"))).content == "fine"
    with pytest.raises(ValidationFailed):
        collect(model.stream(USER, GenerationOptions(tools=(a, b), tool_choice="c")))
