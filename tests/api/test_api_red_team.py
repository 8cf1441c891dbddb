"""The red-team routes (/api/red-team) and the immune status (/api/v1/immune/status) over HTTP: 503 naming the
key while disabled (before the body), 404 before the first report, a run started (202) and followed to its
report, the spec's report fields, 409 for a second run, 422 for a run beyond the configured maximum, roles
(read-only reads, cannot run), another user's run 404, and the immune view with the red team off and on.

Real storage and the real RedTeam service; the model is the scripted fake, the detector the shipped one
(n-gram classifier: the hashing embedder) except where a test blocks it to hold a run open."""

from __future__ import annotations

import threading
import time
from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from assistant.defence.types import Source, Verdict
from assistant.services import Services

R = "/api/red-team"
IMMUNE = "/api/v1/immune/status"


@pytest.fixture
def team(make_settings, make_services, make_client, model):  # noqa: ANN001, ANN201
    services = make_services(make_settings(red_team={"enabled": True, "max_attacks_per_run": 12}), model)
    key, _ = services.keys.create("owner")
    reader, _ = services.keys.create("reader", user_id=services.keys.owner_user_id(), role="read-only")
    other, _ = services.keys.create("other", user_id=uuid4())
    auth = {name: {"Authorization": f"Bearer {k}"} for name, k in (("a", key), ("reader", reader), ("b", other))}
    return make_client(services), services, auth


def finished(client: TestClient, run_id: str, headers: dict[str, str]) -> dict:
    deadline = time.monotonic() + 60  # a bound against hangs, not a timing assertion
    while True:
        body = client.get(f"{R}/runs/{run_id}", headers=headers).json()
        if body["status"] != "running" or time.monotonic() > deadline:
            return body
        time.sleep(0.02)


def test_disabled_is_503_naming_the_key_before_the_body(client: TestClient, auth: dict[str, str]) -> None:
    for method, path, body in (("GET", f"{R}/report", None), ("POST", f"{R}/run", {"max_attacks": "lots"}),
                               ("GET", f"{R}/runs/not-a-uuid", None)):
        response = client.request(method, path, json=body, headers=auth)
        assert response.status_code == 503, (path, response.text)
        error = response.json()["error"]
        assert error["code"] == "SERVICE_UNAVAILABLE" and "red_team.enabled" in error["message"]


def test_a_run_from_start_to_report(team) -> None:  # noqa: ANN001
    client, services, auth = team
    missing = client.get(f"{R}/report", headers=auth["a"])
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    started = client.post(f"{R}/run", json={"max_attacks": 6, "seed": 9}, headers=auth["a"])
    assert started.status_code == 202, started.text
    body = started.json()
    assert body["status"] == "running" and body["total"] == 6 and body["report"] is None
    done = finished(client, body["run_id"], auth["a"])
    assert done["status"] == "completed" and done["done"] == 6
    report = client.get(f"{R}/report", headers=auth["reader"]).json()  # a read-only key reads it
    assert {"defense_score", "attacks_tested", "attacks_blocked"} <= set(report)
    assert report["id"] == body["run_id"] and report["attacks_tested"] == 6 and report["seed"] == 9
    assert 0 <= report["defense_score"] <= 100 and report["mode"] == "chat" and report["engine"] == "scripted"
    assert report["defense_score"] == round(100 * report["attacks_blocked"] / 6, 2)
    assert set(report["families"]) == {"instruction_override", "role_play", "encoding", "payload_splitting",
                                       "indirect_tool", "indirect_memory"}
    assert len(report["bypasses"]) == 6 - report["attacks_blocked"] and report["results"] is None
    detailed = client.get(f"{R}/report?attacks=true", headers=auth["a"]).json()
    assert len(detailed["results"]) == 6 and {r["by"] for r in detailed["results"]} <= {"defence", "model", ""}
    assert done["report"]["defense_score"] == report["defense_score"]


def test_runs_are_the_callers_and_bounded(team) -> None:  # noqa: ANN001
    client, services, auth = team
    run_id = client.post(f"{R}/run", json={"max_attacks": 3, "chat": False}, headers=auth["a"]).json()["run_id"]
    finished(client, run_id, auth["a"])
    for who in ("b",):
        assert client.get(f"{R}/runs/{run_id}", headers=auth[who]).status_code == 404
        assert client.get(f"{R}/report", headers=auth[who]).status_code == 404
    assert client.get(f"{R}/runs/{uuid4()}", headers=auth["a"]).status_code == 404
    bad_id = client.get(f"{R}/runs/not-a-uuid", headers=auth["a"])
    assert bad_id.status_code == 422
    forbidden = client.post(f"{R}/run", json={}, headers=auth["reader"])
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "FORBIDDEN"
    too_many = client.post(f"{R}/run", json={"max_attacks": 13}, headers=auth["a"])
    assert too_many.status_code == 422
    fields = too_many.json()["error"]["details"]["fields"]
    assert fields[0]["field"] == "max_attacks" and "red_team.max_attacks_per_run" in fields[0]["error"]
    for body, field in (({"families": ["telepathy"]}, "families"), ({"seed": -1}, "seed"),
                        ({"families": []}, "families"), ({"colour": "red"}, "colour")):
        response = client.post(f"{R}/run", json=body, headers=auth["a"])
        assert response.status_code == 422, body
        assert any(field in f["field"] for f in response.json()["error"]["details"]["fields"]), response.text


def test_a_second_run_while_one_runs_is_409(team) -> None:  # noqa: ANN001
    client, services, auth = team
    gate = threading.Event()

    class Held:
        def inspect(self, text: str, source: Source = Source.USER, user_id: str | None = None) -> Verdict:
            gate.wait(30)
            return Verdict(False, 0.0, (), source)

    services.red_team.detector = Held()
    first = client.post(f"{R}/run", json={"max_attacks": 2, "chat": False}, headers=auth["a"]).json()
    try:
        again = client.post(f"{R}/run", json={"chat": False}, headers=auth["a"])
        assert again.status_code == 409
        assert again.json()["error"]["code"] == "CONFLICT" and again.json()["error"]["details"]["run_id"] == first["run_id"]
        other = client.post(f"{R}/run", json={"chat": False}, headers=auth["b"])
        assert other.status_code == 409 and first["run_id"] not in other.text
        assert client.get(f"{R}/runs/{first['run_id']}", headers=auth["a"]).json()["status"] == "running"
        assert client.get(IMMUNE, headers=auth["a"]).json()["red_team"]["running"]["run_id"] == first["run_id"]
        assert client.get(IMMUNE, headers=auth["b"]).json()["red_team"]["running"] is None
    finally:
        gate.set()
    assert finished(client, first["run_id"], auth["a"])["status"] == "completed"


def test_the_immune_status_with_the_red_team_off(client: TestClient, read_only_auth: dict[str, str]) -> None:
    response = client.get(IMMUNE, headers=read_only_auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["red_team"]["status"] == "disabled" and "red_team.enabled" in body["red_team"]["reason"]
    assert [layer["name"] for layer in body["defence"]["layers"]] == ["normalisation", "static", "dynamic",
                                                                      "classifier", "judge"]
    assert body["gauges"]["defense_score_x100"] == 0 and "engine" in body["restarts"]
    assert client.get(IMMUNE).status_code == 401


def test_the_immune_status_after_a_run(team) -> None:  # noqa: ANN001
    client, services, auth = team
    run_id = client.post(f"{R}/run", json={"max_attacks": 6, "chat": False}, headers=auth["a"]).json()["run_id"]
    report = finished(client, run_id, auth["a"])["report"]
    status = client.get(IMMUNE, headers=auth["reader"]).json()
    assert status["red_team"]["latest"]["run_id"] == run_id
    assert status["red_team"]["latest"]["defense_score"] == report["defense_score"]
    assert status["gauges"]["defense_score_x100"] == round(report["defense_score"])
    prometheus = client.get("/metrics/prometheus").text
    assert f"assistant_sanitation_defense_score_x100 {float(round(report['defense_score']))}" in prometheus
    assert client.get(IMMUNE, headers=auth["b"]).json()["red_team"]["latest"] is None


def test_the_immune_status_is_503_while_sovereign_intelligence_is_off(make_settings, make_services, make_client,
                                                                       model) -> None:  # noqa: ANN001
    services: Services = make_services(make_settings(sovereign_intelligence={"enabled": False}), model)
    key, _ = services.keys.create("k")
    response = make_client(services).get(IMMUNE, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503 and "sovereign_intelligence.enabled" in response.json()["error"]["message"]
