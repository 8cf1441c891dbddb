"""Wake word detection without models: the engine registry, word validation, the threshold and refractory
rule, ``scan``, and the remote client against a scripted companion service (httpx.MockTransport)."""

from __future__ import annotations

import json

import httpx
import pytest

from assistant.config import WakeWordSettings
from assistant.errors import AssistantError, ConfigError
from assistant.voice.audio import silence
from assistant.voice.engines import EngineError, Registry
from assistant.voice.wake import (
    MAX_REQUEST_BYTES,
    PACKAGED_WORDS,
    REFRACTORY_S,
    RemoteWakeWord,
    Trigger,
    WakeDetection,
    check_words,
    create_wake_word,
    scan,
)

URL = "http://wake.test"

# --- the shared engine helpers -----------------------------------------------------------------------------


def test_engine_error_is_an_assistant_error_with_its_code() -> None:
    error = EngineError("timed out")
    assert isinstance(error, AssistantError)
    assert (error.code, error.message) == ("ENGINE_ERROR", "timed out")


def test_registry_resolves_lazily_and_names_known_ids() -> None:
    registry: Registry[object] = Registry("test engine", {"b": "json:dumps"})
    registry.register("a", "json:loads")
    assert registry.ids() == ["a", "b"]
    assert registry.get("a") is json.loads
    with pytest.raises(ConfigError, match=r"^unknown test engine 'c'; known: a, b$"):
        registry.get("c")


# --- configuration -----------------------------------------------------------------------------------------


def test_packaged_words_are_the_five_bundled_models() -> None:
    assert PACKAGED_WORDS == ("alexa", "hey_jarvis", "hey_mycroft", "hey_rhasspy", "okay_nabu")


def test_check_words_keeps_order_and_drops_duplicates() -> None:
    assert check_words(["alexa", "hey_jarvis", "alexa"]) == ("alexa", "hey_jarvis")


@pytest.mark.parametrize(("words", "message"), [
    ([], "voice.wake_word.words is empty; choose from: alexa, hey_jarvis, hey_mycroft, hey_rhasspy, okay_nabu"),
    (["hey_jarvis", "computer"], ("unknown wake word 'computer' in voice.wake_word.words; "
                                  "packaged words: alexa, hey_jarvis, hey_mycroft, hey_rhasspy, okay_nabu")),
])
def test_check_words_refuses_unknown_words(words: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_words(words)
    assert caught.value.message == message


def test_unknown_engine_names_the_known_engines() -> None:
    with pytest.raises(ConfigError, match=r"^unknown wake word engine 'porcupine'; known: pyopen-wakeword, remote$"):
        create_wake_word(WakeWordSettings(engine="porcupine"))


@pytest.mark.parametrize("engine", ["pyopen-wakeword", "remote"])
def test_unknown_word_fails_before_any_model_or_request(engine: str) -> None:
    with pytest.raises(ConfigError, match="unknown wake word 'computer'"):
        create_wake_word(WakeWordSettings(engine=engine, url=URL, words=["computer"]))


def test_remote_engine_needs_a_url() -> None:
    with pytest.raises(ConfigError, match=r"voice.wake_word.url is required when voice.wake_word.engine is 'remote'"):
        create_wake_word(WakeWordSettings(engine="remote"))


def test_remote_engine_unreachable_at_construction_is_a_config_error() -> None:
    settings = WakeWordSettings(engine="remote", url="http://127.0.0.1:1", timeout_ms=2000)
    with pytest.raises(ConfigError, match=r"^wake word engine remote: the wake word service at .* is unreachable"):
        create_wake_word(settings, stream_id="kitchen")


# --- threshold and refractory period -----------------------------------------------------------------------


def test_sensitivity_is_the_score_threshold_inclusive() -> None:
    trigger = Trigger(0.5)
    assert trigger.decide({"hey_jarvis": 0.4999}, 0.08) is None
    assert trigger.decide({"hey_jarvis": 0.5}, 0.16) == WakeDetection("hey_jarvis", 0.5, 0.16)


def test_the_best_word_of_a_step_wins() -> None:
    trigger = Trigger(0.5)
    assert trigger.decide({"alexa": 0.7, "hey_jarvis": 0.9, "okay_nabu": 0.1}, 1.0) == WakeDetection(
        "hey_jarvis", 0.9, 1.0)
    assert trigger.decide({}, 3.0) is None


def test_refractory_period_suppresses_every_word_for_one_second_of_audio() -> None:
    assert REFRACTORY_S == 1.0
    trigger = Trigger(0.5)
    assert trigger.decide({"hey_jarvis": 0.9}, 2.0)
    assert trigger.decide({"hey_jarvis": 0.99}, 2.08) is None
    assert trigger.decide({"alexa": 0.99}, 2.96) is None
    assert trigger.decide({"alexa": 0.6}, 3.0) == WakeDetection("alexa", 0.6, 3.0)


def test_reset_ends_the_refractory_period() -> None:
    trigger = Trigger(0.5)
    assert trigger.decide({"hey_jarvis": 0.9}, 2.0)
    trigger.reset()
    assert trigger.decide({"hey_jarvis": 0.9}, 0.08)


# --- scan ---------------------------------------------------------------------------------------------------


class RecordingEngine:
    """Records the chunk sizes it is fed; detects at every 10th chunk."""

    words = ("hey_jarvis",)

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def process(self, pcm: bytes) -> list[WakeDetection]:
        self.sizes.append(len(pcm))
        return [WakeDetection("hey_jarvis", 0.9, len(self.sizes) * 0.08)] if len(self.sizes) % 10 == 0 else []

    def reset(self) -> None:
        self.sizes.clear()

    def close(self) -> None:
        pass


def test_scan_feeds_chunks_of_chunk_ms_and_collects_detections() -> None:
    engine = RecordingEngine()
    found = scan(engine, silence(2.0) + bytes(100))
    assert engine.sizes == [2560] * 25 + [100]
    assert [d.at_s for d in found] == [0.8, 1.6]
    engine.reset()
    scan(engine, silence(1.0), chunk_ms=250)
    assert engine.sizes == [8000] * 4


# --- remote client -------------------------------------------------------------------------------------------


class FakeService:
    """The companion service's HTTP interface, scripted: detects ``word`` once per 32000 bytes received."""

    def __init__(self, served: list[str], word: str = "hey_jarvis") -> None:
        self.served = served
        self.word = word
        self.received: dict[str, int] = {}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path == "/v1/words":
            return httpx.Response(200, json={"words": self.served, "available": list(PACKAGED_WORDS)})
        stream = path.split("/")[3]
        if request.method == "DELETE":
            if self.received.pop(stream, None) is None:
                return httpx.Response(404, json={"error": {"code": "NOT_FOUND", "message": "no stream"}})
            return httpx.Response(204)
        before = self.received.get(stream, 0)
        after = self.received[stream] = before + len(request.content)
        hits = [{"word": self.word, "score": 0.9, "at_s": n} for n in range(before // 32000 + 1, after // 32000 + 1)]
        return httpx.Response(200, json={"detections": hits})


def remote(service: FakeService, words: tuple[str, ...] = ("hey_jarvis",)) -> RemoteWakeWord:
    return RemoteWakeWord(URL, "kitchen", words, 2000, transport=httpx.MockTransport(service))


def test_remote_posts_raw_pcm_in_pieces_of_at_most_64_kib() -> None:
    service = FakeService(["hey_jarvis"])
    engine = remote(service)
    found = engine.process(silence(5.0))  # 160000 bytes: 65536 + 65536 + 28928
    posts = [r for r in service.requests if r.method == "POST"]
    assert [len(r.content) for r in posts] == [MAX_REQUEST_BYTES, MAX_REQUEST_BYTES, 160000 - 2 * MAX_REQUEST_BYTES]
    assert {r.url.path for r in posts} == {"/v1/streams/kitchen/audio"}
    assert {r.headers["content-type"] for r in posts} == {"application/octet-stream"}
    assert found == [WakeDetection("hey_jarvis", 0.9, n) for n in (1, 2, 3, 4, 5)]
    assert engine.process(b"") == []


def test_remote_keeps_only_its_words() -> None:
    engine = remote(FakeService(["alexa", "hey_jarvis"], word="alexa"))
    assert engine.words == ("hey_jarvis",)
    assert engine.process(silence(2.0)) == []


def test_remote_refuses_words_the_service_does_not_serve() -> None:
    with pytest.raises(ConfigError, match=r"^the wake word service at http://wake.test does not detect 'alexa'; "
                                          r"it serves: hey_jarvis$"):
        remote(FakeService(["hey_jarvis"]), words=("hey_jarvis", "alexa"))


def test_remote_refuses_a_stream_id_the_service_would_refuse() -> None:
    with pytest.raises(ConfigError, match="wake word stream id 'living room' must match"):
        RemoteWakeWord(URL, "living room", ("hey_jarvis",), 2000, transport=httpx.MockTransport(FakeService([])))


def test_remote_reset_forgets_the_stream_and_tolerates_an_unknown_one() -> None:
    service = FakeService(["hey_jarvis"])
    engine = remote(service)
    engine.reset()  # 404: never fed
    engine.process(silence(0.5))
    engine.reset()
    assert service.received == {}
    assert [r.method for r in service.requests] == ["GET", "DELETE", "POST", "DELETE"]


def test_remote_refuses_odd_length_pcm() -> None:
    with pytest.raises(ValueError, match="even number of bytes, got 3"):
        remote(FakeService(["hey_jarvis"])).process(b"abc")


class Failing:
    """Answers /v1/words, then fails every other request with ``error`` (an exception or a status)."""

    def __init__(self, error: Exception | int) -> None:
        self.error = error

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/words":
            return httpx.Response(200, json={"words": ["hey_jarvis"], "available": list(PACKAGED_WORDS)})
        if isinstance(self.error, Exception):
            raise self.error
        return httpx.Response(self.error, json={"error": {"code": "INTERNAL_ERROR", "message": "boom"}})


@pytest.mark.parametrize(("error", "message"), [
    (httpx.ReadTimeout("slow"), r"^the wake word service at http://wake.test timed out$"),
    (httpx.ConnectError("refused"), r"^the wake word service at http://wake.test is unreachable: refused$"),
    (500, r"^the wake word service answered POST /v1/streams/kitchen/audio with 500: .*boom"),
    (404, r"answered POST /v1/streams/kitchen/audio with 404"),
])
def test_remote_failures_while_processing_are_engine_errors(error: Exception | int, message: str) -> None:
    engine = RemoteWakeWord(URL, "kitchen", ("hey_jarvis",), 2000, transport=httpx.MockTransport(Failing(error)))
    with pytest.raises(EngineError, match=message):
        engine.process(silence(0.1))


def test_remote_close_survives_a_vanished_service() -> None:
    engine = RemoteWakeWord(URL, "kitchen", ("hey_jarvis",), 2000,
                            transport=httpx.MockTransport(Failing(httpx.ConnectError("refused"))))
    engine.close()


def test_remote_uses_timeout_ms_as_its_http_timeout() -> None:
    engine = RemoteWakeWord(URL, "kitchen", ("hey_jarvis",), 2000,
                            transport=httpx.MockTransport(FakeService(["hey_jarvis"])))
    assert engine._client.timeout == httpx.Timeout(2.0)
