"""Dream mode and sanitation sections."""

from __future__ import annotations

from pydantic import Field, field_validator

from assistant.config.base import Section


class KnowledgeGraphSettings(Section):
    """The knowledge graph (assistant/graph/): entities and facts extracted from memories."""

    enabled: bool = True
    # "auto": the configured engine ("llm") when it is a server of its own (ollama, openai), else "rules"
    # (the embedded 0.5B model extracted 0.016 passages/s here, holding the engine chat needs);
    # "rules" never calls a model (yake keyphrases, capitalised spans, speakers, dates).
    extractor: str = "auto"
    # A mention joins a node whose embedding has at least this cosine (after exact name/alias matches).
    resolution_threshold: float = Field(0.88, ge=0.0, le=1.0)
    batch_size: int = Field(8, ge=1, le=256)  # memories per extraction call
    llm_max_tokens: int = Field(384, ge=32, le=4096)  # per passage (a call: x batch, capped by the context)
    # Relations with one value at a time: a new object for the same subject invalidates the old edge.
    functional_relations: list[str] = Field(default_factory=lambda: [
        "lives_in", "works_at", "works_as", "job", "married_to", "partner_of", "age", "born_in", "birthday",
        "name", "favourite", "studies_at", "owns_car",
    ])  # and every favourite_<what> (favourite_colour, ...)
    # Stability stops growing here (days): a name mentioned in 100 memories would otherwise reach
    # 1.5^100 days (and overflow after ~1,750 recalls). 3,650: R stays above 0.9 for a year.
    max_stability_days: float = Field(3650.0, gt=0.0)
    max_hops: int = Field(2, ge=1, le=3)  # graph-aware retrieval: hops from the query's entities
    event_retention: int = Field(10_000, ge=100, le=1_000_000)  # stored events per user (SSE resume)
    sweep_interval_minutes: int = Field(60, ge=1, le=1440)  # NodeDecayed sweep


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
    # Not in the spec's table: a hypothesis needs this confidence (evidence raises it) before the user
    # can confirm it; it starts at >= hypothesis_confidence_threshold (0.3) and passes 0.6 with about
    # two supporting memories (0.3 -> 0.475 -> 0.606, assistant/dream/rem.py EVIDENCE_GAIN).
    confirmation_threshold: float = Field(0.6, ge=0.0, le=1.0)


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
        fields = value.split()
        if len(fields) != 6:
            raise ValueError(f"must be a 6-field cron expression (sec min hour day month weekday), got "
                             f"{len(fields)} field(s) in {value!r}")
        from apscheduler.triggers.cron import CronTrigger  # the scheduler that will run it checks the values

        second, minute, hour, day, month, weekday = fields
        try:
            CronTrigger(second=second, minute=minute, hour=hour, day=day, month=month, day_of_week=weekday)
        except ValueError as exc:
            raise ValueError(f"not a valid cron expression {value!r}: {exc}") from None
        return value


class SanitationSettings(Section):
    enabled: bool = True
    # Refused outside these bounds when loaded or assigned; a value that drifted past them anyway (a
    # settings object built without validation, model_copy(update=...), an old pickled config) is
    # clamped back by each sanitation run and the correction logged (event bus and result record).
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
    # A drop of the quality score by at least this much from the previous run is a QualityRegression.
    quality_regression_threshold: float = Field(0.1, ge=0.0, le=1.0)


class DefenceSettings(Section):
    """The prompt-injection defence (assistant/defence/): layers over normalised text."""

    enabled: bool = True
    # Flag when the combined suspicion reaches this (0..1). The classifier's probability counts as
    # suspicion; a static or dynamic pattern, or hidden encoded instructions, count as 1.
    threshold: float = Field(0.5, ge=0.0, le=1.0)
    classifier: bool = True  # the small trained model (weights shipped in the package)
    # Ask the configured engine (JSON verdict) when the classifier lands in [judge_low, judge_high).
    judge: bool = False
    judge_low: float = Field(0.35, ge=0.0, le=1.0)
    judge_high: float = Field(0.65, ge=0.0, le=1.0)
    # Indirect content (tool results, memories, mail, web pages): replace the detected spans with a
    # marker before the text reaches the model (the text is always wrapped as data).
    neutralise: bool = True
