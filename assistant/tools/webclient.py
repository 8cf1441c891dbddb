"""One small httpx client per remote service, whose failures come back as precise ToolErrors.

The weather, web search and transit backends all call public HTTP APIs. They share what a tool
needs from such a call: a timeout from the section's settings, a User-Agent, and every way the call
can fail (timeout, refused connection, HTTP error status, a body that is not JSON) turned into a
:class:`ToolError` naming the service, so the model can tell the user what went wrong. The
service's own reason (Open-Meteo's ``reason``, transport.rest's ``message``) is kept when present.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx

from assistant.tools.base import ToolError

USER_AGENT = "assistant/0.1 (self-hosted personal assistant)"
_REASON_KEYS = ("reason", "message", "error", "detail")


def _reason(response: httpx.Response) -> str | None:
    """The service's own explanation in an error body, when it sends one in JSON."""
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(body, dict):
        for key in _REASON_KEYS:
            if isinstance(body.get(key), str) and body[key].strip():
                return body[key].strip()[:300]
    return None


class ServiceError(ToolError):
    """A service's failure; ``status`` is the HTTP status when it answered with an error."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ServiceClient:
    """``get_json`` / ``post_form`` against one named service; closes its connection pool on ``close``."""

    def __init__(self, service: str, timeout_secs: float, headers: Mapping[str, str] | None = None):
        self.service = service
        self.timeout_secs = timeout_secs
        self._client = httpx.Client(timeout=timeout_secs, follow_redirects=True,
                                    headers={"User-Agent": USER_AGENT, **(headers or {})})

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """The response of a 2xx answer; every failure is a :class:`ServiceError`."""
        try:
            response = self._client.request(method, url, **kwargs)
        except httpx.TimeoutException:
            raise ServiceError(f"{self.service} did not answer within {self.timeout_secs:g} s") from None
        except httpx.RequestError as exc:
            cause = str(exc) or type(exc).__name__
            raise ServiceError(f"{self.service} could not be reached ({cause})") from None
        if response.is_error:
            reason = _reason(response)
            raise ServiceError(f"{self.service} answered HTTP {response.status_code}"
                               + (f": {reason}" if reason else ""), response.status_code)
        return response

    def get_json(self, url: str, params: Mapping[str, Any]) -> Any:
        response = self.request("GET", url, params=dict(params))
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ServiceError(f"{self.service} sent an answer that is not JSON") from None

    def post_form(self, url: str, data: Mapping[str, str]) -> httpx.Response:
        return self.request("POST", url, data=dict(data))

    def close(self) -> None:
        self._client.close()
