"""Speaker verification that holds on people the project has never heard: adaptive score normalisation
against an impostor cohort, and a household threshold chosen from a target false-accept rate.

Raw cosine scores are not comparable across people: with the d-vector encoder two different women can
score 0.80 while one man's own clips score 0.64. Adaptive symmetric normalisation (AS-norm, Matějka et
al. 2017) rescales each trial by how the two sides score against people they are *not*: for an enrolled
profile ``e`` and a test utterance ``t`` with raw cosine ``s``::

    s_norm = ½ · ((s − μ_e) / σ_e + (s − μ_t) / σ_t)

where ``μ_x, σ_x`` are the mean and standard deviation of the ``top_k`` highest cosines of ``x`` against the
cohort. A voice that resembles many cohort voices (as the enrolled woman did) has a high ``μ``, so a
look-alike's raw 0.80 normalises low; a voice unlike the cohort keeps its own genuine scores high.

**The cohort** is speech the project may ship, as embeddings only (``data/speaker_cohort_<engine>.npz``;
sources and licences in ``data/README.md``; rebuilt by ``benchmarks/speaker_cohort.py``): real readers
and recordings plus speed-perturbed copies of them (0.85-1.15×, which shifts pitch and formants together
and gives new pseudo-speakers, as speed perturbation does for speaker-recognition training). It is made
**adaptive** per household: for a profile, every other enrolled profile's samples join the cohort (those
are the people most likely to be mistaken for it).

**The household threshold** is chosen from ``target_far`` (1 %): every cohort vector and every enrolled
sample is scored as an impostor against the profiles it does not belong to (normalised with its own group
left out of the cohort), the highest score over those profiles is what an identification would see, and
the threshold is the ``1 − target_far`` quantile of those maxima. The spec's ``match_threshold`` (0.75)
stays a floor on the raw cosine: a match needs both.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "data"
SIGMA_FLOOR = 1e-3  # a cohort whose top scores are all equal would divide by zero
SAME_SPEAKER = 0.9  # a cohort speaker this close to a profile's centroid is that person (both engines'
# different-speaker centroid cosines stay below 0.8 on the dev readers, their same-speaker ones above 0.9)
MIN_IMPOSTOR_TRIALS = 20  # fewer impostor trials than this calibrate nothing: the raw floor alone decides


@dataclass(frozen=True)
class Cohort:
    """Unit-length impostor embeddings and the (pseudo-)speaker each came from."""

    vectors: np.ndarray  # (n, dim) float32, unit rows
    groups: np.ndarray  # (n,) str
    engine: str = ""

    def __len__(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def plus(self, vectors: np.ndarray, group: str) -> Cohort:
        vectors = unit_rows(vectors)
        return Cohort(np.vstack([self.vectors, vectors]),
                      np.concatenate([self.groups, np.full(len(vectors), group, dtype=self.groups.dtype)]),
                      self.engine)

    def without(self, group: str) -> Cohort:
        keep = self.groups != group
        return Cohort(self.vectors[keep], self.groups[keep], self.engine)

    def without_speakers(self, speakers: set[str]) -> Cohort:
        if not speakers:
            return self
        keep = ~np.isin(speakers_of(self.groups), list(speakers))
        return Cohort(self.vectors[keep], self.groups[keep], self.engine)

    @classmethod
    def empty(cls, dim: int, engine: str = "") -> Cohort:
        return cls(np.zeros((0, dim), np.float32), np.zeros(0, dtype="<U64"), engine)


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    return vectors / (np.linalg.norm(vectors, axis=-1, keepdims=True) + 1e-12)


def speakers_of(groups: np.ndarray) -> np.ndarray:
    """The real speaker of each group: ``"librispeech:1688@x0.9"`` (a speed-perturbed pseudo-speaker)
    came from ``"librispeech:1688"``."""
    return np.array([str(g).split("@", 1)[0] for g in groups], dtype="<U80")


def same_speakers(cohort: Cohort, centroid: np.ndarray) -> set[str]:
    """The cohort's real speakers who *are* the enrolled person (their unperturbed clips' mean has a cosine
    above ``SAME_SPEAKER`` with the profile's centroid): someone who is in the shipped cohort and enrols
    is no impostor for themselves, and must not normalise their own scores away."""
    found = set()
    plain = np.array([g == s for g, s in zip(cohort.groups, speakers_of(cohort.groups), strict=True)], dtype=bool)
    for speaker in set(speakers_of(cohort.groups[plain])):
        mean = unit_rows(cohort.vectors[plain & (cohort.groups == speaker)].mean(axis=0))[0]
        if float(mean @ centroid) > SAME_SPEAKER:
            found.add(str(speaker))
    return found


def cohort_path(engine: str) -> Path:
    return DATA_DIR / f"speaker_cohort_{engine}.npz"


def save_cohort(path: Path | str, cohort: Cohort, sources: list[dict[str, str]]) -> Path:
    """Write ``vectors`` (float16: half the size, cosines change by < 1e-3), ``groups`` and a JSON
    ``meta`` (engine, dim, sources with their licences)."""
    path = Path(path)
    meta = {"engine": cohort.engine, "dim": cohort.dim, "count": len(cohort), "sources": sources}
    np.savez_compressed(path, vectors=cohort.vectors.astype(np.float16), groups=cohort.groups.astype("<U64"),
                        meta=np.array(json.dumps(meta)))
    return path


def load_cohort(path: Path | str, dim: int) -> Cohort | None:
    """The cohort at ``path``; None (logged) when it is missing, unreadable or of another dimension."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            vectors, groups = data["vectors"].astype(np.float32), data["groups"].astype("<U64")
    except (OSError, ValueError, KeyError) as exc:
        log.warning("speaker cohort %s cannot be read (%s): identification uses the raw-cosine floor only", path, exc)
        return None
    if vectors.ndim != 2 or vectors.shape[1] != dim or len(groups) != len(vectors):
        log.warning("speaker cohort %s holds %s vectors, not %d-dim ones: identification uses the raw-cosine "
                    "floor only", path, vectors.shape, dim)
        return None
    return Cohort(unit_rows(vectors), groups, str(meta.get("engine", "")))


def top_stats(queries: np.ndarray, cohort: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of each query's ``top_k`` highest cosines with the cohort rows."""
    queries = unit_rows(queries)
    if cohort.shape[0] == 0:
        return np.zeros(len(queries)), np.ones(len(queries))
    scores = queries @ cohort.T
    k = max(1, min(int(top_k), scores.shape[1]))
    top = np.partition(scores, scores.shape[1] - k, axis=1)[:, -k:]
    return top.mean(axis=1).astype(np.float64), np.maximum(top.std(axis=1), SIGMA_FLOOR).astype(np.float64)


def as_norm(raw: np.ndarray | float, mu_e: np.ndarray | float, sd_e: np.ndarray | float,
            mu_t: np.ndarray | float, sd_t: np.ndarray | float) -> np.ndarray:
    """Adaptive symmetric normalisation of raw cosines (see the module docstring)."""
    return 0.5 * ((np.asarray(raw) - mu_e) / sd_e + (np.asarray(raw) - mu_t) / sd_t)


@dataclass(frozen=True)
class Household:
    """Every enrolled profile with what scoring a query against it needs, and the calibrated threshold.

    ``threshold`` is None when there is too little to calibrate on (fewer than ``MIN_IMPOSTOR_TRIALS``
    impostor trials: no cohort and a small household): then only the raw-cosine floor decides."""

    ids: tuple[str, ...]
    centroids: np.ndarray  # (p, dim)
    cohorts: tuple[np.ndarray, ...]  # per profile: the shipped cohort plus the other profiles' samples
    mu_e: np.ndarray  # (p,)
    sd_e: np.ndarray  # (p,)
    threshold: float | None
    impostor_trials: int
    top_k: int

    def score(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """Raw cosines with every centroid, and their normalised scores (None without any cohort)."""
        query = unit_rows(query)[0]
        raw = self.centroids @ query
        if self.threshold is None or not any(len(c) for c in self.cohorts):
            return raw.astype(np.float64), None
        normed = np.empty(len(self.ids))
        for i, cohort in enumerate(self.cohorts):
            mu_t, sd_t = top_stats(query[None, :], cohort, self.top_k)
            normed[i] = float(as_norm(raw[i], self.mu_e[i], self.sd_e[i], mu_t[0], sd_t[0]))
        return raw.astype(np.float64), normed


def build_household(samples: Mapping[str, np.ndarray], cohort: Cohort | None, *, top_k: int,
                    target_far: float) -> Household:
    """Profiles (id -> their ``(n, dim)`` sample embeddings) -> a :class:`Household` with its threshold."""
    ids = tuple(samples)
    dim = next(iter(samples.values())).shape[-1] if ids else (cohort.dim if cohort else 0)
    base = cohort if cohort is not None else Cohort.empty(dim)
    rows = {pid: unit_rows(samples[pid]) for pid in ids}
    centroids = unit_rows(np.stack([rows[pid].mean(axis=0) for pid in ids])) if ids else np.zeros((0, dim))
    cohorts: list[Cohort] = []
    excluded: list[set[str]] = []
    for i, pid in enumerate(ids):
        same = same_speakers(base, centroids[i])
        excluded.append(same)
        own = base.without_speakers(same)
        for other in ids:
            if other != pid:
                own = own.plus(rows[other], f"profile:{other}")
        cohorts.append(own)
    stats = [top_stats(centroids[i][None, :], c.vectors, top_k) for i, c in enumerate(cohorts)]
    mu_e = np.array([s[0][0] for s in stats]) if ids else np.zeros(0)
    sd_e = np.array([s[1][0] for s in stats]) if ids else np.zeros(0)
    maxima = _impostor_maxima(ids, centroids, cohorts, base, rows, mu_e, sd_e, top_k, excluded)
    threshold = (float(np.quantile(maxima, 1.0 - target_far, method="higher"))
                 if maxima.size >= MIN_IMPOSTOR_TRIALS else None)
    return Household(ids, centroids, tuple(c.vectors for c in cohorts), mu_e, sd_e, threshold, int(maxima.size),
                     top_k)


def _impostor_maxima(ids: tuple[str, ...], centroids: np.ndarray, cohorts: list[Cohort], base: Cohort,
                     rows: Mapping[str, np.ndarray], mu_e: np.ndarray, sd_e: np.ndarray, top_k: int,
                     excluded: list[set[str]]) -> np.ndarray:
    """For each impostor vector (a cohort vector, or an enrolled sample against the other profiles), the
    highest normalised score over the profiles it does not belong to, normalised with its own group
    real speaker (every speed-perturbed copy too) or profile left out of each profile's cohort: a
    near-copy of itself in the cohort would make every impostor look ordinary."""
    parts = [base.vectors] + [rows[pid] for pid in ids]
    vectors = np.vstack(parts) if parts else np.zeros((0, centroids.shape[-1]), np.float32)
    groups = np.concatenate([base.groups.astype("<U80")]
                            + [np.full(len(rows[pid]), f"profile:{pid}", dtype="<U80") for pid in ids])
    if not len(vectors) or not ids:
        return np.zeros(0)
    best = np.full(len(vectors), -np.inf)
    for i, pid in enumerate(ids):
        cohort = cohorts[i]
        if not len(cohort):
            continue
        scores = vectors @ cohort.vectors.T  # (trials, n)
        same = speakers_of(groups)[:, None] == speakers_of(cohort.groups)[None, :]
        scores[same] = -np.inf  # leave the impostor's own speaker (at every speed) out of its cohort
        available = np.isfinite(scores).sum(axis=1)
        k = max(1, min(top_k, int(available.min()) if available.size else 1))
        top = -np.sort(-scores, axis=1)[:, :k]
        with np.errstate(invalid="ignore"):  # rows with fewer than k cohort scores are dropped below
            mu_t, sd_t = top.mean(axis=1), np.maximum(top.std(axis=1), SIGMA_FLOOR)
            value = as_norm(vectors @ centroids[i], mu_e[i], sd_e[i], mu_t, sd_t)
        own = (groups == f"profile:{pid}") | np.isin(speakers_of(groups), list(excluded[i]))
        value[own | (available < k)] = -np.inf  # a profile's own samples are not impostors for it
        best = np.maximum(best, value)
    return best[np.isfinite(best)]


@dataclass(frozen=True)
class Decision:
    """Identification against a household: ``index`` of the accepted profile (None: unknown), and why."""

    index: int | None
    reason: str  # "matched", "no_profiles", "below_floor" or "below_calibrated"
    raw: float  # the raw cosine of the chosen (or best) profile; 0.0 with no profile
    normalised: float | None
    threshold: float | None


def decide(household: Household, query: np.ndarray, floor: float) -> Decision:
    """The best profile by normalised score among those whose raw cosine is above ``floor``; unknown when
    none is, or when that profile's normalised score is below the household threshold."""
    if not household.ids:
        return Decision(None, "no_profiles", 0.0, None, household.threshold)
    raw, normed = household.score(query)
    above = np.flatnonzero(raw > floor)
    if not above.size:
        return Decision(None, "below_floor", float(raw.max()), None, household.threshold)
    best = int(above[np.argmax((normed if normed is not None else raw)[above])])
    value = None if normed is None else round(float(normed[best]), 4)
    if value is not None and household.threshold is not None and value < household.threshold:
        return Decision(None, "below_calibrated", float(raw[best]), value, household.threshold)
    return Decision(best, "matched", float(raw[best]), value, household.threshold)
