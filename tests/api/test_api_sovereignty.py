"""`GET /api/sovereignty`: the spec's shape (four dimensions of 0..25, total their sum), findings per
dimension without secrets, any key may read it, 503 while `sovereign_intelligence.enabled = false`."""

from __future__ import annotations

from fastapi.testclient import TestClient

from assistant.services import Services

DIMENSIONS = ("data_locality", "encryption_coverage", "secret_management", "network_isolation")


def test_the_score_of_the_running_service(client: TestClient, auth: dict[str, str], services: Services) -> None:
    services.memory.add("u1", "My locker code is 4711", "locker")
    body = client.get("/api/sovereignty", headers=auth).json()
    assert all(0 <= body[d] <= 25 for d in DIMENSIONS)
    assert body["total"] == sum(body[d] for d in DIMENSIONS)
    assert set(body["findings"]) == set(DIMENSIONS) == set(body["breakdown"])
    # the test settings: engine and embedder in-process, encryption on with its 0600 key, loopback bind
    assert (body["data_locality"], body["encryption_coverage"]) == (25, 25)
    sealed = next(p for p in body["breakdown"]["encryption_coverage"] if p["part"] == "sealed values")
    assert sealed["points"] == 20.0
    signals = client.get("/api/v1/signals?kind=SovereigntyScore", headers=auth).json()["signals"]
    assert signals[-1]["value"] == body["total"] and signals[-1]["user_id"] is None


def test_findings_say_how_to_fix_and_never_show_a_secret(make_settings, make_services, make_client,
                                                         model) -> None:  # noqa: ANN001
    settings = make_settings(server={"host": "0.0.0.0"}, weather={"enabled": True},
                             email={"imap_host": "imap.example.com", "smtp_host": "smtp.example.com",
                                    "username": "me", "password": "hunter2-secret"})
    services = make_services(settings, model)
    client = make_client(services)
    key, _ = services.keys.create("reader", role="read-only")  # any key may read it
    response = client.get("/api/sovereignty", headers={"X-API-Key": key})
    assert response.status_code == 200
    body = response.json()
    assert "hunter2-secret" not in response.text
    settings_named = {f["setting"] for fs in body["findings"].values() for f in fs}
    assert {"server.host", "email.password", "email.imap_host", "weather.base_url"} <= settings_named
    assert body["data_locality"] < 25 and body["network_isolation"] < 25
    assert all(f["fix"] and f["severity"] in ("high", "medium", "low", "info")
               for fs in body["findings"].values() for f in fs)


def test_without_a_key_401(client: TestClient) -> None:
    assert client.get("/api/sovereignty").status_code == 401


def test_disabled_is_503_naming_the_setting(make_settings, make_services, make_client, model) -> None:  # noqa: ANN001
    services = make_services(make_settings(sovereign_intelligence={"enabled": False}), model)
    client = make_client(services)
    key, _ = services.keys.create("k")
    response = client.get("/api/sovereignty", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
    assert "sovereign_intelligence.enabled" in response.json()["error"]["message"]
