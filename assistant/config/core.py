"""Sections: server, security, inference, memory, tool calling, commands and agentic mode."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Literal, get_args
from uuid import UUID

from pydantic import Field, ValidationError, field_validator

from assistant.config.base import DEFAULT_DATA_DIR, Section


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    data_dir: Path = DEFAULT_DATA_DIR
    environment: str = "development"
    openapi_enabled: bool = True
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    max_body_bytes: int = Field(1_048_576, ge=1024, le=104_857_600)
    # /ready/all: probe results are reused for this long (for every client); each client IP may
    # call it this many times per minute (its own limit, apart from security.rate_limit_rpm), 429 beyond.
    readiness_cache_secs: float = Field(5.0, ge=0, le=3600)
    readiness_rpm: int = Field(60, ge=1, le=1_000_000)
    # circuit breakers (assistant/breaker.py): open after this many consecutive failures of a
    # backend, try again (half-open) after the cool-down.
    circuit_failure_threshold: int = Field(5, ge=1, le=1000)
    circuit_reset_secs: float = Field(30.0, gt=0, le=3600)

    @property
    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser()


KeyRole = Literal["admin", "user", "read-only"]
KEY_ROLES: tuple[str, ...] = get_args(KeyRole)


class ConfiguredKey(Section):
    """An API key of the config file: its user and role."""

    user_id: UUID
    role: KeyRole = "user"


class SecuritySettings(Section):
    # key (or "sha256:<hex>" of a key) -> its user: `"<key>" = "<user uuid>"` (role user), or
    # `"<key>" = { user_id = "<user uuid>", role = "admin" }`. Only hashes are kept in memory and on disk.
    api_keys: dict[str, ConfiguredKey] = Field(default_factory=dict)
    rate_limit_enabled: bool = True
    rate_limit_rpm: int = Field(120, ge=1, le=1_000_000)
    # Reverse proxies (IP addresses or CIDR networks) whose X-Forwarded-For / X-Forwarded-Proto the
    # server believes. Empty (the default): proxy headers are ignored, the client IP (for the rate
    # limit) is the TCP peer's, so a client cannot pick its own IP with a header.
    trusted_proxies: list[str] = Field(default_factory=list, max_length=100)

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for item in value:
            try:
                ipaddress.ip_network(item.strip(), strict=False)
            except ValueError:
                raise ValueError(f"{item!r} is not an IP address or CIDR network (e.g. 10.0.0.0/8)") from None
        return [item.strip() for item in value]

    @field_validator("api_keys", mode="before")
    @classmethod
    def _key_forms(cls, value: Any) -> Any:
        """Both forms to :class:`ConfiguredKey`, with errors that name the key by its first
        characters only (the file's keys are secrets: a start-up error must not print one)."""
        if not isinstance(value, dict):
            return value
        keys = {}
        for key, entry in value.items():
            shown = f"{str(key)[:6]}…" if len(str(key)) > 6 else str(key)
            if isinstance(entry, str | UUID):
                entry = {"user_id": entry}
            if isinstance(entry, ConfiguredKey):
                keys[key] = entry
                continue
            if not isinstance(entry, dict):
                raise ValueError(f"the key {shown!r} must map to a user id or to {{ user_id = \"…\", role = \"…\" }}")
            role = entry.get("role", "user")
            if role not in KEY_ROLES:
                raise ValueError(f"the key {shown!r} has role {role!r}: the role must be one of {', '.join(KEY_ROLES)}")
            try:
                keys[key] = ConfiguredKey.model_validate(entry)
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise ValueError(f"the key {shown!r}: {problems}") from None
        return keys


class InferenceSettings(Section):
    backend: str = "llama-cpp"
    model: str = "qwen2.5-coder-0.5b-instruct"
    model_path: Path | None = None  # a GGUF outside the data directory (llama-cpp only)
    base_url: str | None = None  # ollama / openai backends
    api_key: str | None = None  # openai backend
    # Engine sizes (assistant/llm/machine.py): unset = chosen from the machine: threads = physical
    # cores this process may use, batch_threads = threads, batch sizes from memory (512 from 8 GiB).
    threads: int | None = Field(None, ge=1, le=256)
    batch_threads: int | None = Field(None, ge=1, le=256)
    batch_size: int | None = Field(None, ge=8, le=131_072)
    ubatch_size: int | None = Field(None, ge=8, le=131_072)
    # llama.cpp CPU variant (assistant/llm/cpu_backend.py): "auto" picks the best this CPU runs and
    # self-tests it in a subprocess (falling back to the portable "haswell"); a name forces one.
    cpu_variant: str = "auto"
    context_length: int = Field(4096, ge=256, le=131_072)
    max_tokens: int = Field(512, ge=1, le=131_072)
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    system_prompt: str = "You are a helpful, concise personal assistant running locally."
    request_timeout_secs: float = Field(120.0, gt=0, le=3600)
    queue_timeout_secs: float = Field(300.0, gt=0, le=3600)
    health_cache_secs: float = Field(5.0, ge=0, le=3600)
    prompt_cache_mb: int = Field(256, ge=0, le=65_536)
    history_messages: int = Field(20, ge=0, le=1000)

    @field_validator("cpu_variant")
    @classmethod
    def _known_variant(cls, value: str) -> str:
        from assistant.llm.cpu_variants import VARIANTS

        if value != "auto" and value not in VARIANTS:
            raise ValueError(f"must be 'auto' or a llama.cpp CPU variant: {', '.join(VARIANTS)}")
        return value


# --- memory, tools, agents -----------------------------------------------------------------------


class MemorySettings(Section):
    enabled: bool = True
    enable_rag: bool = True
    enable_learning: bool = True
    rag_limit: int = Field(5, ge=1, le=100)
    rag_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # What rag_threshold is compared with (assistant/memory/scoring.py RAG_SEARCH_MODE): "fused",
    # the hybrid score 0.6 x cosine + 0.4 x BM25 (the default: MiniLM puts a question and its answer
    # at cosine 0.4-0.45), or "cosine", the dense similarity alone (the spec's reading).
    rag_threshold_mode: Literal["fused", "cosine"] = "fused"
    merge_threshold: float = Field(0.85, ge=0.0, le=1.0)
    min_importance: float = Field(0.1, ge=0.0, le=1.0)
    # A memory at or below min_importance for this many days is archived by the decay run
    # (assistant/memory/decay.py explains why archive, and why not "strictly below").
    cleanup_after_days: float = Field(30, gt=0, le=3650)
    decay_factor: float = Field(0.95, gt=0.0, le=1.0)
    enable_encryption: bool = True
    encryption_key_path: Path = Path("memory.key")  # relative paths live in the data directory
    embedding_backend: str = "sentence-transformers"
    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_dimension: int = Field(384, ge=1, le=8192)
    # torch threads of the sentence-transformers embedder (torch's setting is process-wide). One:
    # measured on the 2 shared cores under load, one short text took 37 ms with 1 thread and 467 ms
    # with 2 (OpenMP threads spin against the server's own threads); concurrent calls are batched.
    embedding_threads: int = Field(1, ge=1, le=256)
    embedding_timeout_ms: int = Field(30_000, ge=1)
    # "hybrid+graph" (default): the hybrid hits are expanded and re-ranked through the query's entities
    # in the knowledge graph (assistant/graph/retrieval.py; plain hybrid while [knowledge_graph] is off).
    # LoCoMo R@5 held out (tuned on 3 conversations, measured on 2, 10 splits): .668 -> .700, multi-hop
    # .318 -> .370, at ~27 ms a query instead of ~8 (benchmarks/locomo_recall.py --cv).
    retrieval: Literal["hybrid", "hybrid+graph"] = "hybrid+graph"
    ebbinghaus_base_stability: float = Field(1.0, gt=0.0)
    recall_bonus: float = Field(1.5, ge=0.0)


class ToolCallingSettings(Section):
    enabled: bool = True
    max_iterations: int = Field(5, ge=1, le=100)
    iteration_timeout_secs: float = Field(30, gt=0, le=3600)
    total_timeout_secs: float = Field(120, gt=0, le=86_400)
    parallel_tool_execution: bool = True
    require_approval_for: list[str] = Field(default_factory=list)
    # Which tools a chat message that names none (no enabled_tools) is offered: "all" every
    # registered tool (the spec: omitted enabled_tools means all), "auto" only the tools the
    # message is about, at most max_offered_tools (none: the plain chat flow; see
    # assistant/tools/selection.py).
    selection: Literal["all", "auto"] = "all"
    selection_threshold: float = Field(0.30, ge=0.0, le=1.0)
    max_offered_tools: int = Field(5, ge=1, le=100)
    # Issue 20, calls that land (each switch is one row of benchmarks/tool_calling.py):
    # "constrained": the reply is decoded as either an answer or a call valid against the offered
    # tools' schemas; the call/answer decision is the engine's probability that the reply opens a
    # call, compared with call_threshold. "free": the model writes what it likes, a call it starts
    # is finished under the grammar (the behaviour before).
    decoding: Literal["constrained", "free"] = "constrained"
    call_threshold: float = Field(0.5, ge=0.0, le=1.0)
    # The current date and time (in `timezone`) are in the prompt, and relative dates and times in
    # date/time-typed arguments are resolved by assistant/commands/when.py, not by the model.
    ground_dates: bool = True
    timezone: str = "UTC"  # IANA zone of "now" for the prompt and for resolving "tomorrow at 3"
    # A call needing a value another tool produces (a token, an id) that no earlier result holds is
    # not run; the producing tool is called first (assistant/chat/prerequisites.py).
    prerequisites: bool = True
    # Free-text arguments keep the user's own words (padding the model added is dropped); enum and
    # format checks against the schema, and one repair round for a call that fails them.
    argument_hygiene: bool = True
    repair_rounds: int = Field(1, ge=0, le=3)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r} (for example Europe/Berlin or UTC)") from None
        return value


class CommandsSettings(Section):
    """The shell-command catalog: how an execution is bounded. On Linux every command runs in the
    bubblewrap sandbox (assistant/tools/shell_sandbox.py) under these limits; on Windows commands
    run unsandboxed and only the wall clock and output cap apply."""

    execution_timeout_secs: float = Field(30, gt=0, le=3600)  # wall clock
    max_output_bytes: int = Field(65_536, ge=256, le=10_485_760)  # per stream; the rest is dropped
    cpu_time_secs: float = Field(10, gt=0, le=3600)  # RLIMIT_CPU of the command's processes
    memory_mb: int = Field(512, ge=32, le=65_536)  # RLIMIT_AS per process; also the /work tmpfs size
    max_processes: int = Field(64, ge=4, le=4096)  # RLIMIT_NPROC of the sandbox's user
    # more paths the sandbox must hide (the data directory, the key file, the home directory, the
    # file given to `serve --config` and /etc/assistant always are)
    hidden_paths: list[Path] = Field(default_factory=list)
    seed_defaults: bool = True  # create the default entries on first start
    default_location: str | None = None  # the weather/briefing place when args.location is omitted
    # POST /v1/commands/parse: the longest the model may take when no quick pattern matched (then 503).
    parse_timeout_secs: float = Field(60, gt=0, le=600)


class AgenticSettings(Section):
    enabled: bool = True
    max_concurrent_sub_agents: int = Field(3, ge=1, le=64)
    max_sub_agents_per_task: int = Field(5, ge=1, le=64)
    total_timeout_minutes: float = Field(10, gt=0, le=1440)
    sub_agent_timeout_minutes: float = Field(5, gt=0, le=1440)
