"""Shared HTTP plumbing of the remote backends: one client, errors mapped to the spec's codes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from assistant.errors import ServiceUnavailableError, UpstreamError


class EngineClient:
    def __init__(self, engine: str, base_url: str, *, timeout_secs: float, headers: dict[str, str] | None = None):
        self.engine = engine
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_secs, connect=min(5.0, timeout_secs)),
            headers=headers or {},
        )

    @contextmanager
    def errors(self) -> Iterator[None]:
        try:
            yield
        except httpx.TimeoutException as exc:
            raise ServiceUnavailableError(f"{self.engine} at {self.base_url} timed out: {exc}") from exc
        except httpx.TransportError as exc:
            raise ServiceUnavailableError(f"{self.engine} at {self.base_url} is unreachable: {exc}") from exc

    def check(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            response.read()
            body = response.text[:300]
            raise UpstreamError(
                f"{self.engine} answered {response.status_code}: {body}",
                {"upstream_status": response.status_code},
            )
        return response

    def get_json(self, path: str) -> tuple[dict, int]:
        start = time.perf_counter()
        with self.errors():
            response = self.check(self._client.get(path))
            data = response.json()
        return data, round((time.perf_counter() - start) * 1000)

    @contextmanager
    def stream_lines(self, path: str, payload: dict) -> Iterator[Iterator[str]]:
        with self.errors(), self._client.stream("POST", path, json=payload) as response:
            self.check(response)
            yield response.iter_lines()

    def close(self) -> None:
        self._client.close()
