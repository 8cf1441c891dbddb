"""``/api/optimization``: disabled 503 naming the key, the status, the refusal without data, a cold-start
run in the background (202, 409 while it runs), the history with paging, ownership and roles."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.assistant.learning.test_optimize import locomo_file

BASE = "/api/optimization"


@pytest.fixture
def enabled(make_settings, make_services, make_client, tmp_path: Path):  # noqa: ANN001, ANN201
    def make(**optimization: object):  # noqa: ANN202
        settings = make_settings(optimization={"enabled": True, "seed": 3, **optimization})
        services = make_services(settings)
        return services, make_client(services)

    return make


def key(services, role: str = "user") -> dict[str, str]:  # noqa: ANN001
    from uuid import uuid4

    secret, _ = services.keys.create(f"k-{uuid4().hex[:6]}", user_id=uuid4(), role=role)
    return {"Authorization": f"Bearer {secret}"}


def wait_done(client, auth: dict, seconds: float = 60) -> dict:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        body = client.get(f"{BASE}/status", headers=auth).json()
        if body["state"] != "running":
            return body
        time.sleep(0.1)
    raise AssertionError("the run did not finish")


def test_disabled_is_503_naming_the_key_before_the_body(client, auth) -> None:  # noqa: ANN001
    for method, path in (("GET", "/status"), ("GET", "/history"), ("POST", "/run"), ("POST", "/cancel")):
        r = client.request(method, BASE + path, headers=auth, content=b"{not json" if method == "POST" else None)
        assert r.status_code == 503, path
        assert "optimization.enabled = false" in r.json()["error"]["message"]


def test_status_before_any_run_and_the_refusal_without_data(enabled) -> None:  # noqa: ANN001
    services, client = enabled()
    auth = key(services)
    body = client.get(f"{BASE}/status", headers=auth).json()
    assert body["state"] == "idle" and body["run"] is None and body["applied"] is None
    assert body["current"] == body["defaults"] and body["defaults"]["rag_threshold"] == 0.5
    assert body["settings"]["n_startup_trials"] == 10 and body["settings"]["n_ei_candidates"] == 24
    r = client.post(f"{BASE}/run", headers=auth, json={})
    assert r.status_code == 409
    error = r.json()["error"]
    assert error["details"]["reason"] == "not_enough_data"
    assert "optimization.dataset_path is not set" in error["message"]
    assert client.post(f"{BASE}/cancel", headers=auth).status_code == 404


def test_a_cold_start_run_in_the_background(enabled, tmp_path: Path) -> None:  # noqa: ANN001
    services, client = enabled(dataset_path=str(locomo_file(tmp_path)), max_iterations=6)
    auth, other, reader = key(services), key(services), key(services, "read-only")
    assert client.post(f"{BASE}/run", headers=reader, json={}).status_code == 403
    r = client.post(f"{BASE}/run", headers=auth, json={"n_trials": 6})
    assert r.status_code == 202, r.text
    run = r.json()
    assert run["state"] == "running" and run["trials_total"] == 6
    again = client.post(f"{BASE}/run", headers=auth, json={})
    if again.status_code == 409:  # still running (it may already be over on a fast machine)
        assert again.json()["error"]["details"]["run_id"] == run["id"]
    status = wait_done(client, auth)
    assert status["state"] == "completed" and status["run"]["trials_done"] == 6
    assert status["run"]["source"] == "locomo"
    page = client.get(f"{BASE}/history", headers=auth, params={"limit": 4}).json()
    assert page["total"] == 6 and len(page["trials"]) == 4
    rest = client.get(f"{BASE}/history", headers=auth, params={"limit": 4, "offset": 4}).json()
    assert [t["number"] for t in page["trials"] + rest["trials"]] == list(range(6))
    trial = page["trials"][0]
    assert set(trial["params"]) >= {"rag_threshold", "rag_limit", "dense_weight", "decay_factor"}
    assert trial["state"] == "complete" and trial["validation_score"] is not None
    assert client.get(f"{BASE}/history", headers=other).json() == {"total": 0, "limit": 100, "offset": 0,
                                                                   "trials": []}
    assert client.get(f"{BASE}/history", headers=other, params={"run_id": run["id"]}).json()["total"] == 0
    assert client.get(f"{BASE}/status", headers=other).json()["state"] == "idle"
    assert client.get(f"{BASE}/status", headers=reader).status_code == 200


@pytest.mark.parametrize("body", [{"n_trials": 0}, {"n_trials": 1001}, {"n_trials": "x"}, {"other": 1}])
def test_bad_run_bodies_are_422_with_fields(enabled, body: dict) -> None:  # noqa: ANN001
    services, client = enabled()
    r = client.post(f"{BASE}/run", headers=key(services), json=body)
    assert r.status_code == 422
    assert r.json()["error"]["details"]["fields"]


def test_bad_paging_is_422(enabled) -> None:  # noqa: ANN001
    services, client = enabled()
    r = client.get(f"{BASE}/history", headers=key(services), params={"limit": 0})
    assert r.status_code == 422
