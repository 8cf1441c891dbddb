"""The speaker companion service (api.companions.speaker) with a fake embedder, and the remote engine
(RemoteEmbedder) talking to it through the TestClient."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from fastapi.testclient import TestClient

from api.companions.speaker import create_app
from assistant.config import SpeakerIdSettings
from assistant.errors import ConfigError
from assistant.voice.audio import float_to_pcm, wav_bytes
from assistant.voice.engines import EngineError
from assistant.voice.speaker import RemoteEmbedder

RAW = {"Content-Type": "application/octet-stream"}


class FakeEmbedder:
    def __init__(self, dim: int = 256, fail: bool = False):
        self.dim = dim
        self.fail = fail
        self.received: list[bytes] = []

    def embed(self, pcm: bytes) -> np.ndarray:
        if self.fail:
            raise EngineError("speaker engine 'd-vector' failed: out of memory")
        self.received.append(pcm)
        seed = int.from_bytes(hashlib.sha256(pcm).digest()[:8], "little")
        vector = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


def speech(seed: int = 0, seconds: float = 1.0) -> bytes:
    return float_to_pcm(np.random.default_rng(seed).normal(0.0, 0.1, int(16_000 * seconds)))


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def service(fake: FakeEmbedder) -> TestClient:
    with TestClient(create_app(SpeakerIdSettings(), lambda settings: fake)) as client:
        yield client


def test_health(service: TestClient) -> None:
    response = service.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "engine": "ge2e", "dim": 256}
    assert response.headers["X-Request-Id"]


def test_remote_settings_run_the_in_process_engine(fake: FakeEmbedder) -> None:
    seen: list[SpeakerIdSettings] = []

    def factory(settings: SpeakerIdSettings) -> FakeEmbedder:
        seen.append(settings)
        return fake

    app = create_app(SpeakerIdSettings(engine="remote", url="http://127.0.0.1:8084"), factory)
    assert [(s.engine, s.url) for s in seen] == [("ge2e", None)]
    with TestClient(app) as client:
        assert client.get("/health").json()["engine"] == "ge2e"


def test_embed_raw_pcm_and_wav(service: TestClient, fake: FakeEmbedder) -> None:
    pcm = speech()
    raw = service.post("/v1/embed", content=pcm, headers=RAW)
    assert raw.status_code == 200, raw.text
    body = raw.json()
    assert body["dim"] == 256 and len(body["embedding"]) == 256
    assert np.linalg.norm(body["embedding"]) == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(body["embedding"], fake.embed(pcm), atol=1e-6)
    wav = service.post("/v1/embed", content=wav_bytes(pcm), headers={"Content-Type": "audio/wav"})
    assert wav.json() == body
    assert fake.received[-1] == pcm


@pytest.mark.parametrize(("body", "headers", "reason"), [
    (b"", RAW, "empty"),
    (b"\x00\x01\x02", RAW, "odd length"),
    (speech(seconds=0.3), RAW, "too short"),
    (b"RIFF garbage", {"Content-Type": "audio/wav"}, "not a WAV or FLAC file"),
])
def test_embed_validation_errors(service: TestClient, fake: FakeEmbedder, body: bytes, headers: dict,
                                 reason: str) -> None:
    response = service.post("/v1/embed", content=body, headers=headers)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["fields"] == [{"field": "body", "error": reason}]
    assert error["request_id"] == response.headers["X-Request-Id"]
    assert fake.received == []


def test_embed_over_two_mib_is_413(service: TestClient) -> None:
    response = service.post("/v1/embed", content=bytes(2 * 1024 * 1024 + 2), headers=RAW)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_engine_failure_is_503_engine_error() -> None:
    with TestClient(create_app(SpeakerIdSettings(), lambda settings: FakeEmbedder(fail=True))) as client:
        response = client.post("/v1/embed", content=speech(), headers=RAW)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "ENGINE_ERROR"
    assert "out of memory" in response.json()["error"]["message"]


def test_wrong_dimension_refuses_to_start() -> None:
    with pytest.raises(ConfigError, match="192-dim.*256"):
        create_app(SpeakerIdSettings(), lambda settings: FakeEmbedder(dim=192))


def test_remote_embedder_against_the_service(service: TestClient, fake: FakeEmbedder) -> None:
    remote = RemoteEmbedder("http://testserver", 5000, client=service)
    assert remote.dim == 256
    pcm = speech(3)
    assert np.allclose(remote.embed(pcm), fake.embed(pcm), atol=1e-6)
    with pytest.raises(EngineError, match="too short"):
        remote.embed(speech(seconds=0.2))
