"""/v1/voice/speakers: list, enrol (WAV, FLAC, raw PCM), delete, with a fake embedder; every error case."""

from __future__ import annotations

import hashlib
import io
from uuid import uuid4

import numpy as np
import pytest
import soundfile

from assistant.errors import ConfigError
from assistant.voice.audio import float_to_pcm, silence, wav_bytes
from assistant.voice.engines import EngineError
from assistant.voice.speakers import SpeakerRegistry, SpeakerStore

MISSING = "00000000-0000-4000-8000-000000000000"
SPEAKER_KEYS = {"id", "user_id", "name", "enrollment_count", "created_at", "reliable", "warnings", "speech_s"}
RAW = {"Content-Type": "application/octet-stream"}


class FakeEmbedder:
    """A unit vector derived from the sample's bytes: same sample, same vector."""

    dim = 256

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, pcm: bytes) -> np.ndarray:
        self.calls += 1
        seed = int.from_bytes(hashlib.sha256(pcm).digest()[:8], "little")
        vector = np.random.default_rng(seed).normal(size=self.dim).astype(np.float32)
        return vector / np.linalg.norm(vector)


class FailingEmbedder:
    dim = 256

    def embed(self, pcm: bytes) -> np.ndarray:
        raise EngineError("speaker companion service at http://127.0.0.1:8084 is unreachable")


def speech(seed: int = 0, seconds: float = 1.5) -> bytes:
    return float_to_pcm(np.random.default_rng(seed).normal(0.0, 0.1, int(16_000 * seconds)))


def flac_bytes(pcm: bytes) -> bytes:
    out = io.BytesIO()
    soundfile.write(out, np.frombuffer(pcm, dtype="<i2"), 16_000, format="FLAC")
    return out.getvalue()


def use(services, embedder) -> SpeakerRegistry:
    registry = SpeakerRegistry(SpeakerStore(services.db, services.sealer), services.settings.voice.speaker_id,
                               embedder, cohort=None)
    services.voice.speakers = registry
    return registry


@pytest.fixture
def voice_services(make_settings, make_services, model):
    return make_services(make_settings(voice={"speaker_id": {"min_enrollment_samples": 3}}), model)


@pytest.fixture
def fake(voice_services) -> FakeEmbedder:
    embedder = FakeEmbedder()
    use(voice_services, embedder)
    return embedder


@pytest.fixture
def vclient(make_client, voice_services, fake):
    return make_client(voice_services)


@pytest.fixture
def vauth(voice_services) -> dict[str, str]:
    key, _ = voice_services.keys.create("voice")
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def user_id(vclient, vauth, voice_services) -> str:
    return str(voice_services.keys.authenticate(vauth["Authorization"].split()[1]).user_id)


def enroll(vclient, vauth, name: str = "Alice", body: bytes | None = None, headers: dict | None = None):
    return vclient.post("/v1/voice/speakers/enroll", params={"name": name},
                        content=speech() if body is None else body, headers={**RAW, **vauth, **(headers or {})})


def test_disabled_voice_answers_503(client, auth) -> None:
    calls = [("get", "/v1/voice/speakers", None), ("post", "/v1/voice/speakers/enroll?name=A", speech()),
             ("delete", f"/v1/voice/speakers/{MISSING}", None)]
    for method, path, body in calls:
        response = client.request(method, path, content=body, headers={**RAW, **auth})
        assert response.status_code == 503, (method, path)
        assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


def test_routes_need_a_key_and_writes_need_full_scope(vclient, voice_services) -> None:
    assert vclient.get("/v1/voice/speakers").status_code == 401
    assert vclient.post("/v1/voice/speakers/enroll?name=A", content=speech(), headers=RAW).status_code == 401
    assert vclient.delete(f"/v1/voice/speakers/{MISSING}").status_code == 401
    key, _ = voice_services.keys.create("reader", role="read-only")
    reader = {"Authorization": f"Bearer {key}"}
    assert vclient.get("/v1/voice/speakers", headers=reader).status_code == 200
    assert enroll(vclient, reader).status_code == 403
    assert vclient.delete(f"/v1/voice/speakers/{MISSING}", headers=reader).status_code == 403


def test_built_services_load_no_model_until_first_use(make_settings, make_services, model) -> None:
    services = make_services(make_settings(voice={}), model)
    registry = services.voice.speakers
    assert isinstance(registry, SpeakerRegistry)
    assert registry.list() == []
    assert registry._embedder is None  # the d-vector model is loaded on the first enrollment only


def test_enrol_creates_then_adds_and_becomes_reliable(vclient, vauth, user_id, fake) -> None:
    first = enroll(vclient, vauth)
    assert first.status_code == 201, first.text
    profile = first.json()
    assert set(profile) == SPEAKER_KEYS
    assert (profile["user_id"], profile["name"], profile["enrollment_count"], profile["reliable"]) == \
        (user_id, "Alice", 1, False)
    second = enroll(vclient, vauth, "alice", speech(1))
    assert second.status_code == 200
    assert (second.json()["id"], second.json()["name"], second.json()["enrollment_count"]) == \
        (profile["id"], "Alice", 2)
    third = enroll(vclient, vauth, "Alice", speech(2))
    assert (third.status_code, third.json()["enrollment_count"], third.json()["reliable"]) == (200, 3, True)
    assert fake.calls == 3
    listed = vclient.get("/v1/voice/speakers", headers=vauth).json()
    assert listed == {"speakers": [{**third.json(), "warnings": [], "speech_s": None}], "total": 1}


def test_enrol_accepts_wav_flac_and_raw_pcm(vclient, vauth, voice_services) -> None:
    pcm = speech()
    wav = enroll(vclient, vauth, "Wav", wav_bytes(pcm), {"Content-Type": "audio/wav"})
    flac = enroll(vclient, vauth, "Flac", flac_bytes(pcm), {"Content-Type": "audio/flac"})
    raw = enroll(vclient, vauth, "Raw", pcm)
    assert [r.status_code for r in (wav, flac, raw)] == [201, 201, 201]
    registry = voice_services.voice.speakers
    embeddings = registry.store.embeddings(256)
    # the same audio in three containers decodes to the same PCM, hence the same (fake) embedding
    vectors = [embeddings[r.json()["id"]][0] for r in (wav, flac, raw)]
    assert np.allclose(vectors[0], vectors[2]) and np.allclose(vectors[1], vectors[2])


def test_profiles_are_per_user(vclient, vauth, voice_services) -> None:
    mine = enroll(vclient, vauth).json()
    key, _ = voice_services.keys.create("other", user_id=uuid4())
    other = {"Authorization": f"Bearer {key}"}
    theirs = enroll(vclient, other)
    assert theirs.status_code == 201  # same name, another user: another profile
    assert theirs.json()["id"] != mine["id"]
    assert [s["id"] for s in vclient.get("/v1/voice/speakers", headers=vauth).json()["speakers"]] == [mine["id"]]
    assert vclient.delete(f"/v1/voice/speakers/{mine['id']}", headers=other).status_code == 404
    assert vclient.get("/v1/voice/speakers", headers=vauth).json()["total"] == 1


def test_delete_removes_profile_and_embeddings(vclient, vauth, voice_services) -> None:
    profile = enroll(vclient, vauth).json()
    enroll(vclient, vauth, body=speech(1))
    db = voice_services.db
    assert db.scalar("SELECT count(*) FROM voice_embeddings WHERE speaker_id = ?", (profile["id"],)) == 2
    response = vclient.delete(f"/v1/voice/speakers/{profile['id']}", headers=vauth)
    assert response.status_code == 204
    assert response.content == b""
    assert db.scalar("SELECT count(*) FROM voice_embeddings WHERE speaker_id = ?", (profile["id"],)) == 0
    assert vclient.get("/v1/voice/speakers", headers=vauth).json() == {"speakers": [], "total": 0}
    again = vclient.delete(f"/v1/voice/speakers/{profile['id']}", headers=vauth)
    assert again.status_code == 404
    error = again.json()["error"]
    assert error["code"] == "NOT_FOUND"
    assert set(error) >= {"code", "message", "request_id"}
    assert vclient.delete("/v1/voice/speakers/not-a-uuid", headers=vauth).status_code == 422


@pytest.mark.parametrize(("params", "field"), [
    ({}, "name"), ({"name": ""}, "name"), ({"name": "x" * 101}, "name"), ({"name": "   "}, "name"),
    ({"name": "a\nb"}, "name"),
])
def test_enrol_name_errors(vclient, vauth, fake, params: dict, field: str) -> None:
    response = vclient.post("/v1/voice/speakers/enroll", params=params, content=speech(), headers={**RAW, **vauth})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [f["field"] for f in error["details"]["fields"]] == [field]
    assert fake.calls == 0


@pytest.mark.parametrize(("body", "headers", "reason"), [
    (b"", RAW, "empty"),
    (b"\x00\x01\x02", RAW, "odd length"),
    (speech(seconds=0.3), RAW, "too short"),
    (speech(seconds=0.3), {"Content-Type": "audio/wav"}, "not a WAV or FLAC file"),
    (b"RIFF not really a wave file", {"Content-Type": "audio/wav"}, "not a WAV or FLAC file"),
    (wav_bytes(speech(seconds=0.3)), {"Content-Type": "audio/wav"}, "too short"),
    (silence(1.0), RAW, "silent"),
])
def test_enrol_body_errors(vclient, vauth, fake, body: bytes, headers: dict, reason: str) -> None:
    response = enroll(vclient, vauth, body=body, headers=headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert error["details"]["fields"] == [{"field": "body", "error": reason}]
    assert fake.calls == 0
    assert vclient.get("/v1/voice/speakers", headers=vauth).json()["total"] == 0


def test_enrol_too_long_audio(vclient, vauth) -> None:
    body = wav_bytes(float_to_pcm(np.full(4_000 * 61, 0.1, dtype=np.float32)), rate=4_000)  # 61 s in 488 kB
    response = enroll(vclient, vauth, body=body, headers={"Content-Type": "audio/wav"})
    assert response.status_code == 422
    assert response.json()["error"]["details"]["fields"] == [{"field": "body", "error": "too long"}]


def test_enrol_body_over_the_server_limit_is_413(vclient, vauth) -> None:
    response = enroll(vclient, vauth, body=bytes(1_100_000))  # server.max_body_bytes is 1 MiB
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "PAYLOAD_TOO_LARGE"


def test_enrol_body_over_two_mib_is_413_even_with_a_larger_server_limit(make_settings, make_services, make_client,
                                                                        model) -> None:
    settings = make_settings(voice={}, server={"max_body_bytes": 8 * 1024 * 1024})
    services = make_services(settings, model)
    use(services, FakeEmbedder())
    key, _ = services.keys.create("voice")
    response = enroll(make_client(services), {"Authorization": f"Bearer {key}"}, body=bytes(2 * 1024 * 1024 + 2))
    assert response.status_code == 413
    assert "at most 2097152 bytes" in response.json()["error"]["message"]


def test_engine_failures_are_503(vclient, vauth, voice_services) -> None:
    use(voice_services, FailingEmbedder())
    failing = enroll(vclient, vauth)
    assert failing.status_code == 503
    assert "unreachable" in failing.json()["error"]["message"]

    def missing_model() -> FailingEmbedder:
        raise ConfigError("speaker engine 'd-vector': model file /nowhere/embedder.int8.onnx is missing")

    use(voice_services, missing_model)
    missing = enroll(vclient, vauth)
    assert missing.status_code == 503
    assert "is missing" in missing.json()["error"]["message"]
    assert vclient.get("/v1/voice/speakers", headers=vauth).json()["total"] == 0


def test_openapi_documents_the_speaker_routes(vclient) -> None:
    spec = vclient.get("/api-docs/openapi.json").json()
    paths = spec["paths"]
    enroll_op = paths["/v1/voice/speakers/enroll"]["post"]
    assert set(enroll_op["requestBody"]["content"]) == {"audio/wav", "audio/flac", "application/octet-stream"}
    assert {"200", "201", "413", "422", "503"} <= set(enroll_op["responses"])
    assert enroll_op["summary"] and "201" in enroll_op["description"]
    assert [p["name"] for p in enroll_op["parameters"]] == ["name"]
    assert paths["/v1/voice/speakers"]["get"]["summary"] == "List speaker profiles"
    assert "204" in paths["/v1/voice/speakers/{speaker_id}"]["delete"]["responses"]
    speaker = spec["components"]["schemas"]["SpeakerOut"]
    assert set(speaker["properties"]) == SPEAKER_KEYS
    assert "min_enrollment_samples" in speaker["properties"]["reliable"]["description"]


# --- enrolment quality (issue 12): unfit samples are 422 naming the problem, and nothing is stored ----------


def stored(vclient, vauth) -> int:
    return vclient.get("/v1/voice/speakers", headers=vauth).json()["total"]


@pytest.mark.parametrize(("body", "headers", "error"), [
    (wav_bytes(float_to_pcm(np.random.default_rng(0).normal(0, 0.1, 16_000)), rate=8_000),
     {"Content-Type": "audio/wav"}, "wrong sample rate"),
    (speech(), {"Content-Type": "audio/L16; rate=8000"}, "wrong sample rate"),
    (speech(), {"Content-Type": "audio/L16; rate=16000; channels=2"}, "not mono"),
    (silence(2.0), RAW, "silent"),
    # 0.3 s of voice-level sound in 2 s of near-silence: too little speech to stand for a voice
    (silence(0.85) + float_to_pcm(np.random.default_rng(1).normal(0, 0.1, 4_800)) + silence(0.85), RAW,
     "too little speech"),
    (float_to_pcm(np.sign(np.sin(np.arange(32_000) / 7.0))), RAW, "clipped"),  # a square wave at full scale
    (b"this is a text file, not audio" * 20, {"Content-Type": "audio/wav"}, "not a WAV or FLAC file"),
])
def test_unfit_enrolment_samples_are_422_and_store_nothing(vclient, vauth, fake, body, headers, error) -> None:
    response = enroll(vclient, vauth, body=body, headers=headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert response.json()["error"]["details"]["fields"] == [{"field": "body", "error": error}]
    assert stored(vclient, vauth) == 0
    assert fake.calls == 0  # refused before any embedding


def test_enrolment_reports_speech_and_warns_when_samples_disagree(vclient, vauth, fake) -> None:
    first = enroll(vclient, vauth, body=speech(0)).json()
    assert first["warnings"] == [] and first["speech_s"] == pytest.approx(1.5, abs=0.05)
    again = enroll(vclient, vauth, body=speech(0)).json()  # the same voice: the fake gives the same vector
    assert again["warnings"] == []
    other = enroll(vclient, vauth, body=speech(7)).json()  # a random vector: cosine near 0 with the profile
    assert other["enrollment_count"] == 3
    assert len(other["warnings"]) == 1 and "another person" in other["warnings"][0]


def test_listing_has_no_warnings(vclient, vauth) -> None:
    enroll(vclient, vauth)
    listed = vclient.get("/v1/voice/speakers", headers=vauth).json()["speakers"][0]
    assert (listed["warnings"], listed["speech_s"]) == ([], None)
