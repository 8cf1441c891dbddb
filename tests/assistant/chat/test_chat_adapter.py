"""ChatService.adapter_for: the user's active LoRA adapter reaches every generation of that user's
answer (the tool loop's calls too) and no other user's."""

from __future__ import annotations

import asyncio
from pathlib import Path
from uuid import uuid4

from assistant.chat.service import ChatRequest
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import Services


def chat(services: Services, user, **fields):  # noqa: ANN001, ANN201
    return asyncio.run(services.chat.chat(user, ChatRequest(**fields)))


def test_the_users_adapter_goes_with_each_of_their_generations(services: Services, model: ScriptedChatModel,
                                                               tmp_path: Path) -> None:
    owner, other = services.keys.owner_user_id(), uuid4()
    adapters = {str(owner): tmp_path / "owner.gguf"}
    asked: list[str] = []

    def adapter_for(user_id: str) -> Path | None:
        asked.append(user_id)
        return adapters.get(user_id)

    services.chat.adapter_for = adapter_for
    # the tool loop: a call, then the answer; both generations carry the owner's adapter
    model.enqueue(tool_calls=[("recall_memory", {"query": "favourite colour"})])
    model.enqueue("I do not know your favourite colour yet.")
    chat(services, owner, message="What is my favourite colour?")
    assert [options.adapter for _, options in model.calls] == [str(tmp_path / "owner.gguf")] * 2

    model.enqueue("Hello.")  # without tools: the plain answer path
    chat(services, owner, message="hello", enabled_tools=())
    assert model.calls[-1][1].adapter == str(tmp_path / "owner.gguf")

    model.enqueue("Hello, stranger.")  # another user has no adapter: the base model
    chat(services, other, message="hello", enabled_tools=())
    assert model.calls[-1][1].adapter is None
    assert asked == [str(owner), str(owner), str(other)]


def test_without_the_hook_no_adapter_is_asked_for(services: Services, model: ScriptedChatModel) -> None:
    services.chat.adapter_for = None
    chat(services, services.keys.owner_user_id(), message="hi", enabled_tools=())
    assert model.calls[0][1].adapter is None


def test_build_services_wires_the_training_services_adapters_when_lora_is_on(make_settings, make_services) -> None:
    on = make_services(make_settings(lora={"enabled": True}), ScriptedChatModel())
    assert on.training is not None and on.chat.adapter_for == on.training.active_gguf
    off = make_services(make_settings(), ScriptedChatModel())
    assert off.chat.adapter_for is None
