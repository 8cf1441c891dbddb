"""The local engine of the mesh: the path ``POST /v1/chat/completions`` takes
(:class:`assistant.chat.completions.Completions` on the chat service's inference queue), with the
``memory`` extension off as on a forward (the answer does not depend on who served it: no memories
retrieved, nothing learned), no tools, not streamed."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from assistant.chat.completions import CallsEvent, CompletionDone, Completions, TextDelta
from assistant.chat.completions_input import Completion, MemorySwitch
from assistant.chat.service import ChatService
from assistant.errors import ServiceUnavailableError
from assistant.mesh.types import MeshRequest, Reply

NO_MEMORY = MemorySwitch(retrieve=False, learn=False)


class LocalEngine(Protocol):
    """Answers a mesh request on this machine."""

    async def complete(self, user_id: UUID | str, request: MeshRequest) -> Reply: ...


class ChatLocalEngine:
    """The chat service's engine, through :class:`Completions` (the OpenAI-compatible endpoint's path)."""

    def __init__(self, chat: ChatService):
        self.completions = Completions(chat)

    def _model(self, name: str | None) -> str | None:
        """The request's model when the local engine has it; else None (the configured model): a model
        named for a peer does not make the fallback fail."""
        if name is None:
            return None
        return name if any(m.id == name for m in self.completions.models()) else None

    async def complete(self, user_id: UUID | str, request: MeshRequest) -> Reply:
        completion = Completion(messages=request.messages, model=self._model(request.model),
                                temperature=request.temperature, max_tokens=request.max_tokens, memory=NO_MEMORY)
        parts: list[str] = []
        done: CompletionDone | None = None
        async for event in self.completions.stream(user_id, completion):
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, CompletionDone):
                done = event
            elif isinstance(event, CallsEvent):  # no tools are offered; a call would be the model's mistake
                continue
        if done is None:
            raise ServiceUnavailableError("the local engine ended without finishing the answer")
        return Reply(content="".join(parts), model=done.model, finish_reason=done.finish_reason,
                     usage=done.usage)
