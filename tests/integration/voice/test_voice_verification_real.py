"""Speaker verification as a household meets it, with every real part: the served API, the ge2e engine,
Silero VAD for enrolment quality, the packaged cohort, sealed SQLite. Two dev readers enrol through
``POST /v1/voice/speakers/enroll`` (three clips each, as WAV); their other clips are identified, and a third
reader, never enrolled, must stay unknown. Unfit samples are refused with the precise 422.

These are dev readers (the project's cohort contains them, which the same-speaker guard handles); the
figures on people the project has never heard are not measured here (benchmarks/voice_speaker.py measures
held-out speakers).
"""

from __future__ import annotations

import numpy as np
import pytest

from assistant.voice.audio import float_to_pcm, pcm_to_float, resample, wav_bytes
from assistant.voice.speakers import MatchReason
from tests.integration.support import speaker_clips

pytestmark = pytest.mark.integration

WAV = {"Content-Type": "audio/wav"}


@pytest.fixture(scope="module")
def clips() -> dict[str, list[bytes]]:
    """Speaker id -> its 10 clips as PCM16 16 kHz mono, in file order."""
    return speaker_clips()


@pytest.fixture
def household(make_settings, make_services, make_client, model):
    services = make_services(make_settings(voice={}), model)  # defaults: ge2e, silero, target_far 0.01
    client = make_client(services)
    key, _ = services.keys.create("household")
    return services, client, {"Authorization": f"Bearer {key}"}


def enroll(client, auth, name: str, pcm: bytes, headers: dict | None = None):
    return client.post("/v1/voice/speakers/enroll", params={"name": name}, content=wav_bytes(pcm),
                       headers={**auth, **(headers or WAV)})


def test_enrolled_readers_are_recognised_and_a_stranger_is_not(household, clips) -> None:
    services, client, auth = household
    for reader in ("1998", "2033"):  # a woman and a man
        for i, pcm in enumerate(clips[reader][:3]):
            response = enroll(client, auth, f"reader {reader}", pcm)
            assert response.status_code == (201 if i == 0 else 200), response.text
            body = response.json()
            assert body["speech_s"] > 1.0 and body["warnings"] == []
    registry = services.voice.speakers
    household_now = registry.household()
    assert household_now.threshold is not None and household_now.impostor_trials > 300
    right = 0
    for reader in ("1998", "2033"):
        for pcm in clips[reader][3:]:
            match = registry.identify(pcm)
            assert match.reason in (MatchReason.MATCHED, MatchReason.BELOW_CALIBRATED, MatchReason.BELOW_FLOOR)
            right += match.known and match.name == f"reader {reader}" and match.confident
    assert right >= 13  # of 14: measured 14
    for pcm in clips["2609"]:  # never enrolled
        match = registry.identify(pcm)
        assert not match.known, (match.score, match.normalised, match.threshold)
        assert match.reason in (MatchReason.BELOW_FLOOR, MatchReason.BELOW_CALIBRATED)


def test_a_sample_of_someone_else_is_stored_with_a_warning(household, clips) -> None:
    _, client, auth = household
    assert enroll(client, auth, "mixed", clips["2414"][0]).json()["warnings"] == []
    second = enroll(client, auth, "mixed", clips["1998"][0])
    assert second.status_code == 200
    assert len(second.json()["warnings"]) == 1 and "another person" in second.json()["warnings"][0]


def test_unfit_samples_are_refused_by_the_real_detector(household, clips) -> None:
    _, client, auth = household
    noise = float_to_pcm(np.random.default_rng(0).normal(0.0, 0.1, 32_000))
    refused = enroll(client, auth, "noise", noise)
    assert refused.status_code == 422
    assert refused.json()["error"]["details"]["fields"] == [{"field": "body", "error": "too little speech"}]
    low_rate = client.post("/v1/voice/speakers/enroll", params={"name": "phone"},
                           content=wav_bytes(float_to_pcm(resample(pcm_to_float(clips["1998"][0]), 16_000, 8_000)),
                                             rate=8_000), headers={**auth, **WAV})
    assert low_rate.status_code == 422
    assert "8000 Hz" in low_rate.json()["error"]["message"]
    assert client.get("/v1/voice/speakers", headers=auth).json()["total"] == 0
