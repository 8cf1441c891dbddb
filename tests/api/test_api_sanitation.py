"""The sanitation routes (/v1/sanitation): result records, a dream session's results, the run history,
defence patterns and their deactivation, the quality assessment, a run on demand; owner rules (two
users), the read-only key, X-API-Key, 503 while disabled, bad ids as the envelope.

Real storage (SQLite) and the real SanitationService; the run and the quality assessment are faked
(monkeypatched on the service) where the test is about HTTP, not about what a run finds; one test runs
the real run over the store (a plan whose date has passed is quarantined, the series count it).
"""

from __future__ import annotations

import time
from uuid import uuid4

import pytest

from api.routes.docs import OPENAPI_URL
from assistant.sanitation.types import QualityAssessment, SanitationResult, Trend
from assistant.services import Services

S = "/v1/sanitation"
UNKNOWN = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


def owner(services: Services) -> str:
    return str(services.keys.owner_user_id())


def result(user: str, *, session: str | None = None, cycle: int | None = None, score: float = 0.8,
           status: str = "completed") -> SanitationResult:
    quality = QualityAssessment(score, 0.1, 0.2, 0.1, Trend.STABLE, ["fine"], 10, 3, None,
                                "2026-01-01T00:00:00Z").as_dict()
    return SanitationResult(
        id=str(uuid4()), user_id=user, session_id=session, cycle=cycle, trigger="dream" if session else "manual",
        status=status, started_at="2026-01-01T00:00:00Z", completed_at="2026-01-01T00:00:01Z", duration_ms=12.5,
        counts={"ok": 3, "stale": 1, "poisoned": 1, "contradicted": 0, "judged": 5, "purged": 0},
        quarantined=[{"memory_id": "m1", "verdict": "stale", "reason": "it was about last Tuesday",
                      "by": "temporal", "winner_id": None}],
        graph={"orphan_nodes": 1, "dangling_edges": 0, "unsourced_edges": 0, "issues": 1},
        drift=[{"setting": "sanitation.memory_batch_size", "found": 80, "corrected": 50, "bounds": [5, 50]}],
        quality=quality, rolled_back=status == "rolled_back")


def written_long_ago(services: Services, memory_id: str) -> None:
    """The memory was written on 2024-03-01 (its "tomorrow" is long over)."""
    services.db.execute("UPDATE memories SET created_at = ?, updated_at = ? WHERE id = ?",
                        ("2024-03-01T09:00:00Z", "2024-03-01T09:00:00Z", memory_id))


def dream_session(services: Services, user: str) -> str:
    sid = str(uuid4())
    now = time.time()
    services.db.execute("INSERT INTO dream_sessions (id, user_id, status, total_cycles, created_ts, updated_ts) "
                        "VALUES (?, ?, 'completed', 2, ?, ?)", (sid, user, now, now))
    return sid


@pytest.fixture
def other_auth(services: Services) -> dict[str, str]:
    key, _ = services.keys.create("other", user_id=uuid4())
    return {"Authorization": f"Bearer {key}"}


def other_user(services: Services, headers: dict[str, str]) -> str:
    principal = services.keys.authenticate(headers["Authorization"].split()[1])
    assert principal is not None
    return str(principal.user_id)


def test_latest_is_404_before_the_first_run_then_the_latest_record(client, services, auth) -> None:
    response = client.get(f"{S}/latest", headers=auth)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "NOT_FOUND"
    store = services.sanitation.store
    first, second = result(owner(services), score=0.5), result(owner(services), score=0.9)
    second.started_at = "2026-01-02T00:00:00Z"
    store.save_result(first)
    store.save_result(second)
    body = client.get(f"{S}/latest", headers=auth).json()
    assert body["id"] == second.id
    assert body["quality"]["score"] == 0.9 and body["quality"]["trend"] == "Stable"
    assert body["quarantined"][0]["reason"] == "it was about last Tuesday"
    assert body["drift"][0]["corrected"] == 50
    assert "user_id" not in body


def test_another_users_results_and_sessions_are_404(client, services, auth, other_auth) -> None:
    me, them = owner(services), other_user(services, other_auth)
    mine = dream_session(services, me)
    services.sanitation.store.save_result(result(me, session=mine, cycle=1))
    services.sanitation.store.save_result(result(me, session=mine, cycle=2))
    body = client.get(f"{S}/results/{mine}", headers=auth).json()
    assert [r["cycle"] for r in body["results"]] == [1, 2] and body["total"] == 2
    assert client.get(f"{S}/latest", headers=other_auth).status_code == 404
    for path in (f"{S}/results/{mine}", f"{S}/results/{UNKNOWN}"):
        error = client.get(path, headers=other_auth).json()["error"]
        assert error["code"] == "NOT_FOUND", path
    theirs = dream_session(services, them)
    assert client.get(f"{S}/results/{theirs}", headers=auth).status_code == 404
    assert client.get(f"{S}/results/{theirs}", headers=other_auth).json()["results"] == []
    assert client.get(f"{S}/results", headers=other_auth).json() == {"results": [], "total": 0}


def test_the_history_is_oldest_first_and_bounded(client, services, auth) -> None:
    for day in (3, 1, 2):
        r = result(owner(services), score=day / 10)
        r.started_at = f"2026-01-0{day}T00:00:00Z"
        services.sanitation.store.save_result(r)
    body = client.get(f"{S}/results", headers=auth).json()
    assert [r["quality"]["score"] for r in body["results"]] == [0.1, 0.2, 0.3]
    assert [r["quality"]["score"] for r in client.get(f"{S}/results?limit=2", headers=auth).json()["results"]] \
        == [0.2, 0.3]
    for bad in ("0", "501", "x"):
        response = client.get(f"{S}/results?limit={bad}", headers=auth)
        assert response.status_code == 422, bad
        assert response.json()["error"]["details"]["fields"][0]["field"].endswith("limit")


def test_bad_ids_are_422_and_unknown_ones_404(client, auth) -> None:
    for path, method in ((f"{S}/results/not-a-uuid", "GET"), (f"{S}/defense-patterns/not-a-uuid", "DELETE")):
        response = client.request(method, path, headers=auth)
        assert response.status_code == 422, path
        assert response.json()["error"]["code"] == "VALIDATION_ERROR"
    assert client.delete(f"{S}/defense-patterns/{UNKNOWN}", headers=auth).status_code == 404


def test_patterns_are_listed_and_deactivated_by_their_owner_only(client, services, auth, other_auth,
                                                                 read_only_auth) -> None:
    store = services.sanitation.store
    mine = store.add_pattern(owner(services), r"ignore (all|previous) instructions", source="dev_corpus",
                             family="instruction_override")
    theirs = store.add_pattern(other_user(services, other_auth), r"you are now dan", source="variants")
    assert mine is not None and theirs is not None
    body = client.get(f"{S}/defense-patterns", headers=auth).json()
    assert [p["id"] for p in body["patterns"]] == [mine.id] and body["total"] == 1
    assert body["patterns"][0]["family"] == "instruction_override" and body["patterns"][0]["hits"] == 0
    assert client.get(f"{S}/defense-patterns", headers=read_only_auth).status_code == 200
    # another user's pattern, and a read-only key, change nothing
    assert client.delete(f"{S}/defense-patterns/{theirs.id}", headers=auth).status_code == 404
    refused = client.delete(f"{S}/defense-patterns/{mine.id}", headers=read_only_auth)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "FORBIDDEN"
    assert store.patterns(other_user(services, other_auth))[0].active
    gone = client.delete(f"{S}/defense-patterns/{mine.id}", headers=auth)
    assert gone.status_code == 200, gone.text
    assert gone.json()["active"] is False and gone.json()["deactivated_at"]
    assert client.get(f"{S}/defense-patterns", headers=auth).json()["patterns"] == []
    again = client.delete(f"{S}/defense-patterns/{mine.id}", headers=auth)  # not active any more
    assert again.status_code == 404 and "not found" in again.json()["error"]["message"]


def test_quality_is_the_services_assessment(client, services, auth, monkeypatch) -> None:
    assessment = QualityAssessment(0.72, 0.25, 0.3, 0.2, Trend.DEGRADING, ["users repeat themselves"], 20, 4,
                                   "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", regression=True)
    seen: list[str] = []
    monkeypatch.setattr(services.sanitation, "quality", lambda user: seen.append(user) or assessment)
    body = client.get(f"{S}/quality", headers={"X-API-Key": services.keys.create("x-api-key")[0]}).json()
    assert seen == [owner(services)]
    assert body["score"] == 0.72 and body["trend"] == "Degrading" and body["regression"] is True
    assert body["recommendations"] == ["users repeat themselves"]
    assert {"re_ask_rate", "correction_rate", "abandonment_rate"} <= set(body)


def test_a_part_not_in_this_build_is_503_not_500(client, services, auth, monkeypatch) -> None:
    def missing(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise NotImplementedError("the quality assessment lands with issue 15")

    monkeypatch.setattr(services.sanitation, "quality", missing)
    monkeypatch.setattr(services.sanitation, "run", missing)
    for method, path in (("GET", f"{S}/quality"), ("POST", f"{S}/run")):
        response = client.request(method, path, headers=auth)
        assert response.status_code == 503, path
        assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


def test_run_now_runs_for_the_caller_only_with_a_user_key(client, services, auth, read_only_auth,
                                                          monkeypatch) -> None:
    calls: list[tuple] = []

    def run(user_id, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append((user_id, kw))
        done = result(user_id)
        services.sanitation.store.save_result(done)
        return done

    monkeypatch.setattr(services.sanitation, "run", run)
    assert client.post(f"{S}/run", headers=read_only_auth).status_code == 403
    assert calls == []
    response = client.post(f"{S}/run", headers=auth)
    assert response.status_code == 200, response.text
    assert calls == [(owner(services), {})]
    assert client.get(f"{S}/latest", headers=auth).json()["id"] == response.json()["id"]
    assert client.post(f"{S}/run", json={}, headers=auth).status_code == 200
    bad = client.post(f"{S}/run", json={"user_id": UNKNOWN}, headers=auth)
    assert bad.status_code == 422 and len(calls) == 2


def test_every_route_needs_a_key(client) -> None:
    for method, path in (("GET", f"{S}/latest"), ("GET", f"{S}/results"), ("GET", f"{S}/results/{UNKNOWN}"),
                         ("GET", f"{S}/defense-patterns"), ("DELETE", f"{S}/defense-patterns/{UNKNOWN}"),
                         ("GET", f"{S}/quality"), ("POST", f"{S}/run")):
        response = client.request(method, path)
        assert response.status_code == 401, path
        assert response.json()["error"]["code"] == "UNAUTHORIZED"


def test_disabled_sanitation_is_503_naming_the_key_before_the_parameters(make_settings, make_services,
                                                                         make_client) -> None:
    services = make_services(make_settings(sanitation={"enabled": False}))
    assert services.sanitation is None
    client = make_client(services)
    key, _ = services.keys.create("k")
    for method, path in (("GET", f"{S}/latest"), ("GET", f"{S}/results/not-a-uuid"),
                         ("DELETE", f"{S}/defense-patterns/{UNKNOWN}"), ("GET", f"{S}/quality"),
                         ("GET", f"{S}/results?limit=0"), ("POST", f"{S}/run")):
        response = client.request(method, path, headers={"X-API-Key": key})
        assert response.status_code == 503, path
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "sanitation.enabled" in error["message"]


def test_the_routes_are_documented_with_their_schemas(client) -> None:
    doc = client.get(OPENAPI_URL).json()
    paths = doc["paths"]
    for path, method in ((f"{S}/latest", "get"), (f"{S}/results/{{session_id}}", "get"), (f"{S}/results", "get"),
                         (f"{S}/defense-patterns", "get"), (f"{S}/defense-patterns/{{pattern_id}}", "delete"),
                         (f"{S}/quality", "get"), (f"{S}/run", "post")):
        operation = paths[path][method]
        assert operation["description"] and "Role:" in operation["description"], path
        assert "$ref" in str(operation["responses"]["200"]["content"]), path
        assert "503" in operation["responses"], path
    quality = doc["components"]["schemas"]["QualityOut"]["properties"]
    assert {"score", "trend", "recommendations", "re_ask_rate", "correction_rate", "abandonment_rate"} <= set(quality)


SANITATION_SERIES = {"memories_quarantined": "counter", "contradictions_resolved": "counter",
                     "graph_orphans": "counter", "defense_patterns_added": "counter", "anomalies_detected": "counter",
                     "rollbacks": "counter", "defense_score_x100": "gauge", "quality_score_x100": "gauge"}


def sanitation_samples(client) -> dict[str, tuple[str, float]]:  # noqa: ANN001
    """name -> (type, value) of every assistant_sanitation_ series, by the exact names in the text (the
    parser of prometheus-client renames a counter's sample <name>_total, so the lines are read too)."""
    from prometheus_client.parser import text_string_to_metric_families

    text = client.get("/metrics/prometheus").text
    types = {f.name: f.type for f in text_string_to_metric_families(text) if f.name.startswith("assistant_sanitation_")}
    found = {}
    for line in text.splitlines():
        if line.startswith("assistant_sanitation_"):
            name, value = line.split()
            found[name] = (types[name], float(value))
    return found


def test_the_sanitation_series_have_the_specs_names_at_zero_then_the_counters(client, services) -> None:
    expected = {f"assistant_sanitation_{name}": (kind, 0.0) for name, kind in SANITATION_SERIES.items()}
    assert sanitation_samples(client) == expected
    counters = services.sanitation.counters
    counters.memories_quarantined, counters.rollbacks, counters.quality_score_x100 = 3, 1, 72
    found = sanitation_samples(client)
    assert found["assistant_sanitation_memories_quarantined"] == ("counter", 3.0)
    assert found["assistant_sanitation_rollbacks"] == ("counter", 1.0)
    assert found["assistant_sanitation_quality_score_x100"] == ("gauge", 72.0)
    assert set(client.get("/metrics").json()) == {"uptime_seconds", "http", "inference"}  # the spec's JSON


def test_no_sanitation_series_while_it_is_disabled(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(sanitation={"enabled": False}))
    assert "sanitation" not in make_client(services).get("/metrics/prometheus").text


def test_a_real_run_now_quarantines_a_passed_plan_and_the_series_count_it(client, services, auth) -> None:
    created = client.post("/v1/memories", json={"content": "I have a dentist appointment tomorrow at 10 am.",
                                                "summary": "dentist"}, headers=auth)
    written_long_ago(services, created.json()["id"])
    kept = client.post("/v1/memories", json={"content": "My sister Anna lives in Porto.", "summary": "Anna"},
                       headers=auth)
    assert created.status_code == kept.status_code == 201
    response = client.post(f"{S}/run", headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "completed" and body["trigger"] == "manual" and body["session_id"] is None
    assert [(j["memory_id"], j["verdict"]) for j in body["quarantined"]] == [(created.json()["id"], "stale")]
    listed = client.get("/v1/memories/quarantine", headers=auth).json()
    assert [m["id"] for m in listed["memories"]] == [created.json()["id"]]
    assert sanitation_samples(client)["assistant_sanitation_memories_quarantined"] == ("counter", 1.0)
    assert client.post(f"/v1/memories/{created.json()['id']}/restore", headers=auth).status_code == 200
