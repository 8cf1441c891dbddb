"""The one client layer every dashboard reads through: the HTTP API or the package in process, one interface.

Each dashboard has a client Protocol of its own (:mod:`dashboards.dream_client`, ...), with an in-process
implementation (``Local*Client``: services of a data directory and a user id) and an HTTP one
(``Http*Client``). The HTTP ones share :class:`HttpApi` here: one ``httpx.Client`` per dashboard session,
the key as ``Authorization: Bearer``, and every failure turned into a :class:`ClientError` whose message a
user can read (the API's error envelope), with two kinds the dashboards show as a banner instead of
a page: :class:`ApiUnreachable` (no answer at that address) and :class:`KeyRefused` (401/403).

:func:`connect` builds the right client for a page from the same settings everywhere: ``api_url`` and
``api_key`` (``ASSISTANT_API_URL`` / ``ASSISTANT_API_KEY``) select HTTP; otherwise the page builds the
services of ``config`` in process (:func:`dashboards.serving.local_services`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from dashboards.serving import api_message

ENV_URL, ENV_KEY, ENV_CONFIG = "ASSISTANT_API_URL", "ASSISTANT_API_KEY", "ASSISTANT_CONFIG"
PROBE = "/v1/system/status"  # any key may read it: answers whether the server is there and takes the key
T = TypeVar("T")


class ClientError(Exception):
    """What went wrong, in words for the user; ``status`` is the HTTP status (409, 404...) when known."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class ApiUnreachable(ClientError):
    """Nothing answered at the API's address (refused, timed out, DNS): a banner, not a traceback."""


class KeyRefused(ClientError):
    """The API refused the key (401: missing or invalid; 403: the key's role may not do this)."""


class HttpApi:
    """The API server at ``base_url`` as the key's user; ``send`` returns the decoded JSON (None for 204)."""

    def __init__(self, base_url: str, api_key: str, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None):
        self.base_url = base_url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"}
        self.http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout, transport=transport)

    def _check(self, response: httpx.Response) -> None:
        if response.status_code in (401, 403):
            raise KeyRefused(f"the API at {self.base_url} refused the key: {api_message(response)}",
                             response.status_code)
        if response.status_code >= 400:
            raise ClientError(api_message(response), response.status_code)

    def send(self, method: str, path: str, *, params: dict[str, Any] | None = None,
             json: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        params = {k: v for k, v in (params or {}).items() if v is not None}
        extra = {"timeout": timeout} if timeout is not None else {}
        try:
            response = self.http.request(method, path, params=params, json=json, **extra)
        except httpx.HTTPError as exc:
            raise ApiUnreachable(f"the API server at {self.base_url} did not answer: {exc}") from exc
        self._check(response)
        return None if response.status_code == 204 or not response.content else response.json()

    def events(self, path: str, json_body: dict[str, Any], *, timeout: float | None = None) -> Iterator[tuple[str, Any]]:
        """POST ``json_body`` to an SSE route and yield ``(event, data)`` (data decoded from JSON when it is)."""
        from httpx_sse import connect_sse  # the event-stream parser by httpx's authors (the lab extra)

        try:
            with connect_sse(self.http, "POST", path, json=json_body,
                             timeout=timeout if timeout is not None else self.http.timeout) as source:
                if source.response.status_code >= 400:
                    source.response.read()
                    self._check(source.response)
                for sse in source.iter_sse():
                    try:
                        data: Any = json.loads(sse.data)
                    except ValueError:
                        data = sse.data
                    yield sse.event, data
        except httpx.HTTPError as exc:
            raise ApiUnreachable(f"the API server at {self.base_url} did not answer: {exc}") from exc

    def close(self) -> None:
        self.http.close()


# --- where a page reads from ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a served page reads: the API at ``api_url`` with ``api_key``, else ``config``'s data directory."""

    api_url: str | None
    api_key: str = ""
    config: str | None = None

    @property
    def remote(self) -> bool:
        return bool(self.api_url)


def target(argv: list[str] | None = None) -> Target:
    """The settings of this process: ``ASSISTANT_API_URL`` / ``ASSISTANT_API_KEY`` / ``ASSISTANT_CONFIG``
    (``python -m dashboards`` sets them), the config also as the script's first argument
    (``panel serve dashboards/<page>.py --args config.toml``)."""
    argv = sys.argv if argv is None else argv
    config = os.environ.get(ENV_CONFIG) or (argv[1] if len(argv) > 1 and argv[1] else None)
    return Target(os.environ.get(ENV_URL) or None, os.environ.get(ENV_KEY, ""), config)


def connect(http: Callable[[str, str], T], local: Callable[[str | None], T], where: Target | None = None) -> T:
    """A page's client: ``http(api_url, api_key)`` when an API is named, else ``local(config)`` (in process)."""
    where = target() if where is None else where
    if where.remote:
        return http(str(where.api_url), where.api_key)
    return local(where.config)


def check(where: Target, *, timeout: float = 10.0, transport: httpx.BaseTransport | None = None) -> None:
    """Raise :class:`ApiUnreachable` or :class:`KeyRefused` now, before a page lays itself out, when the
    named API is not there or refuses the key (nothing to check in process)."""
    if not where.remote:
        return
    api = HttpApi(str(where.api_url), where.api_key, timeout=timeout, transport=transport)
    try:
        api.send("GET", PROBE)
    finally:
        api.close()
