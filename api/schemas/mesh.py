"""Request and response bodies of mesh inference (``/api/v1/mesh``), read into and built from
:mod:`assistant.mesh.types`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from assistant.llm.base import ChatMessage
from assistant.mesh.types import MeshAnswer, MeshRequest, Outcome, PeerStatus

MAX_MESSAGES = 256
MAX_CONTENT = 200_000  # characters of one message (the body is bounded by server.max_body_bytes too)
MAX_TOKENS = 32_768
OUTCOMES = [o.value for o in Outcome]


class MeshMessageIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"] = Field(
        description="`system` (or `developer`, read as system), `user` or `assistant`. No `tool` messages: tools are "
                    "not offered on the mesh.")
    content: str = Field(max_length=MAX_CONTENT, description="The message's text.")


class MeshInferenceIn(BaseModel):
    """A subset of OpenAI's chat request, plus where it may be served."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"messages": [{"role": "user", "content": "Name a planet."}], "max_tokens": 32},
        {"messages": [{"role": "user", "content": "Name a planet."}], "peer": "attic", "allow_fallback": False}]})

    messages: list[MeshMessageIn] = Field(min_length=1, max_length=MAX_MESSAGES, description=(
        f"The conversation, oldest first (1 to {MAX_MESSAGES}); at least one `user` message."))
    model: str | None = Field(None, min_length=1, max_length=200, description=(
        "The model to ask for. A peer gets its configured `model` when its entry names one, else this; the local "
        "engine uses it when it is one of its own models (`GET /v1/models`), else its configured model. Omitted: "
        "each engine's default. The answer's `model` says which answered."))
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description=(
        "Most tokens to generate. Omitted: the serving engine's configured maximum."))
    temperature: float | None = Field(None, ge=0.0, le=2.0, description=(
        "Sampling temperature, 0.0 to 2.0. Omitted: the serving engine's configured temperature."))
    peer: str | None = Field(None, min_length=1, max_length=64, description=(
        "Try this peer (a name of `mesh.peers`) first, when it is healthy and has a free slot; otherwise the usual "
        "choice applies. An unknown name is 422."))
    local_only: bool = Field(False, description="Answer with the local engine; no peer is asked.")
    allow_fallback: bool = Field(True, description=(
        "When no peer can serve (down, unhealthy or full) or the chosen peer fails or times out: `true` answers with "
        "the local engine (`fallback_reason` says why); `false` fails: 504 `GATEWAY_TIMEOUT` after a timeout, 502 "
        "`UPSTREAM_ERROR` after a failure, 503 `SERVICE_UNAVAILABLE` when no peer was available. Cannot be `false` "
        "with `local_only`."))

    @model_validator(mode="after")
    def _coherent(self) -> MeshInferenceIn:
        if not any(m.role == "user" for m in self.messages):
            raise ValueError("messages must hold at least one user message")
        if self.local_only and not self.allow_fallback:
            raise ValueError("local_only answers locally: it cannot be combined with allow_fallback = false")
        return self

    def request(self) -> MeshRequest:
        messages = tuple(ChatMessage("system" if m.role == "developer" else m.role, m.content) for m in self.messages)
        return MeshRequest(messages=messages, model=self.model, max_tokens=self.max_tokens,
                           temperature=self.temperature, peer=self.peer, local_only=self.local_only,
                           allow_fallback=self.allow_fallback)


class MeshUsageOut(BaseModel):
    prompt_tokens: int = Field(ge=0, description="Tokens of the prompt, as the serving engine counted them.")
    completion_tokens: int = Field(ge=0, description="Tokens generated.")
    total_tokens: int = Field(ge=0, description="Their sum.")


class AttemptOut(BaseModel):
    peer: str = Field(description="The peer's name.")
    outcome: str = Field(json_schema_extra={"enum": OUTCOMES}, description=(
        "`served` (it answered), `down` (marked down after an earlier failure: skipped), `unhealthy` (its health "
        "probe failed just now), `full` (all its `max_concurrency` slots in flight: skipped, not waited for), "
        "`timeout` and `failed` (the forward; the peer is then marked down for `mesh.down_secs`), `not_tried` "
        "(available, but another peer was chosen)."))
    detail: str = Field(description="Why, in words (empty when served).")
    latency_ms: float | None = Field(description="The forward's duration (served, timeout, failed); else null.")


class MeshInferenceOut(BaseModel):
    content: str = Field(description="The answer's text. A peer's answer is data: returned as text, never executed; "
                                     "a peer's tool calls are never taken.")
    model: str = Field(description="The model that answered, as its engine names it.")
    finish_reason: str = Field(description="`stop` or `length` (as the serving engine said).")
    usage: MeshUsageOut
    served_by: str = Field(description="The peer's name (`mesh.peers`), or `local` for the local engine.")
    fallback_reason: str | None = Field(description=(
        "Why the local engine answered (`local_only was requested`, `no peers are configured (mesh.peers)`, `no "
        "peer can serve: ...`, `peer 'x' timed out: ...`, `peer 'x' failed: ...`); null when a peer answered."))
    latency_ms: float = Field(ge=0, description="The whole request on this instance: health probes, the forward "
                                                "and any local fallback.")
    route: list[AttemptOut] = Field(description="Each peer considered and what happened to it (empty when the "
                                                "request went straight to the local engine).")

    @classmethod
    def of(cls, answer: MeshAnswer) -> MeshInferenceOut:
        return cls(**answer.as_dict())


def _when(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


class PeerStatusOut(BaseModel):
    name: str = Field(description="The peer's name.")
    url: str = Field(description="Its base URL (the key is never shown).")
    healthy: bool | None = Field(description="The last probe's or forward's verdict; null before the first probe.")
    down_until: datetime | None = Field(description="While marked down after a failed probe or forward: until when "
                                                    "it is skipped (UTC); else null.")
    last_error: str | None = Field(description="The last failure (probe or forward), kept after recovery.")
    checked_at: datetime | None = Field(description="The last health probe (UTC); null before the first.")
    latency_ewma_ms: float | None = Field(description="Exponentially weighted moving average of its successful "
                                                      "forwards' latency (`mesh.latency_alpha`); null before one.")
    in_flight: int = Field(ge=0, description="Forwards under way.")
    max_concurrency: int = Field(ge=1, description="Its slots: a request finding all in flight skips the peer.")
    served: int = Field(ge=0, description="Forwards it answered since the start.")
    failed: int = Field(ge=0, description="Forwards that failed or timed out since the start.")

    @classmethod
    def of(cls, status: PeerStatus) -> PeerStatusOut:
        data = status.as_dict()
        return cls(**{**data, "down_until": _when(status.down_until), "checked_at": _when(status.checked_at)})


class MeshPeersOut(BaseModel):
    peers: list[PeerStatusOut] = Field(description="Every configured peer, in `mesh.peers` order.")
    timeout_secs: float = Field(description="`mesh.timeout_secs`: the bound of one forward.")
    health_interval_secs: float = Field(description="`mesh.health_interval_secs`: a health older than this is "
                                                    "probed again before a request.")
    down_secs: float = Field(description="`mesh.down_secs`: how long a failing peer is skipped.")
