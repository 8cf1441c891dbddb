"""The OpenAI-compatible routes' bodies (``/v1/chat/completions``, ``/v1/models``), in OpenAI's shapes.

The request types only its scalar fields; ``messages``, ``tools``, ``tool_choice``,
``response_format``, ``stop``, ``stream_options`` and the ``memory`` extension are read by
:mod:`assistant.chat.completions_input`, which names the exact parameter of a refusal
(``tools[0].function.name``). Fields OpenAI defines that this server does not use are accepted and
ignored (see the route's description); unknown fields are ignored, as clients send vendor fields.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.chat import MAX_TOKENS, UsedMemoryOut

MAX_SEED = 2**63 - 1


class ChatCompletionBody(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str | None = Field(None, min_length=1, max_length=256, description=(
        "A model id of `GET /v1/models`; unknown ids are 404 `model_not_found`. Omitted: the configured "
        "default."))
    messages: list[dict[str, Any]] = Field(description=(
        "The conversation: `system`/`developer`, `user`, `assistant` (with `tool_calls`), `tool` "
        "(with `tool_call_id`) messages; `content` is a string or an array of `{\"type\": \"text\", "
        "\"text\"}` parts (other part types are 400)."))
    tools: list[dict[str, Any]] | None = Field(None, description=(
        "Client functions `{\"type\": \"function\", \"function\": {name, description?, parameters?}}`: "
        "the model's calls of them are returned as `tool_calls`, never executed here."))
    tool_choice: Any = Field(None, description=(
        "`\"auto\"` (default), `\"none\"`, `\"required\"` or `{\"type\": \"function\", \"function\": "
        "{\"name\": ...}}` (a call of that tool, decoded under its schema's grammar)."))
    response_format: Any = Field(None, description=(
        "`{\"type\": \"text\"}`, `{\"type\": \"json_object\"}` (any JSON object) or `{\"type\": "
        "\"json_schema\", \"json_schema\": {\"name\", \"schema\", \"strict\"?}}`: the reply is decoded "
        "under the schema's grammar (embedded engine). Not together with `tools`."))
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="Sampling temperature, 0 to 2.")
    top_p: float | None = Field(None, ge=0.0, le=1.0, description="Accepted and ignored.")
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description=(
        "Maximum tokens of the answer (up to the context length)."))
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description=(
        "Same as `max_tokens` (wins when both are sent)."))
    n: int | None = Field(None, ge=1, le=128, description="Only 1 is supported (any other value is 400).")
    stream: bool | None = Field(False, description="Server-Sent Events of `chat.completion.chunk`, then `[DONE]`.")
    stream_options: Any = Field(None, description=(
        "`{\"include_usage\": true}`: a last chunk with `usage` and empty `choices`."))
    stop: Any = Field(None, description="Up to 4 strings: the answer ends before the first one.")
    user: str | None = Field(None, max_length=256, description=(
        "Your end user's id: logged and counted in the analytics (kind `openai_user`); it does not "
        "choose whose memories are used (the API key's user does)."))
    seed: int | None = Field(None, ge=-MAX_SEED - 1, le=MAX_SEED, description="Accepted and ignored.")
    frequency_penalty: float | None = Field(None, ge=-2.0, le=2.0, description="Accepted and ignored.")
    presence_penalty: float | None = Field(None, ge=-2.0, le=2.0, description="Accepted and ignored.")
    parallel_tool_calls: bool | None = Field(None, description="Accepted and ignored.")
    logprobs: bool | None = Field(None, description="Not supported: `true` is 400.")
    memory: Any = Field(None, description=(
        "Extension: `{\"retrieve\": true, \"learn\": true}` (both default true). `retrieve`: the key's "
        "user's memories relevant to the last user message reach the prompt; `learn`: the exchange is "
        "learned. With the openai SDK: `extra_body={\"memory\": {...}}`."))


class FunctionCall(BaseModel):
    name: str
    arguments: str = Field(description="The arguments as a JSON object in a string.")


class ToolCallOut(BaseModel):
    id: str
    type: str = "function"
    function: FunctionCall


class AssistantMessage(BaseModel):
    role: str = "assistant"
    content: str | None
    refusal: str | None = None
    tool_calls: list[ToolCallOut] | None = None


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: None = None
    finish_reason: str = Field(description="`stop`, `length` or `tool_calls`.")


class PromptTokensDetails(BaseModel):
    cached_tokens: int = Field(description="Prompt tokens served from the engine's KV cache.")


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails | None = None


class ChatCompletion(BaseModel):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    assistant_memories: list[UsedMemoryOut] = Field(default_factory=list, description=(
        "Extension: the key's user's memories that reached the prompt (empty when none did or "
        "retrieval was off)."))


class ModelObject(BaseModel):
    id: str
    object: str = "model"
    created: int = Field(description="Unix time this server started serving it.")
    owned_by: str


class ModelObjectList(BaseModel):
    object: str = "list"
    data: list[ModelObject]


class OpenAIErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    error: OpenAIErrorBody


OPENAI_ERROR_TEXT = {
    400: "Malformed JSON, or an invalid parameter named by `param` (`invalid_request_error`)",
    401: "Missing or invalid API key (`invalid_api_key`)",
    403: "A read-only key on a POST (`insufficient_permissions`)",
    404: "Unknown model (`model_not_found`)",
    413: "Body larger than server.max_body_bytes (`request_too_large`)",
    429: "Rate limited (`rate_limit_exceeded`, Retry-After header)",
    502: "The inference engine answered with an error (`upstream_error`)",
    503: "Engine unavailable: model missing, engine unreachable, queue or generation timed out",
}


def openai_errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the statuses an OpenAI-compatible route may answer with."""
    return {s: {"model": OpenAIError, "description": OPENAI_ERROR_TEXT[s]} for s in statuses}
