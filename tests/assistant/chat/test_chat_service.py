"""The chat service: prompt building, history on continuation, validation, persistence."""

from __future__ import annotations

import asyncio
from uuid import uuid4

import pytest

from assistant.agents.profiles import InferenceOverrides, ProfileDraft, Style
from assistant.chat.service import ChatRequest, DoneEvent, MessageEvent
from assistant.errors import NotFoundError, ServiceUnavailableError, UpstreamError, ValidationFailed
from assistant.llm.base import ChatMessage
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import Services


def chat(services: Services, user, **fields):  # noqa: ANN001, ANN201
    return asyncio.run(services.chat.chat(user, ChatRequest(**fields)))


def stream(services: Services, user, **fields) -> list:  # noqa: ANN001
    async def run() -> list:
        return [event async for event in services.chat.stream(user, ChatRequest(**fields))]

    return asyncio.run(run())


@pytest.fixture
def user(services: Services):  # noqa: ANN201
    return services.keys.owner_user_id()


def without_time(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The prompt less the tool loop's "Current date and time" line (its minute changes)."""
    return [m for m in messages if not (m.role == "system" and m.content.startswith("Current date and time:"))]


def count(services: Services, table: str) -> int:
    return services.db.scalar(f"SELECT count(*) FROM {table}")


def test_first_message_starts_a_conversation(services: Services, model: ScriptedChatModel, user) -> None:
    model.enqueue("Hi! How can I help?")
    reply = chat(services, user, message="hello")
    assert reply.content == "Hi! How can I help?"
    assert reply.role == "assistant"
    assert reply.model == "scripted"
    assert reply.finish_reason == "stop"
    assert reply.usage.completion == 5  # "Hi!", " How", " can", " I", " help?"
    assert reply.created_at.endswith("Z")
    messages, _ = model.calls[0]
    assert without_time(messages) == [ChatMessage("system", services.settings.inference.system_prompt),
                                      ChatMessage("user", "hello")]
    # tools are offered (every registered one, the default): the loop grounds the prompt in "now"
    assert messages[1].role == "system" and messages[1].content.startswith("Current date and time: ")
    conversation = services.conversations.get(user, reply.conversation_id)
    assert conversation.title == "hello"
    stored = services.conversations.messages(reply.conversation_id)
    assert [(m.role, m.content) for m in stored] == [("user", "hello"), ("assistant", "Hi! How can I help?")]
    assert stored[1].id == reply.id
    assert stored[1].model == "scripted"
    assert (stored[1].prompt_tokens, stored[1].completion_tokens) == (reply.usage.prompt, reply.usage.completion)


def test_history_is_sent_on_continuation(services: Services, model: ScriptedChatModel, user) -> None:
    model.enqueue("Nice to meet you, Ada.")
    first = chat(services, user, message="My name is Ada.")
    model.enqueue("Your name is Ada.")
    second = chat(services, user, message="What is my name?", conversation_id=first.conversation_id)
    assert second.conversation_id == first.conversation_id
    messages, _ = model.calls[1]
    assert [(m.role, m.content) for m in messages if m.role != "system"] == [
        ("user", "My name is Ada."),
        ("assistant", "Nice to meet you, Ada."),
        ("user", "What is my name?"),
    ]
    assert len(services.conversations.messages(first.conversation_id)) == 4


def test_history_is_limited_to_the_last_messages(make_settings, make_services) -> None:
    model = ScriptedChatModel()
    services = make_services(make_settings(inference={"history_messages": 2}), model)
    owner = services.keys.owner_user_id()
    first = chat(services, owner, message="one")
    chat(services, owner, message="two", conversation_id=first.conversation_id)
    chat(services, owner, message="three", conversation_id=first.conversation_id)
    messages, _ = model.calls[2]
    assert [m.content for m in without_time(messages)[1:]] == ["two", "You said: two", "three"]


def test_system_prompt_override(make_settings, make_services, model: ScriptedChatModel) -> None:
    # Memory off: with it on, the first exchange is learned and injected into the second prompt.
    services = make_services(make_settings(memory={"enabled": False}), model)
    user = services.keys.owner_user_id()
    chat(services, user, message="hi", system_prompt="You are a pirate.")
    assert model.calls[0][0][0] == ChatMessage("system", "You are a pirate.")
    chat(services, user, message="hi", system_prompt="")
    assert [m.role for m in without_time(model.calls[1][0])] == ["user"]  # an empty system prompt sends none


def test_generation_options_pass_through(services: Services, model: ScriptedChatModel, user) -> None:
    chat(services, user, message="hi", temperature=0.1, max_tokens=33, model="other-model")
    _, options = model.calls[0]
    assert (options.temperature, options.max_tokens, options.model) == (0.1, 33, "other-model")
    chat(services, user, message="hi")
    _, defaults = model.calls[1]
    inference = services.settings.inference
    assert (defaults.temperature, defaults.max_tokens, defaults.model) == (inference.temperature, inference.max_tokens, None)


def test_temperature_zero_is_not_replaced_by_the_default(services: Services, model: ScriptedChatModel, user) -> None:
    chat(services, user, message="hi", temperature=0.0)
    assert model.calls[0][1].temperature == 0.0


def test_unknown_conversation_is_not_found(services: Services, model: ScriptedChatModel, user) -> None:
    with pytest.raises(NotFoundError):
        chat(services, user, message="hi", conversation_id=str(uuid4()))
    assert model.calls == []


def test_another_users_conversation_is_not_found(services: Services, model: ScriptedChatModel, user) -> None:
    mine = chat(services, user, message="secret")
    other_user = uuid4()
    with pytest.raises(NotFoundError):
        chat(services, other_user, message="let me in", conversation_id=mine.conversation_id)
    assert len(model.calls) == 1
    assert len(services.conversations.messages(mine.conversation_id)) == 2


def test_enabled_tools_name_unknown_tools(services: Services, model: ScriptedChatModel, user) -> None:
    with pytest.raises(ValidationFailed) as info:
        chat(services, user, message="hi", enabled_tools=("get_weather", "search_web"))
    fields = info.value.details["fields"]
    assert [f["field"] for f in fields] == ["enabled_tools", "enabled_tools"]
    assert "get_weather" in fields[0]["error"]
    assert "search_web" in fields[1]["error"]
    assert model.calls == []


def test_empty_enabled_tools_is_accepted(services: Services, model: ScriptedChatModel, user) -> None:
    assert chat(services, user, message="hi", enabled_tools=()).content == "You said: hi"


def test_unknown_profile_ids_are_refused(services: Services, user) -> None:
    with pytest.raises(ValidationFailed) as info:
        chat(services, user, message="hi", mentioned_profile_ids=("p-1",))
    assert info.value.details["fields"][0]["field"] == "mentioned_profile_ids"
    assert "p-1" in info.value.details["fields"][0]["error"]


def test_max_tokens_above_context_length(services: Services, model: ScriptedChatModel, user) -> None:
    limit = services.settings.inference.context_length
    with pytest.raises(ValidationFailed) as info:
        chat(services, user, message="hi", max_tokens=limit + 1)
    assert info.value.details["fields"] == [
        {"field": "max_tokens", "error": f"must be at most the context length {limit}"}
    ]
    chat(services, user, message="hi", max_tokens=limit)
    assert model.calls[0][1].max_tokens == limit


@pytest.mark.parametrize("error", [UpstreamError("engine failed"), RuntimeError("boom")])
def test_a_failing_model_stores_nothing(services: Services, model: ScriptedChatModel, user, error) -> None:
    model.enqueue(error=error)
    with pytest.raises(type(error)):
        chat(services, user, message="hi")
    assert count(services, "conversations") == 0
    assert count(services, "messages") == 0
    assert services.metrics.inference_failed == 1
    assert services.metrics.inference_success == 0


def test_a_failing_continuation_adds_nothing(services: Services, model: ScriptedChatModel, user) -> None:
    first = chat(services, user, message="hi")
    model.enqueue(error=UpstreamError("down"))
    with pytest.raises(UpstreamError):
        chat(services, user, message="again", conversation_id=first.conversation_id)
    assert len(services.conversations.messages(first.conversation_id)) == 2


def test_request_timeout_is_unavailable_and_not_stored(make_settings, make_services) -> None:
    model = ScriptedChatModel(["w " * 100], token_delay_secs=0.01)
    services = make_services(make_settings(inference={"request_timeout_secs": 0.05}), model)
    with pytest.raises(ServiceUnavailableError, match="timeout"):
        chat(services, services.keys.owner_user_id(), message="hi")
    assert count(services, "messages") == 0


def test_stream_events_then_done(services: Services, model: ScriptedChatModel, user) -> None:
    model.enqueue("one two three")
    events = stream(services, user, message="count")
    assert [e.delta for e in events[:-1]] == ["one", " two", " three"]
    assert all(isinstance(e, MessageEvent) and e.type == "message" for e in events[:-1])
    done = events[-1]
    assert isinstance(done, DoneEvent)
    assert done.type == "done"
    assert done.usage.completion == 3
    stored = services.conversations.messages(done.conversation_id)
    assert stored[-1].id == done.message_id
    assert stored[-1].content == "one two three"


def test_metrics_and_analytics_record_inference(services: Services, user) -> None:
    reply = chat(services, user, message="hi there")
    m = services.metrics
    assert (m.inference_total, m.inference_success, m.inference_failed) == (1, 1, 0)
    assert m.tokens_total == reply.usage.total
    assert services.analytics.percentiles("inference").count == 1


def test_an_abandoned_stream_is_not_stored(make_settings, make_services) -> None:
    model = ScriptedChatModel(["w " * 100], token_delay_secs=0.005)
    services = make_services(make_settings(), model)
    owner = services.keys.owner_user_id()

    async def run():
        events = services.chat.stream(owner, ChatRequest(message="long answer please"))
        first = await anext(events)
        await events.aclose()
        after = await services.chat.chat(owner, ChatRequest(message="next"))
        return first, after

    first, after = asyncio.run(run())
    assert isinstance(first, MessageEvent)
    assert after.content == "You said: next"
    conversations = services.db.query("SELECT id FROM conversations")
    assert len(conversations) == 1  # texts are sealed at rest: read them back through the store
    stored = services.conversations.messages(conversations[0]["id"])
    assert [m.content for m in stored] == ["next", "You said: next"]
    assert services.metrics.inference_failed == 1  # the abandoned one


def test_with_tools_memories_are_a_second_system_message(services: Services, model: ScriptedChatModel,
                                                         user) -> None:
    """The first system message (where templates append the tool list) stays the same from request
    to request, so its KV cache is reused; the memories follow it."""
    chat(services, user, message="My favourite colour is teal.")
    chat(services, user, message="What is my favourite colour?")
    messages, options = model.calls[1]
    assert options.tools  # the tool loop ran
    assert messages[0] == ChatMessage("system", services.settings.inference.system_prompt)
    assert messages[1].role == "system" and "teal" in messages[1].content


# --- agent profiles (mentioned_profile_ids and @name) ----------------------------------------------


def make_profile(services: Services, user, **fields):
    return services.profiles.create(user, ProfileDraft(**fields))


def test_a_mentioned_profile_extends_the_system_prompt(services: Services, model: ScriptedChatModel, user) -> None:
    p = make_profile(services, user, name="coder", system_prompt_template="You are {name}; asked: {user_prompt}",
                     style=Style(tone="dry"))
    chat(services, user, message="fix it", mentioned_profile_ids=(p.id,))
    messages, _ = model.calls[0]
    block = p.apply("fix it").system
    assert block.startswith("You are coder; asked: fix it\n\nTone: dry.")
    assert messages[0] == ChatMessage("system", services.settings.inference.system_prompt + "\n\n" + block)
    assert messages[-1] == ChatMessage("user", "fix it")


def test_an_at_name_mention_applies_the_profile(services: Services, model: ScriptedChatModel, user) -> None:
    p = make_profile(services, user, name="Coder", role="Writes Python.")
    chat(services, user, message="@coder please fix it")
    messages, _ = model.calls[0]
    assert messages[0].content.endswith("\n\n" + p.apply("@coder please fix it").system)
    assert "You are Coder. Your role: Writes Python." in messages[0].content
    assert messages[-1] == ChatMessage("user", "@coder please fix it")  # the message is sent unchanged


def test_unknown_at_words_are_just_text(services: Services, model: ScriptedChatModel, user) -> None:
    other = uuid4()
    make_profile(services, other, name="coder")  # another user's profile is not found by name
    chat(services, user, message="@coder @nobody hi, mail me at a@b.c")
    assert model.calls[0][0][0] == ChatMessage("system", services.settings.inference.system_prompt)


def test_the_profile_extends_a_request_system_prompt(make_settings, make_services, model: ScriptedChatModel) -> None:
    services = make_services(make_settings(memory={"enabled": False}), model)
    user = services.keys.owner_user_id()
    p = make_profile(services, user, name="coder")
    chat(services, user, message="@coder hi", system_prompt="You are a pirate.")
    assert model.calls[0][0][0] == ChatMessage("system", "You are a pirate.\n\n" + p.apply().system)
    chat(services, user, message="@coder hi", system_prompt="")
    assert model.calls[1][0][0] == ChatMessage("system", p.apply().system)


def test_profile_overrides_apply_and_request_values_win(services: Services, model: ScriptedChatModel,
                                                        user) -> None:
    p = make_profile(services, user, name="careful", style=Style(verbosity="terse"),
                     inference_overrides=InferenceOverrides(temperature=0.2, max_tokens=100, model="other-model"))
    chat(services, user, message="hi", mentioned_profile_ids=(p.id,))
    options = model.calls[0][1]
    assert (options.temperature, options.max_tokens, options.model) == (0.2, 100, "other-model")
    chat(services, user, message="hi", mentioned_profile_ids=(p.id,), temperature=1.5, max_tokens=50, model="m2")
    options = model.calls[1][1]
    assert (options.temperature, options.max_tokens, options.model) == (1.5, 50, "m2")
    chat(services, user, message="hi", mentioned_profile_ids=(p.id,), temperature=0.0)
    assert model.calls[2][1].temperature == 0.0


def test_verbosity_is_a_max_tokens_hint(services: Services, model: ScriptedChatModel, user) -> None:
    make_profile(services, user, name="brief", style=Style(verbosity="terse"))
    make_profile(services, user, name="chatty", style=Style(verbosity="verbose"))
    chat(services, user, message="@brief hi")
    chat(services, user, message="@chatty hi")
    chat(services, user, message="@chatty hi", max_tokens=10)
    assert [c[1].max_tokens for c in model.calls] == [256, 1024, 10]


def test_several_profiles_the_first_is_primary(services: Services, model: ScriptedChatModel, user) -> None:
    a = make_profile(services, user, name="alpha", role="First.", inference_overrides=InferenceOverrides(temperature=0.1))
    b = make_profile(services, user, name="beta", role="Second.", inference_overrides=InferenceOverrides(temperature=0.9))
    chat(services, user, message="@alpha and @beta, go", mentioned_profile_ids=(b.id,))
    messages, options = model.calls[0]
    system = messages[0].content
    assert "You are beta. Your role: Second." in system
    assert system.endswith("\n- alpha: First.")
    assert "You are alpha" not in system
    assert options.temperature == 0.9
    assert a.id != b.id


def test_skills_naming_tools_restrict_the_tools(services: Services, model: ScriptedChatModel, user) -> None:
    assert {"create_reminder", "list_reminders"} <= set(services.chat.tool_names)
    make_profile(services, user, name="planner", skills=("planning", "list_reminders"))
    make_profile(services, user, name="talker", skills=("small-talk",))
    chat(services, user, message="@planner what is due?")
    chat(services, user, message="@planner what is due?", enabled_tools=("create_reminder",))  # the request wins
    chat(services, user, message="@talker hi")  # no skill names a tool: all tools
    assert [t.name for t in model.calls[0][1].tools] == ["list_reminders"]
    assert [t.name for t in model.calls[1][1].tools] == ["create_reminder"]
    assert [t.name for t in model.calls[2][1].tools] == services.chat.tool_names


def test_another_users_profile_id_is_unknown(services: Services, model: ScriptedChatModel, user) -> None:
    theirs = make_profile(services, uuid4(), name="coder")
    mine = make_profile(services, user, name="coder")
    with pytest.raises(ValidationFailed) as info:
        chat(services, user, message="hi", mentioned_profile_ids=(mine.id, theirs.id, "p-2"))
    assert info.value.details["fields"] == [
        {"field": "mentioned_profile_ids", "error": f"unknown agent profile {theirs.id!r}"},
        {"field": "mentioned_profile_ids", "error": "unknown agent profile 'p-2'"},
    ]
    assert model.calls == []


def test_the_stream_applies_profiles_too(services: Services, model: ScriptedChatModel, user) -> None:
    p = make_profile(services, user, name="coder", inference_overrides=InferenceOverrides(temperature=0.4))
    events = stream(services, user, message="@CODER hi")
    assert isinstance(events[-1], DoneEvent)
    messages, options = model.calls[0]
    assert messages[0].content.endswith(p.apply("@CODER hi").system)
    assert options.temperature == 0.4


def test_a_request_resolves_its_profiles_once(services: Services, model: ScriptedChatModel, user,
                                              monkeypatch) -> None:  # noqa: ANN001
    p = make_profile(services, user, name="coder")
    calls: list[str] = []
    for name in ("for_message", "resolve", "missing", "get", "by_name"):
        real = getattr(services.profiles, name)
        monkeypatch.setattr(services.profiles, name,
                            lambda *a, _name=name, _real=real, **k: calls.append(_name) or _real(*a, **k))
    chat(services, user, message="@coder hi", mentioned_profile_ids=(p.id,))
    assert calls == ["for_message"]
    calls.clear()
    with pytest.raises(ValidationFailed):
        chat(services, user, message="@coder hi", mentioned_profile_ids=("p-9",), enabled_tools=("nope",))
    assert calls == ["for_message"]


# --- use_memories / learn (the voice pipeline's identity gate) ---------------------------------------


@pytest.mark.parametrize(("use_memories", "learn"), [(False, False), (False, True), (True, False)])
def test_a_request_may_keep_memories_out_and_learn_nothing(services: Services, model: ScriptedChatModel, user,
                                                           use_memories: bool, learn: bool) -> None:
    chat(services, user, message="My favourite colour is teal.")
    assert services.memory.count(str(user)) == 1
    chat(services, user, message="What is my favourite colour? My cat is called Miso.", use_memories=use_memories,
         learn=learn)
    system = [m.content for m in model.calls[-1][0] if m.role == "system"]
    assert any("teal" in part for part in system) is use_memories
    assert any("Miso" in m.content for m in services.memory.list(str(user))) is learn
