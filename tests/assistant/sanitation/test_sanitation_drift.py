"""Config drift: values past the bounds (possible only without validation) are clamped, the run
uses the clamped values, and the live settings are corrected after commit with an event each."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from assistant.config import SanitationSettings
from assistant.sanitation import drift
from assistant.sanitation.service import SanitationEvent
from tests.assistant.sanitation.run_fakes import USER, make_world


def test_the_bounds_are_those_of_the_settings() -> None:
    for name, low, high in drift.BOUNDS:
        SanitationSettings(**{name: low})
        SanitationSettings(**{name: high})
        for bad in (low - 1, high + 1):
            with pytest.raises(ValidationError):
                SanitationSettings(**{name: bad})


def test_values_in_bounds_are_no_drift_and_values_past_them_are_clamped() -> None:
    assert drift.plan(SanitationSettings()) == []
    settings = SanitationSettings.model_construct(quarantine_ttl_days=365, memory_batch_size=0)
    found = drift.plan(settings)
    assert [(c.setting, c.found, c.corrected, c.bounds) for c in found] == [
        ("sanitation.quarantine_ttl_days", 365, 30, (1, 30)), ("sanitation.memory_batch_size", 0, 5, (5, 50))]
    assert drift.effective(settings, found) == {"quarantine_ttl_days": 30, "memory_batch_size": 5}
    object.__setattr__(settings, "memory_batch_size", "many")
    assert drift.plan(settings)[1].corrected == 5
    drift.apply(settings, drift.plan(settings))
    assert (settings.quarantine_ttl_days, settings.memory_batch_size) == (30, 5)


def test_a_run_corrects_the_live_settings_and_logs_each_correction(tmp_path: Path, monkeypatch) -> None:
    world = make_world(tmp_path, monkeypatch)
    settings = world.service.deps.settings
    object.__setattr__(settings, "quarantine_ttl_days", 0)
    object.__setattr__(settings, "memory_batch_size", 1000)
    events: list[SanitationEvent] = []
    world.service.subscribe(events.append)
    world.add("Anna met Tom in Paris")
    result = world.service.run(USER)
    assert [d["setting"] for d in result.drift] == ["sanitation.quarantine_ttl_days", "sanitation.memory_batch_size"]
    assert result.drift[0] == {"setting": "sanitation.quarantine_ttl_days", "found": 0, "corrected": 1,
                               "bounds": [1, 30]}
    assert (settings.quarantine_ttl_days, settings.memory_batch_size) == (1, 50)
    corrected = [e for e in events if e.kind == "config_corrected"]
    assert [e.data["corrected"] for e in corrected] == [1, 50]
    assert world.service.store.latest(USER).drift == result.drift
    assert world.service.run(USER).drift == []
