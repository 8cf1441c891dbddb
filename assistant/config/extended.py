"""The messaging webhook and the extended-feature sections."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import Field, field_validator

from assistant.config.base import Section


class MessengerSettings(Section):
    enabled: bool = False
    platform: str = "messenger"
    verify_token: str | None = None
    app_secret: str | None = None
    access_token: str | None = None
    signature_required: bool = True
    api_base_url: str = "http://127.0.0.1:8090"
    allowed_senders: dict[str, UUID] = Field(default_factory=dict)  # platform sender id -> user id


class PrivacySettings(Section):
    enabled: bool = True  # beyond the spec: off answers 503 naming privacy.enabled
    epsilon: float = Field(1.0, gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)
    budget_reset_interval: Literal["hourly", "daily", "weekly", "monthly"] = "daily"
    # beyond the spec: dp-accounting's composition, "pld" (privacy-loss distributions, tight) or "rdp"
    accountant: Literal["pld", "rdp"] = "pld"


class CognitiveLoadSettings(Section):
    enabled: bool = True  # beyond the spec: off, answers keep the configured system prompt only
    circadian_weight: float = Field(0.3, ge=0.0, le=1.0)
    duration_weight: float = Field(0.25, ge=0.0, le=1.0)
    latency_weight: float = Field(0.2, ge=0.0, le=1.0)
    complexity_weight: float = Field(0.15, ge=0.0, le=1.0)
    multitask_weight: float = Field(0.1, ge=0.0, le=1.0)
    fatigue_onset_minutes: int = Field(30, ge=1)
    bullet_points_threshold: float = Field(0.4, ge=0.0, le=1.0)  # BulletPoints at load >= 0.4
    tldr_first_threshold: float = Field(0.7, ge=0.0, le=1.0)  # TlDrFirst at load >= 0.7


class PrecacheSettings(Section):
    enabled: bool = True  # beyond the spec: off, no query is predicted nor refreshed
    min_probability: float = Field(0.7, ge=0.0, le=1.0)
    check_interval_minutes: int = Field(15, ge=1)
    max_precached_queries: int = Field(20, ge=0)
    thermal_pause_celsius: float = 65.0


class KnowledgeVisualizationSettings(Section):
    max_nodes: int = Field(5000, ge=1)
    min_retention_threshold: float = Field(0.1, ge=0.0, le=1.0)


class SovereignIntelligenceSettings(Section):
    enabled: bool = True  # beyond the spec: the sovereignty score, explanations and the immune view
    signal_bus_capacity: int = Field(1024, ge=1)
    signal_retention_days: int = Field(90, ge=1)


class RedTeamSettings(Section):
    enabled: bool = False
    max_attacks_per_run: int = Field(100, ge=1)


class LoraSettings(Section):
    enabled: bool = False
    learning_rate: float = Field(0.0001, gt=0)
    rank: int = Field(8, ge=1)
    min_samples: int = Field(50, ge=1)
    # beyond the spec (assistant/learning/): training and evaluation knobs; see the training helper's fields


class DistillationSettings(Section):
    """Beyond the spec's limits: the teacher engine of distillation runs (assistant/learning/distill.py)."""

    enabled: bool = False


class FederatedSettings(Section):
    """Beyond the spec's limits: the user's own instances that exchange adapter updates
    (assistant/learning/federated*.py)."""

    enabled: bool = False


class MeshSettings(Section):
    """Beyond the spec's limits: peer instances that chat requests may be forwarded to (assistant/mesh/)."""

    enabled: bool = False


class OptimizationSettings(Section):
    enabled: bool = False
    max_iterations: int = Field(50, ge=1)
    exploration_weight: float = Field(1.0, ge=0)


# pqc and homomorphic are not implemented: enabling either refuses to start (a ConfigError naming the key
# and why) rather than running without the protection the setting promises. Federated payloads are signed
# (Ed25519) and sent over the transport the peer's URL names; their content is already clipped and noised
# (differential privacy), so neither the key exchange nor the aggregation needs a secret the peer could read.
PQC_REFUSAL = ("post-quantum key exchange is not implemented in this build: federated payloads are signed with "
               "Ed25519 and carried by the peer URL's transport (use https with a post-quantum TLS terminator "
               "if you need one); set pqc.enabled = false")
HOMOMORPHIC_REFUSAL = ("homomorphic encryption is not implemented in this build: federated updates are clipped and "
                       "noised (Gaussian mechanism, charged to the privacy budget) before they leave the instance, "
                       "and averaged in the clear; set homomorphic.enabled = false")


class PqcSettings(Section):
    enabled: bool = False
    hybrid_mode: bool = True

    @field_validator("enabled")
    @classmethod
    def _refuse(cls, enabled: bool) -> bool:
        if enabled:
            raise ValueError(PQC_REFUSAL)
        return enabled


class HomomorphicSettings(Section):
    enabled: bool = False
    security_level: Literal[128, 192, 256] = 128

    @field_validator("enabled")
    @classmethod
    def _refuse(cls, enabled: bool) -> bool:
        if enabled:
            raise ValueError(HOMOMORPHIC_REFUSAL)
        return enabled
