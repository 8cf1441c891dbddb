"""Speaker profiles: enrollment, identification and their SQLite store.

A profile is one user's voice under a name (unique per user, ignoring case), created by its first
enrollment sample; every sample adds one embedding. Identification compares a query embedding with
each profile's centroid (the mean of its embeddings, re-normalised): the best-scoring profile is the
match when its cosine is above ``match_threshold`` (0.75); at or below it the speaker is unknown. A
profile with fewer than ``min_enrollment_samples`` (3) samples still matches, but the match says
``reliable=False`` so callers can decide how far to trust it.

Embeddings are biometric data: each is sealed with the store's :class:`~assistant.crypto.Sealer`
(XChaCha20-Poly1305, bound to its row id), unlike memory embeddings, and deleting a profile deletes
all of them (``ON DELETE CASCADE``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import uuid4

import numpy as np

from assistant.clock import iso, utcnow
from assistant.config import SpeakerIdSettings
from assistant.crypto import SealContext, Sealer
from assistant.errors import ConfigError, ConflictError, NotFoundError, ValidationFailed
from assistant.storage.db import Database
from assistant.voice.engines import EngineError
from assistant.voice.enrolment import SampleQuality, assess, disagreement
from assistant.voice.rooms import clean_name
from assistant.voice.speaker import SpeakerEmbedder, cosine, normalise
from assistant.voice.vad import EnergyVad, VoiceActivityDetector
from assistant.voice.verification import Cohort, Household, build_household, cohort_path, decide, load_cohort

log = logging.getLogger(__name__)
MAX_SAMPLE_BYTES = 2 * 1024 * 1024  # an uploaded sample (60 s of raw PCM is 1.92 MB)


@dataclass(frozen=True)
class SpeakerProfile:
    id: str
    user_id: str
    name: str
    enrollment_count: int
    created_at: str


class MatchReason(StrEnum):
    """Why identification decided as it did (the voice event log's ``reason``)."""

    MATCHED = "matched"  # raw cosine above the floor, normalised score at or above the household threshold
    UNRELIABLE_PROFILE = "unreliable_profile"  # matched, but the profile has < min_enrollment_samples samples
    NO_PROFILES = "no_profiles"  # nobody is enrolled
    BELOW_FLOOR = "below_floor"  # raw cosine at or below match_threshold (the spec's 0.75)
    BELOW_CALIBRATED = "below_calibrated"  # above the floor, but the normalised score is below the threshold
    SERVICE_DOWN = "speaker_service_down"  # the speaker engine failed: treated as unknown


@dataclass(frozen=True)
class SpeakerMatch:
    """The best profile for a query: ids are None when the speaker is unknown (score at or below the
    threshold, or no profile at all, then score 0.0). ``reliable`` is True only for a match whose
    profile has at least ``min_enrollment_samples`` samples. ``score`` is the raw cosine with the
    profile's centroid; ``normalised`` the cohort-normalised score and ``threshold`` the household's
    calibrated threshold on it (None when not computed); ``reason`` says why."""

    speaker_id: str | None
    user_id: str | None
    name: str | None
    score: float
    reliable: bool = False
    reason: MatchReason = MatchReason.BELOW_FLOOR
    normalised: float | None = None
    threshold: float | None = None

    @property
    def known(self) -> bool:
        return self.speaker_id is not None

    @property
    def confident(self) -> bool:
        """Known and reliable: only then may a voice exchange use and learn that user's memories."""
        return self.known and self.reliable


PROFILES_SQL = (
    "SELECT s.id, s.user_id, s.name, s.created_at, COUNT(e.id) AS enrollment_count FROM voice_speakers s "
    "LEFT JOIN voice_embeddings e ON e.speaker_id = s.id {where} GROUP BY s.id "
    "ORDER BY s.created_at, s.name COLLATE NOCASE"
)


def _profile(row: dict[str, Any]) -> SpeakerProfile:
    return SpeakerProfile(id=row["id"], user_id=row["user_id"], name=row["name"],
                          enrollment_count=int(row["enrollment_count"]), created_at=row["created_at"])


@dataclass
class SpeakerStore:
    """Profiles and their sealed embeddings in SQLite (tables of migration m012)."""

    db: Database
    sealer: Sealer | None = None  # None: embeddings stored in clear (tests, encryption disabled)
    clock: Callable[[], datetime] = utcnow

    def profiles(self, user_id: str | None = None) -> list[SpeakerProfile]:
        """Every profile (or one user's), oldest first."""
        if user_id is None:
            return [_profile(r) for r in self.db.query(PROFILES_SQL.format(where=""))]
        rows = self.db.query(PROFILES_SQL.format(where="WHERE s.user_id = ?"), (user_id,))
        return [_profile(r) for r in rows]

    def get(self, speaker_id: str) -> SpeakerProfile:
        row = self.db.one(PROFILES_SQL.format(where="WHERE s.id = ?"), (speaker_id,))
        if row is None:
            raise NotFoundError(f"speaker {speaker_id} not found")
        return _profile(row)

    def add_sample(self, user_id: str, name: str, embedding: np.ndarray,
                   engine: str = "d-vector") -> tuple[SpeakerProfile, bool]:
        """Add one embedding (made by ``engine``) to the user's profile ``name``, creating the profile if it
        has none. ConflictError when the profile's earlier samples came from another engine or dimension."""
        now = iso(self.clock())
        with self.db.transaction():
            row = self.db.one("SELECT id FROM voice_speakers WHERE user_id = ? AND name = ? COLLATE NOCASE",
                              (user_id, name))
            created = row is None
            speaker_id = str(uuid4()) if created else row["id"]
            if created:
                self.db.execute("INSERT INTO voice_speakers (id, user_id, name, created_at, updated_at) "
                                "VALUES (?, ?, ?, ?, ?)", (speaker_id, user_id, name, now, now))
            else:
                self._check_dim(speaker_id, len(embedding), engine)
                self.db.execute("UPDATE voice_speakers SET updated_at = ? WHERE id = ?", (now, speaker_id))
            embedding_id = str(uuid4())
            self.db.execute("INSERT INTO voice_embeddings (id, speaker_id, embedding, dim, engine, created_at) "
                            "VALUES (?, ?, ?, ?, ?, ?)",
                            (embedding_id, speaker_id, self._seal(embedding_id, user_id, embedding), len(embedding),
                             engine, now))
        return self.get(speaker_id), created

    def embeddings(self, dim: int, speaker_id: str | None = None, engine: str | None = None) -> dict[str, np.ndarray]:
        """Profile id -> ``(n, dim)`` of its embeddings of dimension ``dim`` (and, given, made by ``engine``:
        others cannot be compared); only ``speaker_id``'s when given."""
        grouped: dict[str, list[np.ndarray]] = {}
        only = "" if speaker_id is None else " AND e.speaker_id = ?"
        only += "" if engine is None else " AND e.engine = ?"
        params = (dim, *(() if speaker_id is None else (speaker_id,)), *(() if engine is None else (engine,)))
        for row in self.db.query("SELECT e.id, e.speaker_id, e.embedding, s.user_id FROM voice_embeddings e "
                                 f"JOIN voice_speakers s ON s.id = e.speaker_id WHERE e.dim = ?{only} "
                                 "ORDER BY e.created_at, e.id", params):
            grouped.setdefault(row["speaker_id"], []).append(self._open(row["id"], row["user_id"], row["embedding"]))
        return {speaker_id: np.stack(vectors) for speaker_id, vectors in grouped.items()}

    def delete(self, speaker_id: str) -> None:
        """Delete the profile and, by cascade, every embedding of it."""
        self.get(speaker_id)
        self.db.execute("DELETE FROM voice_speakers WHERE id = ?", (speaker_id,))

    def _check_dim(self, speaker_id: str, dim: int, engine: str) -> None:
        stored = self.db.scalar("SELECT dim FROM voice_embeddings WHERE speaker_id = ? AND dim != ? LIMIT 1",
                                (speaker_id, dim))
        if stored is not None:
            raise ConflictError(f"speaker {speaker_id} was enrolled with {stored}-dim embeddings but the engine "
                                f"now gives {dim}: delete the profile and enrol again",
                                {"stored_dim": stored, "engine_dim": dim})
        other = self.db.scalar("SELECT engine FROM voice_embeddings WHERE speaker_id = ? AND engine != ? LIMIT 1",
                               (speaker_id, engine))
        if other is not None:
            raise ConflictError(f"speaker {speaker_id} was enrolled with the {other!r} speaker engine but the "
                                f"configured engine is {engine!r}, whose embeddings cannot be compared with "
                                "those: delete the profile and enrol again",
                                {"stored_engine": other, "engine": engine})

    def _seal(self, embedding_id: str, user_id: str, embedding: np.ndarray) -> bytes:
        data = np.asarray(embedding, dtype="<f4").tobytes()
        at = SealContext("voice_embeddings", "embedding", embedding_id, user_id)
        return data if self.sealer is None else self.sealer.seal_data(data, at)

    def _open(self, embedding_id: str, user_id: str, sealed: bytes) -> np.ndarray:
        at = SealContext("voice_embeddings", "embedding", embedding_id, user_id)
        data = bytes(sealed) if self.sealer is None else self.sealer.open_data(sealed, at)
        return np.frombuffer(data, dtype="<f4").astype(np.float32)


@dataclass(frozen=True)
class Enrolment:
    """What one enrolment sample did: the profile after it, whether it created it, its quality, and the
    warnings a client should show (a sample that disagrees with the profile's earlier ones)."""

    profile: SpeakerProfile
    created: bool
    quality: SampleQuality
    warnings: tuple[str, ...] = ()


CohortSource = Cohort | None | Callable[[SpeakerIdSettings, str], Cohort | None]


def packaged_cohort(settings: SpeakerIdSettings, engine: str) -> Cohort | None:
    """``[voice.speaker_id] cohort`` or the packaged cohort of ``engine`` (for the remote engine: the
    engine the companion service reports); None, logged, when there is none of the right dimension."""
    return load_cohort(settings.cohort or cohort_path(engine), settings.embedding_dim)


class SpeakerRegistry:
    """Enrollment and identification over a :class:`SpeakerStore` and an embedder (or a factory of one,
    called on first use so building the services loads no model).

    ``vad`` (a detector or a factory of one; default the energy detector) measures how much speech an
    enrolment sample holds; ``cohort`` (default: the packaged cohort of the engine) is what scores are
    normalised against (:mod:`assistant.voice.verification`). The household (every profile's centroid, its
    normalisation statistics and the calibrated threshold) is rebuilt when a profile or sample is added
    or deleted, and cached in between."""

    def __init__(self, store: SpeakerStore, settings: SpeakerIdSettings,
                 embedder: SpeakerEmbedder | Callable[[], SpeakerEmbedder], *,
                 vad: VoiceActivityDetector | Callable[[], VoiceActivityDetector] | None = None,
                 cohort: CohortSource = packaged_cohort):
        self.store = store
        self.settings = settings
        self._source = embedder
        self._embedder: SpeakerEmbedder | None = None
        self._vad_source = vad if vad is not None else EnergyVad()
        self._vad: VoiceActivityDetector | None = None
        self._cohort_source = cohort
        self._cohort: tuple[str, Cohort | None] | None = None
        self._household: tuple[tuple[str, tuple[tuple[str, int], ...]], Household] | None = None
        self._lock = threading.Lock()

    @property
    def embedder(self) -> SpeakerEmbedder:
        """The embedder, built on first use; ConfigError when its dimension is not ``embedding_dim``."""
        with self._lock:
            if self._embedder is None:
                source = self._source
                embedder = source if hasattr(source, "embed") else source()
                if embedder.dim != self.settings.embedding_dim:
                    raise ConfigError(f"the speaker engine produces {embedder.dim}-dim embeddings but "
                                      f"[voice.speaker_id] embedding_dim is {self.settings.embedding_dim}")
                self._embedder = embedder
            return self._embedder

    @property
    def cohort(self) -> Cohort | None:
        """The impostor cohort for the current engine (loaded once per engine id)."""
        with self._lock:
            engine = self.engine_id  # reads only: safe under the lock
            if self._cohort is None or self._cohort[0] != engine:
                source = self._cohort_source
                self._cohort = (engine, source(self.settings, engine) if callable(source) else source)
            return self._cohort[1]

    @property
    def engine_id(self) -> str:
        """The engine that makes this registry's embeddings (stored with each; only its own are compared):
        the built embedder's ``engine_id`` (the remote one reports its service's), else the configured id."""
        return str(getattr(self._embedder, "engine_id", self.settings.engine))

    def embed(self, pcm: bytes) -> np.ndarray:
        vector = np.asarray(self.embedder.embed(pcm), dtype=np.float32).reshape(-1)
        if vector.shape != (self.settings.embedding_dim,) or not np.all(np.isfinite(vector)):
            raise EngineError(f"the speaker engine returned {vector.shape[0]} values (or non-finite ones); "
                              f"expected {self.settings.embedding_dim}")
        return normalise(vector)

    def assess(self, pcm: bytes) -> SampleQuality:
        """The sample's quality (:mod:`assistant.voice.enrolment`); ValidationFailed when it is unfit."""
        with self._lock:  # the detector is stateful: one sample at a time
            if self._vad is None:
                source = self._vad_source
                self._vad = source() if isinstance(source, type) or not hasattr(source, "speech_probability") \
                    else source
            return assess(pcm, self._vad, min_speech_s=self.settings.min_enrollment_speech_s)

    def enroll(self, user_id: str, name: str, pcm: bytes) -> tuple[SpeakerProfile, bool]:
        """Add a sample to the user's profile ``name`` (1..100 characters, one line); ``created`` is True
        when this sample created the profile. An unfit sample is refused (ValidationFailed)."""
        enrolment = self.enroll_sample(user_id, name, pcm)
        return enrolment.profile, enrolment.created

    def enroll_sample(self, user_id: str, name: str, pcm: bytes) -> Enrolment:
        """:meth:`enroll`, with the sample's quality and any warnings."""
        name = clean_name(name)
        quality = self.assess(pcm)
        embedding = self.embed(pcm)  # builds the embedder, so engine_id is the engine's own from here
        warnings = []
        existing = self._samples_of(str(user_id), name)
        if existing is not None:
            agreement = cosine(embedding, normalise(normalise_rows(existing).mean(axis=0)))
            if (warning := disagreement(agreement, self.settings.match_threshold)) is not None:
                warnings.append(warning)
        profile, created = self.store.add_sample(str(user_id), name, embedding, self.engine_id)
        return Enrolment(profile, created, quality, tuple(warnings))

    def _samples_of(self, user_id: str, name: str) -> np.ndarray | None:
        for profile in self.store.profiles(user_id):
            if profile.name.casefold() == name.casefold():
                return self.store.embeddings(self.settings.embedding_dim, profile.id, self.engine_id).get(profile.id)
        return None

    def identify(self, pcm: bytes) -> SpeakerMatch:
        return self.identify_embedding(self.embed(pcm))

    def household(self) -> Household:
        """Every profile's centroid and normalisation statistics and the calibrated threshold (cached
        until a profile or sample is added or deleted)."""
        profiles = tuple((p.id, p.enrollment_count) for p in self.store.profiles())
        signature = (self.engine_id, profiles)
        cached = self._household
        if cached is not None and cached[0] == signature:
            return cached[1]
        samples = self.store.embeddings(self.settings.embedding_dim, engine=self.engine_id)
        if stale := [p for p, _ in profiles if p not in samples]:
            log.warning("%d speaker profile(s) hold no sample of the %r engine and are not compared: enrol them "
                        "again (%s)", len(stale), self.engine_id, ", ".join(stale[:5]))
        household = build_household(samples, self.cohort,
                                    top_k=self.settings.cohort_top_k, target_far=self.settings.target_far)
        self._household = (signature, household)
        return household

    def identify_embedding(self, embedding: np.ndarray) -> SpeakerMatch:
        """The best profile by normalised score among those whose raw cosine is above ``match_threshold``;
        unknown when none is, or when the best normalised score is below the household threshold."""
        query = np.asarray(embedding, dtype=np.float32).reshape(-1)
        if query.shape != (self.settings.embedding_dim,):
            raise ValidationFailed(f"the embedding has {query.shape[0]} dimensions; expected "
                                   f"{self.settings.embedding_dim}",
                                   [{"field": "embedding", "error": "wrong dimension"}])
        household = self.household()
        decision = decide(household, query, self.settings.match_threshold)
        if decision.index is None:
            return SpeakerMatch(None, None, None, decision.raw, reason=MatchReason(decision.reason),
                                normalised=decision.normalised, threshold=decision.threshold)
        profile = self.store.get(household.ids[decision.index])
        reliable = self.reliable(profile)
        return SpeakerMatch(profile.id, profile.user_id, profile.name, decision.raw, reliable,
                            MatchReason.MATCHED if reliable else MatchReason.UNRELIABLE_PROFILE,
                            decision.normalised, decision.threshold)

    def list(self, user_id: str | None = None) -> list[SpeakerProfile]:
        """Every profile, or only ``user_id``'s."""
        return self.store.profiles(None if user_id is None else str(user_id))

    def get(self, speaker_id: str, user_id: str | None = None) -> SpeakerProfile:
        """The profile; NotFoundError when absent (or, given ``user_id``, owned by another user)."""
        profile = self.store.get(speaker_id)
        if user_id is not None and profile.user_id != str(user_id):
            raise NotFoundError(f"speaker {speaker_id} not found")
        return profile

    def delete(self, speaker_id: str, user_id: str | None = None) -> None:
        """Delete the profile and all its embeddings; NotFoundError as for :meth:`get`."""
        self.get(speaker_id, user_id)
        self.store.delete(speaker_id)

    def reliable(self, profile: SpeakerProfile) -> bool:
        return profile.enrollment_count >= self.settings.min_enrollment_samples


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / (np.linalg.norm(vectors, axis=-1, keepdims=True) + 1e-12)


def equal_error_rate(same: Sequence[float], different: Sequence[float]) -> tuple[float, float]:
    """``(EER, threshold)``: the threshold (one of the scores; a match is ``score > threshold``) where the
    false-reject rate (same-speaker scores at or below it) and the false-accept rate (different-speaker
    scores above it) are closest, and their mean there. The lowest such threshold wins ties."""
    genuine = np.asarray(same, dtype=np.float64)
    impostor = np.asarray(different, dtype=np.float64)
    if genuine.size == 0 or impostor.size == 0:
        raise ValueError("equal_error_rate needs at least one same-speaker and one different-speaker score")
    thresholds = np.unique(np.concatenate([genuine, impostor]))
    false_reject = (genuine[None, :] <= thresholds[:, None]).mean(axis=1)
    false_accept = (impostor[None, :] > thresholds[:, None]).mean(axis=1)
    best = int(np.argmin(np.abs(false_accept - false_reject)))
    return float((false_accept[best] + false_reject[best]) / 2), float(thresholds[best])
