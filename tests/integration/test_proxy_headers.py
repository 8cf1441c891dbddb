"""Hole 4: the rate limit counted whatever IP X-Forwarded-For named, since uvicorn trusts proxy headers
from 127.0.0.1 by default. Served by a real uvicorn on loopback, as ``assistant serve`` runs it
(``api.cli.uvicorn_options``): the header changes nothing unless ``security.trusted_proxies`` lists the
proxy."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from api.cli import uvicorn_options
from assistant.config import Settings
from assistant.errors import AssistantError
from tests.integration.support import serve

FAKE = {"inference": {"backend": "scripted"}, "memory": {"embedding_backend": "hashing"}}


def limited(tmp_path: Path, trusted: list[str]):  # noqa: ANN201
    return serve(tmp_path, security={"rate_limit_rpm": 3, "trusted_proxies": trusted}, **FAKE)


def test_without_trusted_proxies_x_forwarded_for_is_ignored(tmp_path: Path) -> None:
    live, key = limited(tmp_path, [])
    headers = {"Authorization": f"Bearer {key}"}
    with live, httpx.Client(base_url=live.base_url) as client:
        remaining = []
        for i in range(3):  # a new "client IP" each time: still one bucket, the TCP peer's
            response = client.get("/v1/tools", headers={**headers, "X-Forwarded-For": f"203.0.113.{i}"})
            assert response.status_code == 200, response.text
            remaining.append(response.headers["x-ratelimit-remaining"])
        assert remaining == ["2", "1", "0"]
        refused = client.get("/v1/tools", headers={**headers, "X-Forwarded-For": "198.51.100.7"})
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "RATE_LIMITED"


def test_a_trusted_proxy_names_the_client(tmp_path: Path) -> None:
    live, key = limited(tmp_path, ["127.0.0.1"])
    headers = {"Authorization": f"Bearer {key}"}
    with live, httpx.Client(base_url=live.base_url) as client:
        for _ in range(3):
            assert client.get("/v1/tools", headers={**headers, "X-Forwarded-For": "203.0.113.1"}).status_code == 200
        assert client.get("/v1/tools", headers={**headers, "X-Forwarded-For": "203.0.113.1"}).status_code == 429
        other = client.get("/v1/tools", headers={**headers, "X-Forwarded-For": "203.0.113.2"})
        assert other.status_code == 200 and other.headers["x-ratelimit-remaining"] == "2"


def test_serve_passes_the_setting_to_uvicorn() -> None:
    off = uvicorn_options(Settings.load(**FAKE))
    assert off["proxy_headers"] is False and off["forwarded_allow_ips"] is None
    on = uvicorn_options(Settings.load(security={"trusted_proxies": ["10.0.0.0/8", " 127.0.0.1 "]}, **FAKE))
    assert on["proxy_headers"] is True and on["forwarded_allow_ips"] == ["10.0.0.0/8", "127.0.0.1"]


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    with pytest.raises((AssistantError, ValueError), match="not an IP address"):
        Settings.load(security={"trusted_proxies": ["proxy.example"]})
