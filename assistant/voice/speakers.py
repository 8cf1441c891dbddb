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
from assistant.voice.audio import pcm_to_float
from assistant.voice.engines import EngineError
from assistant.voice.rooms import clean_name
from assistant.voice.speaker import SpeakerEmbedder, cosine, normalise

SILENCE_RMS = 1e-3  # -60 dBFS: a sample quieter than this holds no voice to enrol
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

    def add_sample(self, user_id: str, name: str, embedding: np.ndarray) -> tuple[SpeakerProfile, bool]:
        """Add one embedding to the user's profile ``name``, creating the profile if it has none."""
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
                self._check_dim(speaker_id, len(embedding))
                self.db.execute("UPDATE voice_speakers SET updated_at = ? WHERE id = ?", (now, speaker_id))
            embedding_id = str(uuid4())
            self.db.execute("INSERT INTO voice_embeddings (id, speaker_id, embedding, dim, created_at) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (embedding_id, speaker_id, self._seal(embedding_id, user_id, embedding), len(embedding),
                             now))
        return self.get(speaker_id), created

    def embeddings(self, dim: int) -> dict[str, np.ndarray]:
        """Profile id -> ``(n, dim)`` of its embeddings of dimension ``dim`` (others cannot be compared)."""
        grouped: dict[str, list[np.ndarray]] = {}
        for row in self.db.query("SELECT e.id, e.speaker_id, e.embedding, s.user_id FROM voice_embeddings e "
                                 "JOIN voice_speakers s ON s.id = e.speaker_id WHERE e.dim = ? "
                                 "ORDER BY e.created_at", (dim,)):
            grouped.setdefault(row["speaker_id"], []).append(self._open(row["id"], row["user_id"], row["embedding"]))
        return {speaker_id: np.stack(vectors) for speaker_id, vectors in grouped.items()}

    def delete(self, speaker_id: str) -> None:
        """Delete the profile and, by cascade, every embedding of it."""
        self.get(speaker_id)
        self.db.execute("DELETE FROM voice_speakers WHERE id = ?", (speaker_id,))

    def _check_dim(self, speaker_id: str, dim: int) -> None:
        stored = self.db.scalar("SELECT dim FROM voice_embeddings WHERE speaker_id = ? AND dim != ? LIMIT 1",
                                (speaker_id, dim))
        if stored is not None:
            raise ConflictError(f"speaker {speaker_id} was enrolled with {stored}-dim embeddings but the engine "
                                f"now gives {dim}: delete the profile and enrol again",
                                {"stored_dim": stored, "engine_dim": dim})

    def _seal(self, embedding_id: str, user_id: str, embedding: np.ndarray) -> bytes:
        data = np.asarray(embedding, dtype="<f4").tobytes()
        at = SealContext("voice_embeddings", "embedding", embedding_id, user_id)
        return data if self.sealer is None else self.sealer.seal_data(data, at)

    def _open(self, embedding_id: str, user_id: str, sealed: bytes) -> np.ndarray:
        at = SealContext("voice_embeddings", "embedding", embedding_id, user_id)
        data = bytes(sealed) if self.sealer is None else self.sealer.open_data(sealed, at)
        return np.frombuffer(data, dtype="<f4").astype(np.float32)


def _is_silent(pcm: bytes) -> bool:
    samples = pcm_to_float(pcm)
    return samples.size == 0 or float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) < SILENCE_RMS


class SpeakerRegistry:
    """Enrollment and identification over a :class:`SpeakerStore` and an embedder (or a factory of one,
    called on first use so building the services loads no model)."""

    def __init__(self, store: SpeakerStore, settings: SpeakerIdSettings,
                 embedder: SpeakerEmbedder | Callable[[], SpeakerEmbedder]):
        self.store = store
        self.settings = settings
        self._source = embedder
        self._embedder: SpeakerEmbedder | None = None
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

    def embed(self, pcm: bytes) -> np.ndarray:
        vector = np.asarray(self.embedder.embed(pcm), dtype=np.float32).reshape(-1)
        if vector.shape != (self.settings.embedding_dim,) or not np.all(np.isfinite(vector)):
            raise EngineError(f"the speaker engine returned {vector.shape[0]} values (or non-finite ones); "
                              f"expected {self.settings.embedding_dim}")
        return normalise(vector)

    def enroll(self, user_id: str, name: str, pcm: bytes) -> tuple[SpeakerProfile, bool]:
        """Add a sample to the user's profile ``name`` (1..100 characters, one line); ``created`` is True
        when this sample created the profile. A silent sample is refused (ValidationFailed)."""
        name = clean_name(name)
        if _is_silent(pcm):
            raise ValidationFailed("the sample is silent: record the speaker talking",
                                   [{"field": "body", "error": "silent"}])
        return self.store.add_sample(str(user_id), name, self.embed(pcm))

    def identify(self, pcm: bytes) -> SpeakerMatch:
        return self.identify_embedding(self.embed(pcm))

    def identify_embedding(self, embedding: np.ndarray) -> SpeakerMatch:
        """The best profile by cosine with its centroid; unknown at or below ``match_threshold``."""
        query = np.asarray(embedding, dtype=np.float32).reshape(-1)
        if query.shape != (self.settings.embedding_dim,):
            raise ValidationFailed(f"the embedding has {query.shape[0]} dimensions; expected "
                                   f"{self.settings.embedding_dim}",
                                   [{"field": "embedding", "error": "wrong dimension"}])
        best_id, best = None, 0.0
        for speaker_id, vectors in self.store.embeddings(self.settings.embedding_dim).items():
            score = cosine(query, normalise(normalise_rows(vectors).mean(axis=0)))
            if best_id is None or score > best:
                best_id, best = speaker_id, score
        if best_id is None:
            return SpeakerMatch(None, None, None, 0.0, reason=MatchReason.NO_PROFILES)
        if best <= self.settings.match_threshold:
            return SpeakerMatch(None, None, None, best, reason=MatchReason.BELOW_FLOOR)
        profile = self.store.get(best_id)
        reliable = self.reliable(profile)
        return SpeakerMatch(profile.id, profile.user_id, profile.name, best, reliable,
                            MatchReason.MATCHED if reliable else MatchReason.UNRELIABLE_PROFILE)

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
