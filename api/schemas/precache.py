"""Response bodies of the precache routes (``/api/v1/precache``): shapes of
:meth:`assistant.extended.precache.Precache.status`."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PrecachedTool(BaseModel):
    tool: str = Field(description="A read-only tool whose result was precomputed (`get_weather`, `search_web`).")
    fresh_until: str | None = Field(description="When the result stops being served (UTC), null if it is gone.")
    fresh: bool = Field(description="Served now in place of the call.")
    hits: int = Field(ge=0, description="Calls it answered.")


class PredictedQuery(BaseModel):
    id: str = Field(description="A keyed digest of the query's canonical form (stable across refreshes).")
    query: str = Field(description="The caller's own latest wording of the query.")
    probability: float = Field(ge=0.0, le=1.0, description="The estimated probability that it is asked in `slot`: "
                               "days it was asked in that hour / max(active days, 7) for the hour of day; the same "
                               "over the days of that weekday, with at least 4, for the hour of the week.")
    slot: str = Field(description="The slot, local time (`tool_calling.timezone`): `08:00-09:00 daily` or "
                                  "`Mon 08:00-09:00`.")
    slot_kind: str = Field(description="`hour_of_day` or `hour_of_week`.",
                           json_schema_extra={"enum": ["hour_of_day", "hour_of_week"]})
    days_asked: int = Field(ge=0, description="Days on which it was asked in the slot.")
    active_days: int = Field(ge=0, description="The caller's active days the estimate is over.")
    last_asked_at: str = Field(description="When the caller last asked it (local time).")
    cached: bool = Field(description="Its retrieval was precomputed by the last refresh.")
    fresh: bool = Field(description="Served from the precache now (within the check interval, no memory changed "
                                    "since, or recomputed since).")
    stale: bool = Field(description="A memory of the caller changed after the refresh; being recomputed.")
    computed_at: str | None = Field(description="When it was precomputed (UTC).")
    fresh_until: str | None = Field(description="When it stops being served (UTC): one check interval after.")
    retrieval_ms: float | None = Field(description="How long the memory retrieval took when precomputed (what a hit "
                                                   "does not spend again).")
    memories: int = Field(ge=0, description="Memories the precomputed retrieval holds.")
    hits: int = Field(ge=0, description="Chat messages this entry answered.")
    tools: list[PrecachedTool] = Field(description="Its precomputed tool results.")


class ThermalOut(BaseModel):
    status: str = Field(description="`ok`, `paused` (above `thermal_pause_celsius`: refreshes are skipped) or "
                                    "`no sensor` (nothing pauses).",
                        json_schema_extra={"enum": ["ok", "paused", "no sensor"]})
    temperature_celsius: float | None = Field(description="The hottest CPU sensor now, null without one.")
    sensor: str | None = Field(description="Its kind, e.g. `x86_pkg_temp`, `cpu-thermal`, `k10temp`.")
    threshold_celsius: float = Field(description="`precache_prediction.thermal_pause_celsius`.")


class PrecacheSettingsOut(BaseModel):
    min_probability: float
    check_interval_minutes: int
    max_precached_queries: int = Field(description="Across all users, highest probability first.")
    thermal_pause_celsius: float


class RefreshOut(BaseModel):
    at: str = Field(description="When it ran (UTC).")
    status: str = Field(description="`ran`, or `paused` (too hot: nothing was computed).",
                        json_schema_extra={"enum": ["ran", "paused"]})
    thermal: str = Field(description="`ok`, `paused` or `no sensor`.")
    temperature_celsius: float | None
    sensor: str | None
    predicted: int = Field(ge=0, description="Predicted queries it covered (the caller's only, on demand).")
    cached: int = Field(ge=0, description="Of those, precomputed.")
    tool_results: int = Field(ge=0, description="Tool results precomputed.")
    failures: int = Field(ge=0, description="Retrievals or tool calls that failed (the others are kept).")
    duration_ms: float = Field(ge=0.0)


class PrecacheStatusOut(BaseModel):
    enabled: bool
    paused: bool = Field(description="The CPU is above `thermal_pause_celsius` now: a refresh would be skipped.")
    thermal: ThermalOut
    settings: PrecacheSettingsOut
    last_refresh: RefreshOut | None = Field(description="The latest refresh covering the caller (the scheduled "
                                                        "one or the caller's own), null before the first.")
    next_refresh_at: str | None = Field(description="When the scheduled refresh runs next (null when the server's "
                                                    "background jobs are not running).")
    predictions: list[PredictedQuery] = Field(description="The caller's predicted queries of the latest refresh, "
                                                          "highest probability first.")
    cached: int = Field(ge=0, description="The caller's entries served now.")
    hits: int = Field(ge=0, description="The caller's chat messages answered from the precache.")
    misses: int = Field(ge=0, description="The caller's chat messages that were not.")
    lookups: int = Field(ge=0)
    hit_rate: float = Field(ge=0.0, le=1.0, description="hits / lookups (0 without lookups).")
    time_saved_ms: float = Field(description="retrieval_ms_saved − lookup_ms + tool_time_saved_ms, measured.")
    retrieval_ms_saved: float = Field(description="On the hits: the retrieval time the refresh spent.")
    lookup_ms: float = Field(description="On the hits: the time the lookups took.")
    tool_hits: int = Field(ge=0, description="Tool calls answered from the precache.")
    tool_time_saved_ms: float = Field(description="Their real calls' time minus the lookups'.")
    history: list[dict] = Field(description="The caller's predicted queries over time (m026): `query`, "
                                            "`probability`, `slot`, `times_predicted`, `hits`, `saved_ms`, ...")
