"""HTTP to the peers: a health probe and a forwarded chat completion (OpenAI's wire format).

A forward posts to ``{url}/v1/chat/completions`` with the peer's key (``Authorization: Bearer``), the
messages, the model (the peer entry's, else the request's, else none: the peer's default),
``max_tokens``, ``temperature``, ``stream: false`` and the assistant's ``memory`` extension switched
off (``{"retrieve": false, "learn": false}``: the peer's memories are its key's user's, not the
caller's, and nothing of the caller's is learned there; other OpenAI-compatible servers ignore it).
No ``tools`` are ever sent. The answer is data: only ``choices[0].message.content`` (a string),
``finish_reason``, ``model`` and ``usage`` are read; an answer without text (tool calls, refusal
objects), larger than ``mesh.max_answer_bytes`` or not a chat completion is a failed forward.

Synchronous (``httpx.Client``, thread-safe, one connection pool): the mesh runs it on its own worker
threads, so the event loop never waits on a peer and the client is closed from any thread.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from assistant.config.extended import MeshPeer
from assistant.mesh.types import MeshRequest, Reply, Usage

USER_AGENT = "assistant-mesh"


class ForwardError(Exception):
    """A forward that did not give an answer; ``timed_out`` when the peer was too slow."""

    def __init__(self, message: str, *, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out


def request_body(peer: MeshPeer, request: MeshRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": [{"role": m.role, "content": m.content} for m in request.messages],
                            "stream": False, "memory": {"retrieve": False, "learn": False}}
    model = peer.model or request.model
    if model is not None:
        body["model"] = model
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    return body


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def read_reply(data: Any, fallback_model: str) -> Reply:
    """The text answer of a ``chat.completion`` object; ForwardError when it is not one or has no text."""
    if not isinstance(data, dict):
        raise ForwardError("the answer is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ForwardError("the answer has no choices[0]")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise ForwardError("the answer has no text in choices[0].message.content (tool calls are not taken)")
    finish = choices[0].get("finish_reason")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    model = data.get("model")
    return Reply(content=content, model=model if isinstance(model, str) and model else fallback_model,
                 finish_reason=finish if isinstance(finish, str) and finish else "stop",
                 usage=Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens"))))


def _error_text(raw: bytes) -> str:
    """The peer's error message (OpenAI's shape or the envelope), cut short."""
    try:
        error = json.loads(raw).get("error", {})
        text = error.get("message") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        text = None
    return (text or raw.decode("utf-8", "replace")).strip()[:300]


class PeerClient:
    """Probes and forwards over one ``httpx.Client`` (``transport``: a test double, e.g. ``httpx.MockTransport``)."""

    def __init__(self, *, max_answer_bytes: int, transport: httpx.BaseTransport | None = None):
        self.max_answer_bytes = max_answer_bytes
        self.http = httpx.Client(transport=transport, follow_redirects=False, headers={"User-Agent": USER_AGENT},
                                 limits=httpx.Limits(max_connections=256, max_keepalive_connections=32))

    def probe(self, peer: MeshPeer, timeout: float) -> str | None:
        """None when ``GET {url}{health_path}`` answers 2xx within ``timeout``; else why not."""
        try:
            response = self.http.get(peer.url + peer.health_path, timeout=timeout)
        except httpx.TimeoutException:
            return f"health probe timed out after {timeout:g} s"
        except httpx.HTTPError as exc:
            return f"health probe failed: {type(exc).__name__}: {exc}"[:300]
        if not response.is_success:
            return f"health probe answered HTTP {response.status_code}"
        return None

    def forward(self, peer: MeshPeer, request: MeshRequest, timeout: float) -> Reply:
        """The peer's answer; ForwardError when it fails (``timed_out`` past ``timeout`` seconds)."""
        headers = {"Authorization": f"Bearer {peer.api_key}", "Accept": "application/json"}
        limits = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        try:
            with self.http.stream("POST", peer.url + "/v1/chat/completions", json=request_body(peer, request),
                                  headers=headers, timeout=limits) as response:
                raw = bytearray()
                for chunk in response.iter_bytes():
                    raw += chunk
                    if len(raw) > self.max_answer_bytes:
                        raise ForwardError(f"the answer is larger than mesh.max_answer_bytes ({self.max_answer_bytes})")
        except httpx.TimeoutException as exc:
            raise ForwardError(f"no answer within {timeout:g} s ({type(exc).__name__})", timed_out=True) from exc
        except httpx.HTTPError as exc:
            raise ForwardError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        if not response.is_success:
            raise ForwardError(f"HTTP {response.status_code}: {_error_text(bytes(raw))}")
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ForwardError("the answer is not JSON") from exc
        return read_reply(data, peer.model or request.model or "")

    def close(self) -> None:
        self.http.close()
