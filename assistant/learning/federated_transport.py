"""How a round reaches a peer: ``POST {url}/api/v1/federated/sync`` with the user's key on the peer.

:class:`PeerTransport` is the protocol (tests give an in-process one); :class:`HttpPeerTransport` is httpx.
The answer is read up to a byte limit: a larger one is a failed exchange, never held in memory whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

SYNC_PATH = "/api/v1/federated/sync"


@dataclass(frozen=True)
class PeerAnswer:
    status: int
    body: bytes


class PeerUnreachable(Exception):
    """The peer could not be asked (connection refused, timeout, an answer over the limit)."""


class PeerTransport(Protocol):
    def exchange(self, url: str, api_key: str, body: bytes, *, timeout: float, max_bytes: int) -> PeerAnswer: ...


class HttpPeerTransport:
    """httpx, one short-lived client per exchange (rounds are rare)."""

    def exchange(self, url: str, api_key: str, body: bytes, *, timeout: float, max_bytes: int) -> PeerAnswer:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False) as client, client.stream(
                    "POST", url.rstrip("/") + SYNC_PATH, content=body, headers=headers) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise PeerUnreachable(f"the peer's answer exceeds {max_bytes} bytes "
                                              "(federated.max_payload_bytes)")
                    chunks.append(chunk)
                return PeerAnswer(response.status_code, b"".join(chunks))
        except httpx.TimeoutException:
            raise PeerUnreachable(f"no answer within {timeout:g} s (federated.timeout_secs)") from None
        except httpx.HTTPError as exc:
            raise PeerUnreachable(f"{type(exc).__name__}: {exc}") from None


def error_message(answer: PeerAnswer) -> str:
    """The message of a peer's error envelope, or the start of its body."""
    import json

    try:
        data: Any = json.loads(answer.body)
        error = data.get("error") if isinstance(data, dict) else None
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return f"{error.get('code', answer.status)}: {error['message']}"
    except ValueError:
        pass
    return answer.body[:200].decode("utf-8", "replace") or f"HTTP {answer.status}"
