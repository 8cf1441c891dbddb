"""The signal bus: ten kinds, a ring of `signal_bus_capacity`, a DuckDB time series with `signal_retention_days`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from assistant.config import Settings
from assistant.observability.bridges import dream_signal, sanitation_signal
from assistant.observability.signals import SignalBus, SignalKind
from assistant.storage.analytics import Analytics


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_ten_kinds_with_the_two_the_spec_names() -> None:
    assert len(SignalKind) == 10
    assert {"ThermalUpdate", "CognitiveLoadEstimate"} <= {k.value for k in SignalKind}


def test_defaults_are_the_specs() -> None:
    section = Settings().sovereign_intelligence
    assert (section.signal_bus_capacity, section.signal_retention_days) == (1024, 90)


def test_memory_is_bounded_at_capacity_and_the_table_keeps_everything(tmp_path) -> None:
    analytics = Analytics(tmp_path / "a.duckdb")
    bus = SignalBus(analytics, capacity=1024)
    for i in range(1030):
        bus.publish(SignalKind.THERMAL_UPDATE, {"i": i}, value=float(i))
    assert len(bus.recent()) == 1024 and bus.recent()[0].data == {"i": 6}
    assert len(bus.query(limit=10_000)) == 1030
    analytics.close()
    reopened = Analytics(tmp_path / "a.duckdb")
    assert SignalBus(reopened).query(SignalKind.THERMAL_UPDATE, limit=5)[-1].value == 1029.0
    reopened.close()


def test_retention_deletes_what_is_older_than_90_days(tmp_path) -> None:
    clock = Clock()
    analytics = Analytics(tmp_path / "a.duckdb")
    bus = SignalBus(analytics, retention_days=90, clock=clock)
    bus.publish(SignalKind.QUALITY_SCORE, user_id="u", value=0.9)
    clock.now += timedelta(days=89)
    bus.publish(SignalKind.QUALITY_SCORE, user_id="u", value=0.8)  # day 89: both kept
    assert [s.value for s in bus.query()] == [0.9, 0.8]
    clock.now += timedelta(days=1, seconds=1)  # the first is now 90 days and a second old
    bus.publish(SignalKind.QUALITY_SCORE, user_id="u", value=0.7)
    assert [s.value for s in bus.query()] == [0.8, 0.7]
    analytics.close()


def test_query_by_kind_since_and_user(tmp_path) -> None:
    clock = Clock()
    analytics = Analytics(tmp_path / "a.duckdb")
    bus = SignalBus(analytics, clock=clock)
    bus.publish(SignalKind.THERMAL_UPDATE, value=40)
    bus.publish(SignalKind.PRIVACY_SPEND, user_id="a", value=0.1)
    clock.now += timedelta(hours=1)
    bus.publish(SignalKind.PRIVACY_SPEND, user_id="b", value=0.2)
    assert [s.value for s in bus.query(user_id="a")] == [40, 0.1]
    assert [s.value for s in bus.query(user_id="a", include_server=False)] == [0.1]
    assert [s.value for s in bus.query(SignalKind.PRIVACY_SPEND, since=clock.now)] == [0.2]
    with pytest.raises(ValueError):
        bus.query("NotAKind")
    frame = bus.frame(SignalKind.PRIVACY_SPEND)
    assert list(frame["value"]) == [0.1, 0.2] and str(frame["ts"].dt.tz) == "UTC"
    analytics.close()


def test_publishing_never_raises_and_subscribers_hear_it(tmp_path) -> None:
    analytics = Analytics(tmp_path / "a.duckdb")
    bus = SignalBus(analytics)
    heard = []
    unsubscribe = bus.subscribe(heard.append)
    bus.subscribe(lambda s: 1 / 0)  # a failing listener is logged, not raised
    analytics.close()  # a write that fails keeps the signal in memory
    signal = bus.publish(SignalKind.ANOMALY, {"kind": "latency_spike"}, value=3.0)
    assert heard == [signal] and bus.dropped_writes == 1 and bus.recent() == [signal]
    unsubscribe()
    bus.publish(SignalKind.ANOMALY)
    assert len(heard) == 1


def test_memory_only_bus_answers_queries() -> None:
    bus = SignalBus(capacity=2)
    for v in (1, 2, 3):
        bus.publish(SignalKind.DREAM_PHASE, user_id="u", value=v)
    assert [s.value for s in bus.query(user_id="u")] == [2, 3]


def test_bridges_map_sanitation_and_dream_events() -> None:
    bus = SignalBus()
    quality = {"score": 0.84, "trend": "Stable", "re_ask_rate": 0.1, "correction_rate": 0.2, "abandonment_rate": 0.0,
               "messages": 12}
    sanitation_signal(bus, SimpleNamespace(kind="run_finished", user_id="u", data={"id": "r1", "quality": quality}))
    sanitation_signal(bus, SimpleNamespace(kind="run_finished", user_id="u", data={"id": "r2", "quality": None}))
    sanitation_signal(bus, SimpleNamespace(kind="anomaly", user_id="u", data={"anomaly": {
        "kind": "latency_spike", "component": "engine", "value": 2400.0}}))
    phase = SimpleNamespace(value="nrem")
    dream_signal(bus, SimpleNamespace(kind="phase_started", session_id="s", user_id="u", cycle=2, phase=phase))
    dream_signal(bus, SimpleNamespace(kind="operation", session_id="s", user_id="u", cycle=2, phase=phase))
    got = [(s.kind.value, s.user_id, s.value) for s in bus.recent()]
    assert got == [("QualityScore", "u", 0.84), ("Anomaly", None, 2400.0), ("DreamPhase", "u", 2.0)]
