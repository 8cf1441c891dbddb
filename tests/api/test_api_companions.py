"""What every companion service shares: loopback by default, a token required to bind elsewhere,
and with a token every request needs ``Authorization: Bearer <token>`` (401 in the error envelope
otherwise). Both services are built with fake engines; the remote clients send the token."""

from __future__ import annotations

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.companions import MIN_TOKEN_CHARS, check_binding, is_loopback
from api.companions.speaker import create_app as speaker_app
from api.companions.wakeword import create_app as wakeword_app
from assistant.config import SpeakerIdSettings, WakeWordSettings
from assistant.errors import ConfigError
from assistant.voice.speaker import RemoteEmbedder
from assistant.voice.wake import RemoteWakeWord, WakeDetection

TOKEN = "s3cret-companion-token-0123456789"


class FakeWake:
    def __init__(self, settings: WakeWordSettings, stream_id: str) -> None:
        self.words = tuple(settings.words)

    def process(self, pcm: bytes) -> list[WakeDetection]:
        return [WakeDetection(self.words[0], 0.9, 1.0)] if pcm else []

    def reset(self) -> None: ...

    def close(self) -> None: ...


class FakeEmbedder:
    dim = 256

    def embed(self, pcm: bytes) -> np.ndarray:
        return np.ones(256, dtype=np.float32) / 16


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.3.2.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("assistant.lan", False),
])
def test_what_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_beyond_loopback_only_with_a_long_enough_token() -> None:
    check_binding("127.0.0.1", None)
    check_binding("0.0.0.0", TOKEN)
    with pytest.raises(ConfigError, match="refusing to serve on 0.0.0.0 without a token"):
        check_binding("0.0.0.0", None)
    with pytest.raises(ConfigError, match=f"at least {MIN_TOKEN_CHARS} characters"):
        check_binding("127.0.0.1", "short")


@pytest.fixture(params=["wakeword", "speaker"])
def protected(request: pytest.FixtureRequest) -> tuple[TestClient, str]:
    if request.param == "wakeword":
        app = wakeword_app(WakeWordSettings(), engine_factory=FakeWake, token=TOKEN)
        return TestClient(app), "/v1/words"
    return TestClient(speaker_app(SpeakerIdSettings(), lambda settings: FakeEmbedder(), token=TOKEN)), "/health"


@pytest.mark.parametrize("header", [None, "Bearer wrong-token-0123456789", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN}x"])
def test_a_request_without_the_token_is_401(protected: tuple[TestClient, str], header: str | None) -> None:
    client, path = protected
    response = client.get(path, headers={"Authorization": header} if header else {})
    assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "UNAUTHORIZED" and "Bearer" in error["message"]
    assert error["request_id"] == response.headers["X-Request-Id"]
    assert client.get("/openapi.json").status_code == 401  # the documents too


def test_the_token_opens_every_route(protected: tuple[TestClient, str]) -> None:
    client, path = protected
    assert client.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_without_a_token_nothing_is_asked() -> None:
    assert TestClient(wakeword_app(WakeWordSettings(), engine_factory=FakeWake)).get("/v1/words").status_code == 200


def test_the_remote_wake_word_client_sends_its_token() -> None:
    app = wakeword_app(WakeWordSettings(), engine_factory=FakeWake, token=TOKEN)
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="401.*set \\[voice.wake_word\\] token"):
        RemoteWakeWord("http://wake", "kitchen", ("hey_jarvis",), 2000, _sync(transport))
    client = RemoteWakeWord("http://wake", "kitchen", ("hey_jarvis",), 2000, _sync(transport), token=TOKEN)
    assert [d.word for d in client.process(b"\0\0" * 800)] == ["hey_jarvis"]
    client.close()


def test_the_remote_speaker_client_sends_its_token() -> None:
    with TestClient(speaker_app(SpeakerIdSettings(), lambda settings: FakeEmbedder(), token=TOKEN)) as service:
        with pytest.raises(ConfigError, match="refused the token: set \\[voice.speaker_id\\] token"):
            RemoteEmbedder("http://testserver", 5000, client=service)
        service.headers["Authorization"] = f"Bearer {TOKEN}"
        assert RemoteEmbedder("http://testserver", 5000, client=service).dim == 256


def _sync(transport: httpx.ASGITransport) -> httpx.BaseTransport:
    """An ASGI app as a synchronous transport (RemoteWakeWord's client is synchronous)."""
    return _SyncASGI(transport)


class _SyncASGI(httpx.BaseTransport):
    def __init__(self, transport: httpx.ASGITransport) -> None:
        self.transport = transport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        import anyio

        async def call() -> httpx.Response:
            response = await self.transport.handle_async_request(request)
            body = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=body)

        return anyio.run(call)
