"""The wake-word companion service's routes and errors, with a fake engine injected (no model)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.companions.wakeword import MAX_STREAMS, Streams, create_app
from assistant.config import WakeWordSettings
from assistant.errors import ConfigError
from assistant.voice.engines import EngineError
from assistant.voice.wake import PACKAGED_WORDS, WakeDetection

PCM = {"Content-Type": "application/octet-stream"}


class FakeEngine:
    """Detects its first word once per 32000 bytes (1 s) received; fails on a body starting with b"FAIL"."""

    def __init__(self, settings: WakeWordSettings, stream_id: str) -> None:
        self.settings = settings
        self.stream_id = stream_id
        self.words = tuple(settings.words)
        self.received = 0
        self.closed = False

    def process(self, pcm: bytes) -> list[WakeDetection]:
        if pcm.startswith(b"FAIL"):
            raise EngineError("the model crashed")
        before, self.received = self.received, self.received + len(pcm)
        return [WakeDetection(self.words[0], 0.875, float(n)) for n in range(before // 32000 + 1,
                                                                             self.received // 32000 + 1)]

    def reset(self) -> None:
        self.received = 0

    def close(self) -> None:
        self.closed = True


class Factory:
    def __init__(self) -> None:
        self.made: list[FakeEngine] = []

    def __call__(self, settings: WakeWordSettings, stream_id: str) -> FakeEngine:
        self.made.append(FakeEngine(settings, stream_id))
        return self.made[-1]

    def of(self, stream_id: str) -> list[FakeEngine]:
        return [e for e in self.made if e.stream_id == stream_id]


@pytest.fixture
def factory() -> Factory:
    return Factory()


@pytest.fixture
def client(factory: Factory) -> TestClient:
    settings = WakeWordSettings(engine="remote", url="http://127.0.0.1:8083", words=["hey_jarvis", "alexa"])
    return TestClient(create_app(settings, engine_factory=factory))


def post(client: TestClient, stream: str, body: bytes, headers: dict[str, str] | None = None):
    return client.post(f"/v1/streams/{stream}/audio", content=body, headers=PCM if headers is None else headers)


def assert_error(response, status: int, code: str, message: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert message in error["message"]
    assert error["request_id"] == response.headers["X-Request-Id"]
    return error


# --- start-up -------------------------------------------------------------------------------------------------


def test_start_up_checks_one_engine_in_process_whatever_the_configured_engine(factory: Factory) -> None:
    create_app(WakeWordSettings(engine="remote", url="http://x", words=["alexa"], sensitivity=0.7), factory)
    [probe] = factory.made
    assert probe.closed
    assert (probe.settings.engine, probe.settings.url, probe.settings.sensitivity) == ("pyopen-wakeword", None, 0.7)


def test_unknown_word_refuses_to_start(factory: Factory) -> None:
    with pytest.raises(ConfigError, match="unknown wake word 'computer'"):
        create_app(WakeWordSettings(words=["computer"]), factory)
    assert factory.made == []


# --- read routes ----------------------------------------------------------------------------------------------


def test_health(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "engine": "pyopen-wakeword", "words": ["hey_jarvis", "alexa"]}


def test_words(client: TestClient) -> None:
    assert client.get("/v1/words").json() == {"words": ["hey_jarvis", "alexa"], "available": list(PACKAGED_WORDS)}


# --- audio -------------------------------------------------------------------------------------------------------


def test_audio_creates_the_stream_on_first_use_and_returns_detections(client: TestClient, factory: Factory) -> None:
    assert post(client, "kitchen", bytes(20000)).json() == {"detections": []}
    response = post(client, "kitchen", bytes(50000))
    assert response.status_code == 200
    assert response.json() == {"detections": [{"word": "hey_jarvis", "score": 0.875, "at_s": 1.0},
                                              {"word": "hey_jarvis", "score": 0.875, "at_s": 2.0}]}
    [engine] = factory.of("kitchen")
    assert engine.received == 70000
    assert engine.settings.engine == "pyopen-wakeword"


def test_streams_are_independent(client: TestClient, factory: Factory) -> None:
    post(client, "kitchen", bytes(30000))
    assert post(client, "office.1", bytes(30000)).json() == {"detections": []}
    assert len(post(client, "kitchen", bytes(30000)).json()["detections"]) == 1
    assert [e.received for e in factory.of("office.1")] == [30000]


def test_an_empty_body_is_no_audio(client: TestClient) -> None:
    assert post(client, "kitchen", b"").json() == {"detections": []}


@pytest.mark.parametrize("content_type", [None, "application/octet-stream", "audio/L16; rate=16000; channels=1"])
def test_raw_pcm_content_types_are_accepted(client: TestClient, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    assert post(client, "kitchen", bytes(640), headers).status_code == 200


def test_another_content_type_is_refused(client: TestClient) -> None:
    error = assert_error(post(client, "kitchen", b"{}", {"Content-Type": "application/json"}), 422,
                         "VALIDATION_ERROR", "got Content-Type 'application/json'")
    assert error["details"]["fields"] == [{"field": "content-type", "error": "unsupported type 'application/json'"}]


def test_odd_length_body_is_422(client: TestClient) -> None:
    error = assert_error(post(client, "kitchen", bytes(3201)), 422, "VALIDATION_ERROR",
                         "raw PCM 16-bit needs an even number of bytes, got 3201")
    assert error["details"]["fields"] == [{"field": "body", "error": "odd length"}]


def test_64_kib_is_accepted_and_more_is_413(client: TestClient, factory: Factory) -> None:
    assert post(client, "kitchen", bytes(65536)).status_code == 200
    assert_error(post(client, "kitchen", bytes(65538)), 413, "PAYLOAD_TOO_LARGE", "at most 65536 bytes")
    assert factory.of("kitchen")[0].received == 65536


@pytest.mark.parametrize("stream_id", ["living%20room", "a" * 65, "k%C3%BCche"])
def test_stream_id_must_match_the_pattern(client: TestClient, stream_id: str) -> None:
    error = assert_error(post(client, stream_id, bytes(640)), 422, "VALIDATION_ERROR", "stream_id")
    assert error["details"]["fields"][0]["field"] == "stream_id"
    assert_error(client.delete(f"/v1/streams/{stream_id}"), 422, "VALIDATION_ERROR", "stream_id")


def test_a_64_character_stream_id_is_accepted(client: TestClient) -> None:
    assert post(client, "A-z_0.9" + "a" * 57, bytes(640)).status_code == 200


def test_an_engine_failure_uses_the_error_envelope(client: TestClient) -> None:
    response = post(client, "kitchen", b"FAIL" + bytes(100))
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "ENGINE_ERROR"
    assert response.json()["error"]["message"] == "the model crashed"


# --- forgetting streams -----------------------------------------------------------------------------------------


def test_delete_forgets_the_stream(client: TestClient, factory: Factory) -> None:
    post(client, "kitchen", bytes(30000))
    response = client.delete("/v1/streams/kitchen")
    assert response.status_code == 204
    assert response.content == b""
    assert factory.of("kitchen")[0].closed
    assert post(client, "kitchen", bytes(30000)).json() == {"detections": []}  # a fresh engine: at_s from 0
    assert len(factory.of("kitchen")) == 2


def test_delete_of_an_unknown_stream_is_404(client: TestClient) -> None:
    assert_error(client.delete("/v1/streams/garage"), 404, "NOT_FOUND", "no wake word stream 'garage'")


def test_shutdown_closes_every_engine(factory: Factory) -> None:
    with TestClient(create_app(WakeWordSettings(), factory)) as client:
        post(client, "kitchen", bytes(640))
        post(client, "office", bytes(640))
    assert all(engine.closed for engine in factory.made)


def test_the_least_recently_used_stream_makes_room(factory: Factory) -> None:
    assert MAX_STREAMS == 64
    streams = Streams(WakeWordSettings(), factory, max_streams=2)
    streams.process("a", bytes(10))
    streams.process("b", bytes(10))
    streams.process("a", bytes(10))
    streams.process("c", bytes(10))
    assert len(streams) == 2
    assert [(e.stream_id, e.closed) for e in factory.made] == [("a", False), ("b", True), ("c", False)]
    assert not streams.forget("b")
    assert streams.forget("a")
