"""The immune status over real services (scripted model, real SQLite, the shipped detector): the defence's
layers and pattern counts per caller, red team disabled or its latest run, the latest sanitation run,
quarantine counts, anomalies, restarts and the gauges; another user's data never counted."""

from __future__ import annotations

from uuid import uuid4

from assistant.extended.immune import ImmuneView
from assistant.services import Services


def test_with_the_red_team_disabled(services: Services) -> None:
    assert services.red_team is None and isinstance(services.immune, ImmuneView)
    user = str(services.keys.owner_user_id())
    status = services.immune.status(user)
    assert status["red_team"] == {"status": "disabled", "reason": "red_team.enabled = false"}
    assert status["sanitation"] == {"status": "never_run", "latest": None}
    layers = {layer["name"]: layer for layer in status["defence"]["layers"]}
    assert list(layers) == ["normalisation", "static", "dynamic", "classifier", "judge"]
    assert status["defence"]["enabled"] and layers["normalisation"]["active"]
    assert layers["static"]["active"] and layers["static"]["patterns"] >= 20
    assert layers["dynamic"] == {"name": "dynamic", "active": True, "patterns": 0, "deactivated": 0, "hits": 0,
                                 "by_source": {}, "by_family": {}}
    assert layers["classifier"]["present"] and layers["classifier"]["variant"] == "ngram"  # the hashing embedder
    assert layers["judge"]["active"] is False
    assert status["restarts"]["engine"] == {"attempts": 0, "max_attempts": 4, "last_error": None, "degraded": False,
                                            "degraded_reason": None}
    assert status["gauges"]["defense_score_x100"] == 0 and status["gauges"]["sanitation"]["rollbacks"] == 0
    assert status["quarantine"] == {"quarantined": 0, "purged": 0, "last_purged_at": None}
    assert status["anomalies"] == {"detected": 0, "recent": []}


def test_the_callers_patterns_quarantine_and_runs_only(make_settings, make_services, model) -> None:  # noqa: ANN001
    services = make_services(make_settings(red_team={"enabled": True}), model)
    user, other = str(services.keys.owner_user_id()), str(uuid4())
    store = services.sanitation.store
    first = store.add_pattern(user, r"\bsecret\w{0,5}\b[^\n]{0,40}\bcode\w{0,5}\b", source="red_team", family="role_play")
    store.add_pattern(user, r"\bverbatim\b[^\n]{0,40}\bsetup\b", source="variants", family="prompt_leaking")
    store.add_pattern(other, r"\bnot\b[^\n]{0,40}\bmine\b", source="red_team", family="x")
    store.deactivate(user, first.id)
    memory = services.memory.add(user, "The meeting is tomorrow at 3.")
    services.memory.quarantine(user, memory.id, "stale")
    services.memory.quarantine(other, services.memory.add(other, "other's").id, "stale")
    services.supervisor.restart("engine")
    report = services.red_team.run(user, 6, seed=3, chat=False)
    services.red_team.run(other, 6, seed=4, chat=False)
    result = services.sanitation.run(user)
    services.signals.publish("Anomaly", {"kind": "latency_spike", "component": "engine", "severity": "warning"},
                             value=900.0)

    status = services.immune.status(user)
    dynamic = next(layer for layer in status["defence"]["layers"] if layer["name"] == "dynamic")
    added = len(result.patterns_added)
    assert (dynamic["patterns"], dynamic["deactivated"]) == (1 + added, 1)
    assert dynamic["by_source"].get("variants") == 1
    assert status["quarantine"]["quarantined"] == 1
    red = status["red_team"]
    assert red["status"] == "idle" and red["latest"]["run_id"] == report.id and red["running"] is None
    assert red["latest"]["defense_score"] == report.defense_score and len(red["latest"]["families"]) == 6
    san = status["sanitation"]["latest"]
    assert san["id"] == result.id and san["patterns_added"] == added and san["quality_score"] is not None
    assert status["restarts"]["engine"]["attempts"] == 1
    assert [a["kind"] for a in status["anomalies"]["recent"]] == ["latency_spike"]
    assert status["gauges"]["defense_score_x100"] == services.sanitation.counters.defense_score_x100
    assert other not in str(status) and "not\\b" not in str(status)


def test_off_while_sovereign_intelligence_is_off(make_settings, make_services, model) -> None:  # noqa: ANN001
    services = make_services(make_settings(sovereign_intelligence={"enabled": False}), model)
    assert services.immune is None
