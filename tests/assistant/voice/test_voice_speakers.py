"""Speaker profiles with a fake embedder: the 0.75 threshold, best match, enrollment, reliability from the
3rd sample, sealed storage, cascade delete, dimensions; the d-vector front end; the remote engine's client;
the equal error rate."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import pytest

from assistant.config import SpeakerIdSettings
from assistant.crypto import SealContext, SealedValueMismatch, Sealer
from assistant.errors import ConfigError, ConflictError, NotFoundError, ValidationFailed
from assistant.storage.db import Database
from assistant.voice import speaker
from assistant.voice.audio import float_to_pcm, silence
from assistant.voice.engines import EngineError
from assistant.voice.speaker import FrontEnd, RemoteEmbedder, cosine, encoder_windows, log_mel, mel_filterbank
from assistant.voice.speakers import MatchReason, SpeakerMatch, SpeakerRegistry, SpeakerStore, equal_error_rate

DIM = 256
USER = "00000000-0000-4000-8000-000000000001"
OTHER_USER = "00000000-0000-4000-8000-000000000002"


def unit(*values: float) -> np.ndarray:
    """A DIM-vector starting with ``values`` (the rest zeros)."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[:len(values)] = values
    return vector


def at_cosine(score: float) -> np.ndarray:
    """A unit vector whose cosine with ``unit(1)`` is ``score``."""
    return unit(score, float(np.sqrt(1.0 - score * score)))


E1 = unit(1.0)
E2 = unit(0.0, 0.0, 1.0)
# cosine with E1 exactly 0.75: every component and the norm (1.0) are exact in float32
EXACTLY_075 = unit(0.75, 0.5, 0.25, 0.25, 0.25)


def speech(seed: int = 0, seconds: float = 1.5) -> bytes:
    """Non-silent PCM (the fake embedder ignores its content)."""
    return float_to_pcm(np.random.default_rng(seed).normal(0.0, 0.1, int(16_000 * seconds)))


class FakeEmbedder:
    """Returns the queued vectors in order; records how many samples it embedded."""

    def __init__(self, dim: int = DIM):
        self.dim = dim
        self.queue: list[np.ndarray] = []
        self.calls = 0

    def embed(self, pcm: bytes) -> np.ndarray:
        self.calls += 1
        return self.queue.pop(0)


@pytest.fixture
def db(tmp_path: Path):
    database = Database(tmp_path / "speakers.db")
    yield database
    database.close()


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def registry(db: Database, fake: FakeEmbedder) -> SpeakerRegistry:
    return SpeakerRegistry(SpeakerStore(db, Sealer(bytes(range(32)))), SpeakerIdSettings(), fake, cohort=None)


def enroll(registry: SpeakerRegistry, fake: FakeEmbedder, name: str, vector: np.ndarray, user: str = USER):
    fake.queue.append(vector)
    return registry.enroll(user, name, speech())


def identify(registry: SpeakerRegistry, fake: FakeEmbedder, vector: np.ndarray) -> SpeakerMatch:
    fake.queue.append(vector)
    return registry.identify(speech())


def test_migration_creates_the_tables(db: Database) -> None:
    assert db.columns("voice_speakers") == ["id", "user_id", "name", "created_at", "updated_at"]
    assert db.columns("voice_embeddings") == ["id", "speaker_id", "embedding", "dim", "created_at", "engine"]


def test_threshold_exactly_075_is_unknown_and_07501_matches(registry, fake) -> None:
    alice, _ = enroll(registry, fake, "Alice", E1)
    at = identify(registry, fake, EXACTLY_075)
    assert at.score == pytest.approx(0.75, abs=1e-9)
    assert (at.speaker_id, at.user_id, at.name, at.known, at.reliable) == (None, None, None, False, False)
    above = identify(registry, fake, at_cosine(0.7501))
    assert above.score == pytest.approx(0.7501, abs=1e-6)
    assert (above.speaker_id, above.user_id, above.name, above.known) == (alice.id, USER, "Alice", True)
    below = identify(registry, fake, at_cosine(0.5))
    assert not below.known
    assert below.score == pytest.approx(0.5, abs=1e-6)


def test_best_of_two_profiles_wins(registry, fake) -> None:
    alice, _ = enroll(registry, fake, "Alice", E1)
    bob, _ = enroll(registry, fake, "Bob", unit(0.6, 0.8))
    first = identify(registry, fake, at_cosine(0.95))  # 0.95 with Alice, 0.82 with Bob: both above 0.75
    assert (first.speaker_id, first.score) == (alice.id, pytest.approx(0.95, abs=1e-6))
    second = identify(registry, fake, unit(0.8, 0.6))  # 0.80 with Alice, 0.96 with Bob
    assert (second.speaker_id, second.name, second.score) == (bob.id, "Bob", pytest.approx(0.96, abs=1e-6))


def test_matching_uses_the_renormalised_centroid(registry, fake) -> None:
    enroll(registry, fake, "Alice", unit(1.0, 0.0))
    alice, _ = enroll(registry, fake, "Alice", unit(0.0, 1.0))
    match = identify(registry, fake, unit(1.0, 1.0))  # the centroid's direction exactly
    assert match.speaker_id == alice.id
    assert match.score == pytest.approx(1.0, abs=1e-6)
    assert not identify(registry, fake, unit(1.0, 0.0)).known  # cosine 0.7071 with the centroid


def test_no_profile_is_unknown_with_score_zero(registry, fake) -> None:
    assert identify(registry, fake, E1) == SpeakerMatch(None, None, None, 0.0, False, MatchReason.NO_PROFILES)


def test_profile_created_on_the_first_sample(registry, fake) -> None:
    profile, created = enroll(registry, fake, "Alice", E1)
    assert created
    assert (profile.user_id, profile.name, profile.enrollment_count) == (USER, "Alice", 1)
    again, created_again = enroll(registry, fake, "  ALICE ", E1)
    assert not created_again
    assert (again.id, again.name, again.enrollment_count) == (profile.id, "Alice", 2)
    theirs, created_theirs = enroll(registry, fake, "Alice", E2, user=OTHER_USER)
    assert created_theirs and theirs.id != profile.id
    assert [p.id for p in registry.list()] == [profile.id, theirs.id]
    assert [p.id for p in registry.list(OTHER_USER)] == [theirs.id]
    assert registry.get(profile.id) == again


def test_reliable_from_the_third_sample(registry, fake) -> None:
    for count in (1, 2, 3, 4):
        profile, _ = enroll(registry, fake, "Alice", E1)
        assert profile.enrollment_count == count
        assert registry.reliable(profile) is (count >= 3)
        match = identify(registry, fake, E1)
        assert match.known
        assert match.reliable is (count >= 3)


def test_delete_cascades_to_every_embedding(registry, fake, db) -> None:
    alice, _ = enroll(registry, fake, "Alice", E1)
    enroll(registry, fake, "Alice", E1)
    bob, _ = enroll(registry, fake, "Bob", E2)
    count = "SELECT count(*) FROM voice_embeddings WHERE speaker_id = ?"
    assert db.scalar(count, (alice.id,)) == 2
    registry.delete(alice.id)
    assert db.scalar(count, (alice.id,)) == 0
    assert db.scalar(count, (bob.id,)) == 1
    with pytest.raises(NotFoundError):
        registry.get(alice.id)
    with pytest.raises(NotFoundError):
        registry.delete(alice.id)
    assert not identify(registry, fake, E1).known


def test_other_users_profile_is_not_found_for_them(registry, fake) -> None:
    alice, _ = enroll(registry, fake, "Alice", E1)
    with pytest.raises(NotFoundError):
        registry.get(alice.id, OTHER_USER)
    with pytest.raises(NotFoundError):
        registry.delete(alice.id, OTHER_USER)
    assert registry.get(alice.id, USER) == alice


def test_embeddings_are_sealed_and_bound_to_their_row(registry, fake, db) -> None:
    enroll(registry, fake, "Alice", E1)
    enroll(registry, fake, "Alice", E2)
    rows = db.query("SELECT id, embedding, dim FROM voice_embeddings ORDER BY created_at, id")
    plain = {E1.astype("<f4").tobytes(), E2.astype("<f4").tobytes()}
    for row in rows:
        assert row["dim"] == DIM
        assert len(row["embedding"]) == 24 + DIM * 4 + 16  # nonce + ciphertext + tag
        assert bytes(row["embedding"]) not in plain
    sealer = registry.store.sealer
    owner = db.scalar("SELECT user_id FROM voice_speakers")
    with pytest.raises(SealedValueMismatch, match="voice_embeddings.embedding"):  # moved to another row: no
        sealer.open_data(rows[0]["embedding"], SealContext("voice_embeddings", "embedding", rows[1]["id"], owner))
    assert sealer.open_data(rows[0]["embedding"], SealContext("voice_embeddings", "embedding", rows[0]["id"], owner))


def test_unsealed_store_round_trips(db, fake) -> None:
    plain = SpeakerRegistry(SpeakerStore(db), SpeakerIdSettings(), fake)
    profile, _ = enroll(plain, fake, "Alice", E1)
    assert identify(plain, fake, E1).speaker_id == profile.id


def test_embedder_of_another_dimension_is_refused(db) -> None:
    wrong = SpeakerRegistry(SpeakerStore(db), SpeakerIdSettings(), FakeEmbedder(dim=192))
    with pytest.raises(ConfigError, match="192.*256"):
        wrong.identify(speech())


def test_create_embedder_checks_the_dimension(monkeypatch) -> None:
    monkeypatch.setattr(speaker.ENGINES, "get", lambda engine_id: lambda settings: FakeEmbedder(dim=192))
    with pytest.raises(ConfigError, match="192-dim.*embedding_dim is 256"):
        speaker.create_embedder(SpeakerIdSettings())


def test_unknown_engine_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="'ecapa'.*d-vector, ge2e, remote"):
        speaker.create_embedder(SpeakerIdSettings(engine="ecapa"))


def test_remote_engine_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="url"):
        speaker.create_embedder(SpeakerIdSettings(engine="remote"))


def test_wrong_vectors_from_the_engine_are_engine_errors(registry, fake) -> None:
    fake.queue.append(np.ones(10, dtype=np.float32))
    with pytest.raises(EngineError, match="10 values"):
        registry.identify(speech())


def test_query_of_another_dimension_is_refused(registry) -> None:
    with pytest.raises(ValidationFailed, match="192 dimensions"):
        registry.identify_embedding(np.ones(192, dtype=np.float32))


def test_profiles_of_another_dimension_are_not_compared_nor_extended(registry, fake, db) -> None:
    alice, _ = enroll(registry, fake, "Alice", E1)
    db.execute("UPDATE voice_embeddings SET dim = 192")  # as if enrolled with another engine
    assert not identify(registry, fake, E1).known
    with pytest.raises(ConflictError, match="192-dim"):
        enroll(registry, fake, "Alice", E1)
    assert registry.get(alice.id).enrollment_count == 1


def test_factory_is_called_once_on_first_use(db) -> None:
    made: list[FakeEmbedder] = []

    def factory() -> FakeEmbedder:
        made.append(FakeEmbedder())
        return made[-1]

    lazy = SpeakerRegistry(SpeakerStore(db), SpeakerIdSettings(), factory)
    assert made == []
    assert lazy.list() == []
    assert made == []
    assert lazy.embedder is lazy.embedder
    assert len(made) == 1


@pytest.mark.parametrize(("name", "error"), [("", "must not be empty"), ("   ", "must not be empty"),
                                             ("x" * 101, "at most 100"), ("a\nb", "one line")])
def test_names_are_validated(registry, fake, name: str, error: str) -> None:
    with pytest.raises(ValidationFailed, match=error):
        enroll(registry, fake, name, E1)
    assert fake.calls == 0
    assert registry.list() == []


def test_silent_samples_are_refused(registry, fake) -> None:
    with pytest.raises(ValidationFailed, match="silent"):
        registry.enroll(USER, "Alice", silence(1.0))
    assert fake.calls == 0
    assert registry.list() == []


# --- the d-vector front end -------------------------------------------------------------------------


def test_mel_filterbank_is_slaneys() -> None:
    basis = mel_filterbank(16_000, 512, 40)
    assert basis.shape == (40, 257)
    assert basis.dtype == np.float32
    assert (basis >= 0).all()
    assert (basis.sum(axis=1) > 0).all()  # no empty filter
    peaks = basis.argmax(axis=1)
    assert (np.diff(peaks) >= 0).all()  # filters ordered by frequency
    # Slaney's area normalisation: each triangle's area (in Hz) is 1; bins are 31.25 Hz apart
    assert np.allclose(basis.sum(axis=1) * 31.25, 1.0, rtol=0.1)
    assert speaker._hz_to_mel(np.array([1000.0]))[0] == pytest.approx(15.0)
    assert speaker._mel_to_hz(np.array([15.0]))[0] == pytest.approx(1000.0)


def test_log_mel_frames_and_windows() -> None:
    fe = FrontEnd()
    basis = mel_filterbank(16_000, 512, 40)
    one_second = log_mel(np.zeros(16_000, dtype=np.float32), fe, basis)
    assert one_second.shape == (1 + (16_000 - 512) // 160, 40)  # 97 frames, center=False
    assert np.allclose(one_second, -10.0)  # log10 of the 1e-10 floor
    assert encoder_windows(one_second, fe).shape == (1, 80, 40)
    three_seconds = log_mel(np.zeros(48_000, dtype=np.float32), fe, basis)
    assert encoder_windows(three_seconds, fe).shape == (1 + (len(three_seconds) - 80) // 40, 80, 40)
    short = encoder_windows(one_second[:47], fe)  # half a second: zero-padded to one window
    assert short.shape == (1, 80, 40)
    assert (short[0, 47:] == 0).all()


def test_cosine() -> None:
    assert cosine(unit(1.0), unit(2.0)) == pytest.approx(1.0)
    assert cosine(unit(1.0), unit(0.0, 1.0)) == pytest.approx(0.0)
    assert cosine(unit(0.0), unit(1.0)) == 0.0
    with pytest.raises(ValueError, match="256 and 3"):
        cosine(unit(1.0), np.ones(3))


# --- the remote engine's client -----------------------------------------------------------------------


def remote_client(handler) -> httpx.Client:
    return httpx.Client(base_url="http://speaker.test", transport=httpx.MockTransport(handler))


def test_remote_embedder_posts_raw_pcm() -> None:
    received: list[tuple[str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "engine": "d-vector", "dim": 3})
        received.append((request.headers["content-type"], request.content))
        return httpx.Response(200, json={"embedding": [3.0, 0.0, 4.0], "dim": 3})

    remote = RemoteEmbedder("http://speaker.test", 5000, client=remote_client(handler))
    assert remote.dim == 3
    sample = speech()
    assert np.allclose(remote.embed(sample), [0.6, 0.0, 0.8])
    assert received[-1] == ("application/octet-stream", sample)
    with pytest.raises(EngineError, match="too short"):
        remote.embed(speech(seconds=0.4))


def test_remote_embedder_failures() -> None:
    def unhealthy(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"code": "SERVICE_UNAVAILABLE", "message": "down"}})

    with pytest.raises(ConfigError, match="not healthy"):
        RemoteEmbedder("http://speaker.test", 5000, client=remote_client(unhealthy))

    state = {"fail": False}

    def flaky(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200, json={"status": "ok", "engine": "d-vector", "dim": 2})
        if state["fail"]:
            return httpx.Response(500, content=json.dumps({"error": {"code": "ENGINE_ERROR", "message": "boom"}}))
        return httpx.Response(200, json={"embedding": [1.0, 0.0], "dim": 2})

    remote = RemoteEmbedder("http://speaker.test", 5000, client=remote_client(flaky))
    state["fail"] = True
    with pytest.raises(EngineError, match="answered 500: boom"):
        remote.embed(speech())


def test_remote_embedder_unreachable_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="127.0.0.1:9"):
        RemoteEmbedder("http://127.0.0.1:9", 500)


# --- equal error rate -----------------------------------------------------------------------------------


def test_equal_error_rate_hand_made() -> None:
    same = [0.9, 0.8, 0.7, 0.6]
    different = [0.65, 0.5, 0.4, 0.3]
    # at 0.6: one same-speaker score rejected (0.6 <= 0.6), one different-speaker accepted (0.65 > 0.6)
    assert equal_error_rate(same, different) == (0.25, 0.6)


def test_equal_error_rate_separable_and_errors() -> None:
    assert equal_error_rate([0.9, 0.8], [0.1, 0.2]) == (0.0, 0.2)
    assert equal_error_rate([0.1], [0.9]) == (1.0, 0.1)
    with pytest.raises(ValueError, match="at least one"):
        equal_error_rate([], [0.5])
