"""The OpenAI-compatible routes: ``POST /v1/chat/completions`` (memory-augmented) and ``GET /v1/models``.

Behaviour lives in :mod:`assistant.chat.completions`; this module speaks OpenAI's wire format:
the ``chat.completion`` object, or Server-Sent Events of ``chat.completion.chunk`` objects as bare
``data:`` lines (no event names) ending with ``data: [DONE]``. Errors are in OpenAI's shape
(:func:`api.errors.error_body` switches on these paths).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any
from uuid import uuid4

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from api.deps import ROLE_CHANGE, ROLE_READ, CurrentPrincipal, ServicesDep
from api.errors import STATUS_OF, openai_error
from api.schemas.openai_compat import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionBody,
    Choice,
    FunctionCall,
    ModelObject,
    ModelObjectList,
    PromptTokensDetails,
    ToolCallOut,
    Usage,
    openai_errors,
)
from assistant.chat.completions import CallsEvent, CompletionDone, CompletionEvent, Completions, TextDelta
from assistant.chat.completions_input import read_completion
from assistant.errors import AssistantError
from assistant.llm.base import TokenUsage, ToolCall

router = APIRouter(prefix="/v1", tags=["openai"])

OWNER = ("Owner rule: the memories retrieved and learned are those of the key's user, whatever `user` "
         "says; nothing else is stored (no conversation).")


def _created(services: Any) -> int:
    return int(time.time() - services.system.uptime_seconds())


def _model(info: Any, created: int) -> ModelObject:
    return ModelObject(id=info.id, created=created, owned_by="assistant")


MODELS = ("The configured engine's models in OpenAI's list shape (`{\"object\": \"list\", \"data\": [{id, object, "
          "created, owned_by}]}`); `id` is what `model` takes in `POST /v1/chat/completions`. Errors are in "
          "OpenAI's shape `{\"error\": {message, type, param, code}}`." + ROLE_READ + "Nothing here is per user.")


@router.get("/models", response_model=ModelObjectList, responses=openai_errors(401, 429, 502, 503),
            summary="Models (OpenAI-compatible)", description=MODELS)
def list_models(user: CurrentPrincipal, services: ServicesDep) -> ModelObjectList:
    created = _created(services)
    return ModelObjectList(data=[_model(m, created) for m in Completions(services.chat).models()])


@router.get("/models/{model}", response_model=ModelObject, responses=openai_errors(401, 404, 429, 502, 503),
            summary="One model (OpenAI-compatible)",
            description="One model of `GET /v1/models`; an unknown id is 404 `model_not_found` in OpenAI's error "
                        "shape." + ROLE_READ + "Nothing here is per user.")
def get_model(model: str, user: CurrentPrincipal, services: ServicesDep) -> ModelObject:
    return _model(Completions(services.chat).model(model), _created(services))


def _tool_call(call: ToolCall) -> ToolCallOut:
    return ToolCallOut(id=call.id or f"call_{uuid4().hex[:24]}",
                       function=FunctionCall(name=call.name, arguments=json.dumps(call.arguments, ensure_ascii=False)))


def _usage(usage: TokenUsage) -> Usage:
    return Usage(prompt_tokens=usage.prompt, completion_tokens=usage.completion, total_tokens=usage.total,
                 prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_prompt))


def _memories(done: CompletionDone) -> list[dict[str, Any]]:
    return [asdict(m) for m in done.memories]


class _Chunks:
    """The ``chat.completion.chunk`` objects of one streamed completion."""

    def __init__(self, model: str, include_usage: bool):
        self.id, self.created, self.model = f"chatcmpl-{uuid4().hex}", int(time.time()), model
        self.include_usage = include_usage
        self.call_index = 0

    def chunk(self, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any) -> str:
        body: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "system_fingerprint": None,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None,
                                                  "finish_reason": finish_reason}],
        }
        if self.include_usage:
            body["usage"] = None
        body.update(extra)
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def events(self, event: CompletionEvent) -> list[str]:
        if isinstance(event, TextDelta):
            return [self.chunk({"content": event.text})]
        if isinstance(event, CallsEvent):
            out = []
            for call in event.calls:
                data = _tool_call(call).model_dump()
                out.append(self.chunk({"tool_calls": [{"index": self.call_index, **data}]}))
                self.call_index += 1
            return out
        self.model = event.model
        out = [self.chunk({}, event.finish_reason, assistant_memories=_memories(event))]
        if self.include_usage:
            out.append(self.chunk(None, usage=_usage(event.usage).model_dump()))
        return out


def _stream_error(exc: AssistantError) -> str:
    _, body = openai_error(STATUS_OF.get(exc.code, 500), exc.code, exc.message, exc.details)
    return f"data: {json.dumps(body)}\n\n"


COMPLETIONS = """OpenAI's chat completions, so that OpenAI clients (the `openai` SDK, Open WebUI, Home
Assistant's OpenAI conversation agents) work unchanged, with the key's user's **memories**: those
relevant to the last user message reach the prompt (fenced as data, never instructions) and the
exchange is learned, as in `POST /v1/chat`. Stateless: the client sends the whole conversation; no
conversation is stored.

- `tools`: client functions; the model's calls come back as `tool_calls` (finish_reason
  `tool_calls`) and are never executed here; the assistant's own tools are not offered on this
  route. `tool_choice` `required` or a named function is decoded under the tools' grammar.
- `response_format`: `json_object` or `json_schema` (decoded under the schema's grammar).
- `stream`: SSE `data: {chunk}` lines: a first chunk with `delta.role`, content or `tool_calls`
  deltas (with `index`, whole arguments per call), a chunk with `finish_reason`, with
  `stream_options.include_usage` a chunk with `usage` and empty `choices`, then `data: [DONE]`.
  An error after streaming began is one `data: {"error": {...}}` line.
- Honoured: `model`, `messages`, `temperature`, `max_tokens`/`max_completion_tokens`, `stop`,
  `n` (only 1), `user` (logged and counted in the analytics as kind `openai_user`).
  Accepted and ignored: `seed`, `top_p`, `frequency_penalty`, `presence_penalty`,
  `parallel_tool_calls` and unknown fields. Refused (400): `n` > 1, `logprobs: true`, non-text
  content parts, a JSON `response_format` together with `tools`.
- Extension `memory: {"retrieve": bool, "learn": bool}` (both default true; the SDK sends it with
  `extra_body`). Nothing is learned from a turn that ends in `tool_calls`, from one where the
  defence flagged the message or a tool result, nor when the last user message is not the one
  this turn answers. Response extension `assistant_memories`: the memories used (id, type,
  content, relevance, similarity), on the response or on the finishing chunk.

Errors are in OpenAI's shape `{"error": {message, type, param, code}}`: 400 with `param` naming
the field (e.g. `tools[0].function.name`), 401, 403, 404 `model_not_found`, 413, 429, 503 when
the engine is unavailable.""" + ROLE_CHANGE + OWNER


@router.post("/chat/completions", response_model=ChatCompletion, summary="Chat completion (OpenAI-compatible)",
             responses={200: {"content": {"text/event-stream": {}}, "description": (
                 "`chat.completion`, or with `stream: true` Server-Sent Events of `chat.completion.chunk`")},
                        **openai_errors(400, 401, 403, 404, 413, 429, 502, 503)},
             description=COMPLETIONS)
async def chat_completions(body: ChatCompletionBody, user: CurrentPrincipal, services: ServicesDep) -> Any:
    completion = read_completion(body.model_dump(), services.settings.inference.context_length)
    events = Completions(services.chat).stream(user.user_id, completion)
    default_model = completion.model or services.settings.inference.model
    if not completion.stream:
        return await _whole(events)
    chunks = _Chunks(default_model, completion.include_usage)
    first = await anext(events)  # errors before the first token are ordinary error responses

    async def produce() -> AsyncIterator[str]:
        try:
            yield chunks.chunk({"role": "assistant", "content": ""})
            for line in chunks.events(first):
                yield line
            async for event in events:
                for line in chunks.events(event):
                    yield line
            yield "data: [DONE]\n\n"
        except AssistantError as exc:
            yield _stream_error(exc)
        finally:
            await events.aclose()

    return StreamingResponse(produce(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


async def _whole(events: AsyncIterator[CompletionEvent]) -> ChatCompletion:
    parts: list[str] = []
    calls: list[ToolCall] = []
    async for event in events:
        if isinstance(event, TextDelta):
            parts.append(event.text)
        elif isinstance(event, CallsEvent):
            calls.extend(event.calls)
        else:
            done = event
    message = AssistantMessage(content="".join(parts) if parts or not calls else None,
                               tool_calls=[_tool_call(c) for c in calls] or None)
    return ChatCompletion(
        id=f"chatcmpl-{uuid4().hex}", created=int(time.time()), model=done.model,
        choices=[Choice(message=message, finish_reason=done.finish_reason)],
        usage=_usage(done.usage), assistant_memories=_memories(done),
    )
