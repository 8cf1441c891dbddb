"""The messaging webhook and the extended-feature sections."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit
from uuid import UUID

from pydantic import Field, SecretStr, field_validator

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
    # beyond the spec (assistant/learning/): training and evaluation knobs
    auto_start: bool = True  # a run starts by itself once a user has min_samples new samples since their last run
    base_model_path: Path | None = None  # the GGUF to train on; None: inference.model_path or the packaged model
    epochs: int = Field(2, ge=1, le=100)  # passes over the training split (one sample per optimiser step)
    max_steps: int = Field(200, ge=1, le=100_000)  # optimiser steps per run at most, whatever the epochs
    max_seq_tokens: int = Field(512, ge=32, le=8192)  # a sample's tokens: the prompt's oldest are cut first
    held_out_fraction: float = Field(0.2, gt=0.0, lt=1.0)  # of a user's samples, kept back to evaluate, never trained
    context_messages: int = Field(6, ge=0, le=100)  # earlier conversation messages kept before the question
    alpha: float = Field(16.0, gt=0)  # LoRA alpha: the update is scaled by alpha / rank (16 / 8 = 2)
    dropout: float = Field(0.05, ge=0.0, lt=1.0)  # LoRA dropout while training
    threads: int = Field(1, ge=1, le=256)  # torch CPU threads while training/evaluating (the engine keeps its own)
    # How much worse than the base model (relative mean NLL) a new adapter may be on the packaged regression
    # set and still be activated (assistant/learning/evaluate.py explains the rule).
    regression_tolerance: float = Field(0.05, ge=0.0, le=1.0)
    eval_max_samples: int = Field(50, ge=1, le=10_000)  # held-back samples scored per evaluation at most
    # llama.cpp's convert_lora_to_gguf.py (peft adapter -> GGUF LoRA, assistant/learning/convert.py);
    # None: <venv>/share/llama.cpp-convert, where `make setup` extracts it from llama-cpp-python's sdist
    converter_dir: Path | None = None


class DistillationSettings(Section):
    """Beyond the spec's limits: the teacher engine of distillation runs (assistant/learning/distill.py).
    Distillation trains through LoRA: it also needs ``lora.enabled``."""

    enabled: bool = False
    # The teacher: an engine of assistant/llm/ built from these fields alone (the [inference] section is the
    # student's and is not touched): "ollama" (/api/chat) or "openai_compatible" (/v1/chat/completions).
    teacher_engine: Literal["ollama", "openai_compatible"] = "openai_compatible"
    teacher_base_url: str | None = None  # e.g. "http://gpu-box:11434" or "http://gpu-box:8000/v1"; None: no teacher
    teacher_model: str | None = None  # the model the teacher serves (e.g. "qwen2.5:7b-instruct"); None: no teacher
    teacher_api_key: SecretStr | None = None  # openai_compatible only; never shown by the status route
    max_prompts: int = Field(200, ge=1, le=10_000)  # prompts of one run (the user's questions or a given list)
    max_tokens: int = Field(512, ge=1, le=131_072)  # per teacher answer
    temperature: float = Field(0.2, ge=0.0, le=2.0)  # low: the answers become training targets
    timeout_secs: float = Field(120.0, gt=0, le=3600)  # per teacher request
    concurrency: int = Field(1, ge=1, le=16)  # teacher requests in flight at once


class FederatedPeer(Section):
    """Another instance of this service that one local user owns too (assistant/learning/federated.py)."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # unique per user; rounds name peers by it
    url: str  # the peer's base URL (http or https); rounds POST to {url}/api/v1/federated/sync
    api_key: str = Field(repr=False, min_length=1)  # the user's key ON THE PEER, sent as "Authorization: Bearer"
    public_key: str  # the peer's Ed25519 public key (GET {url}/api/v1/federated/identity), base64 or hex
    user_id: UUID  # the local user this peer belongs to: only their rounds use it, only their key may answer it

    @field_validator("url")
    @classmethod
    def _base_url(cls, url: str) -> str:
        parsed = urlsplit(url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment:
            raise ValueError(f"must be an http:// or https:// base URL with a host, no query (got {url!r})")
        return url.strip().rstrip("/")

    @field_validator("public_key")
    @classmethod
    def _ed25519(cls, key: str) -> str:
        from assistant.learning.federated_identity import decode_public_key

        decode_public_key(key)  # ValueError naming the problem
        return key.strip()


class FederatedSettings(Section):
    """Beyond the spec's limits: the user's own instances that exchange adapter updates
    (assistant/learning/federated*.py). Needs ``privacy.enabled`` (every update is charged to the budget)."""

    enabled: bool = False
    key_path: Path = Path("federated_ed25519.key")  # this instance's Ed25519 key (0600, made at first use); relative: data dir
    peers: list[FederatedPeer] = Field(default_factory=list)
    # L2 norm the released adapter weights are clipped to (the Gaussian mechanism's sensitivity). A rank-8
    # q/v adapter of either packaged model has norm ~12 at peft's default init: 16 leaves it unclipped.
    clip_norm: float = Field(16.0, gt=0)
    epsilon: float = Field(0.5, ge=0.001, le=100)  # charged to the user's privacy budget per round (at privacy.delta)
    max_payload_bytes: int = Field(16 * 1024 * 1024, ge=4096, le=1024 * 1024 * 1024)  # a sync body at most (413)
    timeout_secs: float = Field(60.0, gt=0, le=3600)  # one exchange with one peer, connect to last byte
    max_clock_skew_secs: int = Field(300, ge=1, le=86_400)  # an envelope's timestamp this far from now is refused

    @field_validator("peers")
    @classmethod
    def _unique(cls, peers: list[FederatedPeer]) -> list[FederatedPeer]:
        pairs = [(p.user_id, p.name) for p in peers]
        twice = sorted({name for user, name in pairs if pairs.count((user, name)) > 1})
        if twice:
            raise ValueError(f"a user's peer names must be unique (twice: {', '.join(twice)})")
        return peers


PEER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class MeshPeer(Section):
    """One peer of the mesh: another instance of this service (or any OpenAI-compatible server)."""

    name: str = Field(pattern=PEER_NAME)  # how answers and the status route name it; "local" is reserved
    url: str  # the peer's base URL (http or https); requests go to {url}/v1/chat/completions
    api_key: str = Field(repr=False)  # a key of the peer, sent as "Authorization: Bearer <key>"
    model: str | None = None  # the peer's model to ask for; None: the request's model, else the peer's default
    max_concurrency: int = Field(2, ge=1, le=1024)  # forwards in flight at once; a full peer is skipped
    health_path: str = "/ready"  # probed with GET; 2xx is healthy (/ready: the peer's engine can answer)

    @field_validator("name")
    @classmethod
    def _not_local(cls, name: str) -> str:
        if name.lower() == "local":
            raise ValueError("'local' names the local engine in answers; give the peer another name")
        return name

    @field_validator("url")
    @classmethod
    def _base_url(cls, url: str) -> str:
        parsed = urlsplit(url.strip())
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"must be an http:// or https:// base URL with a host (got {url!r})")
        if parsed.query or parsed.fragment:
            raise ValueError(f"must be a base URL without query or fragment (got {url!r})")
        return url.strip().rstrip("/")

    @field_validator("health_path")
    @classmethod
    def _path(cls, path: str) -> str:
        if not path.startswith("/"):
            raise ValueError(f"must start with '/' (got {path!r})")
        return path


class MeshSettings(Section):
    """Beyond the spec's limits: peer instances that chat requests may be forwarded to (assistant/mesh/)."""

    enabled: bool = False
    peers: list[MeshPeer] = Field(default_factory=list)  # none: every request is answered locally
    timeout_secs: float = Field(60.0, gt=0, le=3600)  # a whole forward (connect to last byte); then local
    health_interval_secs: float = Field(15.0, gt=0)  # a peer's health is probed again after this long
    health_timeout_secs: float = Field(10.0, gt=0, le=600)  # one probe (a cold peer loads its model on /ready)
    down_secs: float = Field(30.0, ge=0)  # a peer whose probe or forward failed is skipped this long
    latency_alpha: float = Field(0.3, gt=0, le=1)  # EWMA weight of the newest forward's latency
    max_answer_bytes: int = Field(4 * 1024 * 1024, ge=1024)  # a larger peer answer is a failed forward

    @field_validator("peers")
    @classmethod
    def _unique(cls, peers: list[MeshPeer]) -> list[MeshPeer]:
        names = [p.name for p in peers]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"peer names must be unique (twice: {', '.join(twice)})")
        return peers


class OptimizationSettings(Section):
    enabled: bool = False
    max_iterations: int = Field(50, ge=1)
    # mapped to optuna's TPE sampler (assistant/learning/optimize_study.py): n_startup_trials = ceil(10 w),
    # n_ei_candidates = round(24 / max(w, 0.1)); 1.0 gives optuna's defaults
    exploration_weight: float = Field(1.0, ge=0)
    # beyond the spec (assistant/learning/optimize*.py):
    # the cold-start objective's data set (LoCoMo JSON, e.g. ../shared/benchmarks/locomo/locomo_dev5.json),
    # used while the user has fewer than min_user_cases answers to learn from; None: no cold start
    dataset_path: Path | None = None
    dataset_conversations: int | None = Field(None, ge=1)  # the first N conversations of it (None: all)
    min_user_cases: int = Field(20, ge=1)  # answers whose memories were used or marked useful, or were re-asked
    validation_fraction: float = Field(0.3, gt=0.0, lt=1.0)  # held-out share (by conversation) for the apply rule
    recall_at: int = Field(5, ge=1, le=10)  # k of the objective's recall@k (the spec's default rag_limit)
    quality_weight: float = Field(0.3, ge=0.0, le=1.0)  # a in (1 - a) x recall + a x quality
    seed: int | None = None  # the sampler's seed (None: random)


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
