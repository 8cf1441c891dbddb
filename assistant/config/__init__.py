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
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from assistant.config.base import (
    DEFAULT_DATA_DIR,
    Section,
)
from assistant.config.core import (
    KEY_ROLES,
    AgenticSettings,
    CommandsSettings,
    ConfiguredKey,
    InferenceSettings,
    MemorySettings,
    SecuritySettings,
    ServerSettings,
    ToolCallingSettings,
)
from assistant.config.extended import (
    CognitiveLoadSettings,
    DistillationSettings,
    FederatedSettings,
    HomomorphicSettings,
    KnowledgeVisualizationSettings,
    LoraSettings,
    MeshSettings,
    MessengerSettings,
    OptimizationSettings,
    PqcSettings,
    PrecacheSettings,
    PrivacySettings,
    RedTeamSettings,
    SovereignIntelligenceSettings,
)
from assistant.config.night import (
    DefenceSettings,
    DreamSettings,
    JournalSettings,
    KnowledgeGraphSettings,
    NremSettings,
    RemSettings,
    SanitationSettings,
)
from assistant.config.tools import (
    CalendarSettings,
    CodeExecutionSettings,
    ContactsSettings,
    DavSettings,
    EmailSettings,
    RemindersSettings,
    TasksSettings,
    TransitSettings,
    WeatherSettings,
    WebSearchSettings,
)
from assistant.config.voice import (
    GpioSettings,
    MqttSettings,
    RoomSettings,
    SpeakerIdSettings,
    SttSettings,
    TtsSettings,
    VadSettings,
    VoiceConversationSettings,
    VoiceSettings,
    WakeWordSettings,
    WhisperModeSettings,
)
from assistant.errors import ConfigError

__all__ = [
    "KEY_ROLES",
    "AgenticSettings",
    "CalendarSettings",
    "CodeExecutionSettings",
    "CognitiveLoadSettings",
    "CommandsSettings",
    "ConfiguredKey",
    "ContactsSettings",
    "DEFAULT_DATA_DIR",
    "DavSettings",
    "DreamSettings",
    "EmailSettings",
    "GpioSettings",
    "DistillationSettings",
    "FederatedSettings",
    "HomomorphicSettings",
    "InferenceSettings",
    "JournalSettings",
    "KnowledgeGraphSettings",
    "KnowledgeVisualizationSettings",
    "LoraSettings",
    "MeshSettings",
    "MemorySettings",
    "MessengerSettings",
    "MqttSettings",
    "NremSettings",
    "OptimizationSettings",
    "PqcSettings",
    "PrecacheSettings",
    "PrivacySettings",
    "RedTeamSettings",
    "RemSettings",
    "RemindersSettings",
    "RoomSettings",
    "SanitationSettings",
    "DefenceSettings",
    "Section",
    "SecuritySettings",
    "ServerSettings",
    "Settings",
    "SovereignIntelligenceSettings",
    "SpeakerIdSettings",
    "SttSettings",
    "TasksSettings",
    "ToolCallingSettings",
    "TransitSettings",
    "TtsSettings",
    "VadSettings",
    "VoiceConversationSettings",
    "VoiceSettings",
    "WakeWordSettings",
    "WeatherSettings",
    "WebSearchSettings",
    "WhisperModeSettings",
    "deep_merge",
    "describe_errors",
]


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
    knowledge_graph: KnowledgeGraphSettings = Field(default_factory=KnowledgeGraphSettings)
    sanitation: SanitationSettings = Field(default_factory=SanitationSettings)
    defence: DefenceSettings = Field(default_factory=DefenceSettings)
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
    distillation: DistillationSettings = Field(default_factory=DistillationSettings)  # beyond the spec
    federated: FederatedSettings = Field(default_factory=FederatedSettings)  # beyond the spec
    mesh: MeshSettings = Field(default_factory=MeshSettings)  # beyond the spec

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
        deep_merge(values, overrides)
        try:
            return cls(**values)
        except ValidationError as exc:
            raise ConfigError(describe_errors(exc, source=str(config_file or "settings"))) from None


def deep_merge(into: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``other``'s values merged into ``into`` (nested sections merged key by key, the rest replaced); ``into``."""
    for key, value in other.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            deep_merge(into[key], value)
        else:
            into[key] = value
    return into


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
