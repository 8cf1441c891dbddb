"""AS-norm, the household threshold from target_far, and the shipped cohorts (assistant.voice.verification)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from assistant.voice.verification import (
    MIN_IMPOSTOR_TRIALS,
    Cohort,
    as_norm,
    build_household,
    cohort_path,
    decide,
    load_cohort,
    same_speakers,
    save_cohort,
    speakers_of,
    top_stats,
    unit_rows,
)

DIM = 16


def rand_unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    return unit_rows(rng.normal(size=(n, dim)))


def cohort_of(rng: np.random.Generator, speakers: int = 30, clips: int = 4) -> Cohort:
    """Random speakers: each a random direction, its clips small perturbations of it."""
    centres = rand_unit(rng, speakers)
    vectors = np.vstack([unit_rows(c + 0.15 * rng.normal(size=(clips, DIM))) for c in centres])
    groups = np.array([f"s{i}" for i in range(speakers) for _ in range(clips)], dtype="<U64")
    return Cohort(vectors, groups, "test")


def test_as_norm_is_the_mean_of_the_two_z_scores() -> None:
    # (0.8 - 0.4) / 0.1 = 4.0 and (0.8 - 0.5) / 0.2 = 1.5: their mean is 2.75
    assert float(as_norm(0.8, 0.4, 0.1, 0.5, 0.2)) == pytest.approx(2.75)
    assert np.allclose(as_norm(np.array([0.4, 0.5]), 0.4, 0.1, 0.5, 0.2), [-0.25, 0.5])


def test_top_stats_uses_the_k_highest_cohort_cosines() -> None:
    query = np.array([[1.0, 0.0]])
    cohort = unit_rows(np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [-1.0, 0.0]]))  # cosines 1, .6, 0, -1
    mu, sd = top_stats(query, cohort, 2)
    assert (mu[0], sd[0]) == (pytest.approx(0.8), pytest.approx(0.2))
    mu_all, _ = top_stats(query, cohort, 99)  # k is capped at the cohort's size
    assert mu_all[0] == pytest.approx(0.15)
    mu_empty, sd_empty = top_stats(query, np.zeros((0, 2)), 5)
    assert (mu_empty[0], sd_empty[0]) == (0.0, 1.0)


def test_speed_perturbed_groups_belong_to_their_real_speaker() -> None:
    groups = np.array(["librispeech:1688", "librispeech:1688@x0.9", "profile:abc", "wakeword:a/b@x1.1"])
    assert list(speakers_of(groups)) == ["librispeech:1688", "librispeech:1688", "profile:abc", "wakeword:a/b"]


def test_threshold_is_the_target_far_quantile_and_tightens_with_a_lower_far() -> None:
    rng = np.random.default_rng(0)
    cohort = cohort_of(rng)
    enrolled = {"alice": unit_rows(rand_unit(rng, 1)[0] + 0.1 * rng.normal(size=(3, DIM))),
                "bob": unit_rows(rand_unit(rng, 1)[0] + 0.1 * rng.normal(size=(3, DIM)))}
    loose = build_household(enrolled, cohort, top_k=20, target_far=0.2)
    strict = build_household(enrolled, cohort, top_k=20, target_far=0.01)
    assert loose.impostor_trials == strict.impostor_trials == len(cohort) + 6  # the cohort + each profile's samples
    assert loose.threshold < strict.threshold
    # the strict threshold lets at most 1 % of the calibration impostors through
    maxima = []
    for vector, group in zip(cohort.vectors, cohort.groups, strict=True):
        sub = build_household(enrolled, cohort.without(str(group)), top_k=20, target_far=0.01)
        _, normed = sub.score(vector)
        maxima.append(normed.max())
    assert np.mean(np.array(maxima) > strict.threshold) <= 0.02  # the cohort changes a little per trial


def test_genuine_clips_pass_and_other_speakers_do_not() -> None:
    rng = np.random.default_rng(1)
    cohort = cohort_of(rng)
    alice = rand_unit(rng, 1)[0]
    household = build_household({"alice": unit_rows(alice + 0.1 * rng.normal(size=(3, DIM)))}, cohort, top_k=20,
                                target_far=0.01)
    genuine = decide(household, unit_rows(alice + 0.1 * rng.normal(size=DIM))[0], floor=0.75)
    assert (genuine.index, genuine.reason) == (0, "matched")
    assert genuine.normalised >= household.threshold
    stranger = decide(household, rand_unit(rng, 1)[0], floor=0.75)
    assert (stranger.index, stranger.reason) == (None, "below_floor")


def test_above_the_floor_but_below_the_calibrated_threshold_is_unknown() -> None:
    """A voice like many cohort voices: its raw cosine passes 0.75, its normalised score does not."""
    rng = np.random.default_rng(2)
    crowd = rand_unit(rng, 1)[0]
    vectors = np.vstack([cohort_of(rng).vectors, unit_rows(crowd + 0.16 * rng.normal(size=(40, DIM)))])
    groups = np.concatenate([cohort_of(rng).groups, np.array([f"c{i}" for i in range(40)], dtype="<U64")])
    cohort = Cohort(unit_rows(vectors), groups, "test")
    household = build_household({"alice": unit_rows(crowd + 0.05 * rng.normal(size=(3, DIM)))}, cohort, top_k=20,
                                target_far=0.01)
    lookalike = unit_rows(crowd + 0.16 * rng.normal(size=DIM))[0]
    decision = decide(household, lookalike, floor=0.75)
    assert decision.raw > 0.75
    assert (decision.index, decision.reason) == (None, "below_calibrated")
    assert decision.normalised < decision.threshold


def test_too_few_impostor_trials_calibrate_nothing() -> None:
    rng = np.random.default_rng(3)
    two = {"a": rand_unit(rng, 3), "b": rand_unit(rng, 3)}  # 6 impostor trials, no cohort
    household = build_household(two, None, top_k=10, target_far=0.01)
    assert household.impostor_trials < MIN_IMPOSTOR_TRIALS and household.threshold is None
    raw, normed = household.score(two["a"][0])
    assert normed is None and raw.shape == (2,)
    assert build_household({}, None, top_k=10, target_far=0.01).ids == ()


def test_an_enrolled_person_who_is_in_the_cohort_is_not_their_own_impostor() -> None:
    rng = np.random.default_rng(4)
    cohort = cohort_of(rng)
    alice = cohort.vectors[cohort.groups == "s0"]  # Alice is speaker s0 of the shipped cohort
    assert same_speakers(cohort, unit_rows(alice.mean(axis=0))[0]) == {"s0"}
    household = build_household({"alice": alice[:3]}, cohort, top_k=20, target_far=0.01)
    assert len(household.cohorts[0]) == len(cohort) - 4  # her own clips left the cohort
    assert decide(household, alice[3], floor=0.5).reason == "matched"


def test_other_profiles_join_each_profiles_cohort() -> None:
    rng = np.random.default_rng(5)
    cohort = cohort_of(rng)
    household = build_household({"a": rand_unit(rng, 3), "b": rand_unit(rng, 2)}, cohort, top_k=20, target_far=0.01)
    assert [len(c) for c in household.cohorts] == [len(cohort) + 2, len(cohort) + 3]


def test_cohort_file_round_trip_and_bad_files(tmp_path, caplog) -> None:
    rng = np.random.default_rng(6)
    cohort = cohort_of(rng, speakers=3, clips=2)
    path = save_cohort(tmp_path / "c.npz", cohort, [{"name": "x", "licence": "CC0"}])
    loaded = load_cohort(path, DIM)
    assert np.allclose(loaded.vectors, cohort.vectors, atol=1e-3) and list(loaded.groups) == list(cohort.groups)
    assert loaded.engine == "test"
    assert load_cohort(path, 256) is None  # another dimension
    assert load_cohort(tmp_path / "missing.npz", DIM) is None
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert load_cohort(tmp_path / "junk.npz", DIM) is None
    assert "raw-cosine floor only" in caplog.text


@pytest.mark.parametrize("engine", ["ge2e", "d-vector"])
def test_the_packaged_cohorts_load_with_their_sources(engine: str) -> None:
    cohort = load_cohort(cohort_path(engine), 256)
    assert cohort is not None and cohort.engine == engine
    assert len(cohort) >= 300 and len(set(speakers_of(cohort.groups))) >= 20
    with np.load(cohort_path(engine)) as data:
        meta = json.loads(str(data["meta"]))
    assert {s["name"] for s in meta["sources"]} == {"librispeech", "librivox", "wakeword", "piper-joe"}
    assert all(s["licence"] for s in meta["sources"])
