"""The privacy-budget routes: the budget and ledger, the aggregate queries that spend it, the 429 envelope
once it is spent (epsilon 1.0, ten queries of 0.1), bad input, the disabled feature, and owner scoping."""

from __future__ import annotations

from uuid import uuid4

import pytest
from fastapi.testclient import TestClient

from assistant.services import Services

P = "/api/v1/privacy"


def remember(client: TestClient, auth: dict[str, str], *texts: str) -> None:
    for text in texts:
        response = client.post("/v1/memories", json={"content": text, "summary": text, "memory_type": "fact",
                                                     "importance": 0.8}, headers=auth)
        assert response.status_code == 201, response.text


def test_a_fresh_budget(client: TestClient, auth: dict[str, str]) -> None:
    body = client.get(f"{P}/budget", headers=auth).json()
    assert {k: body[k] for k in ("epsilon", "delta", "spent", "remaining", "reset_interval", "accountant", "ledger")} \
        == {"epsilon": 1.0, "delta": 1e-5, "spent": 0.0, "remaining": 1.0, "reset_interval": "daily",
            "accountant": "pld", "ledger": []}
    assert body["period_start"].endswith("T00:00:00.000Z") and body["reset_at"].endswith("T00:00:00.000Z")


def test_memory_stats_spend_the_budget_and_the_eleventh_is_429(client: TestClient, auth: dict[str, str]) -> None:
    remember(client, auth, "I like green tea", "My sister lives in Porto")
    for n in range(10):
        response = client.get(f"{P}/memory-stats?epsilon=0.1", headers=auth)
        assert response.status_code == 200, (n, response.text)
    body = response.json()
    assert [row["memory_type"] for row in body["by_type"]][:2] == ["Fact", "Preference"] and len(body["by_type"]) == 9
    assert (body["mechanism"], body["sensitivity"], body["noise_scale"], body["privacy_unit"]) == \
        ("laplace", 2.0, 20.0, "one memory")
    assert 0.0 <= body["mean_importance"] <= 1.0
    assert body["charge"]["epsilon_after"] == pytest.approx(0.990, abs=1e-3)
    refused = client.get(f"{P}/memory-stats?epsilon=0.1", headers=auth)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "RATE_LIMITED" and error["request_id"]
    assert int(refused.headers["Retry-After"]) == error["retry_after"] > 0
    details = error["details"]
    assert details["remaining_epsilon"] == pytest.approx(0.010, abs=1e-3)
    assert details["requested_epsilon"] == 0.1 and details["reset_at"] == body["charge"]["reset_at"]
    assert "privacy.epsilon" in error["message"]
    budget = client.get(f"{P}/budget", headers=auth).json()
    assert len(budget["ledger"]) == 10 and budget["spent"] == pytest.approx(0.990, abs=1e-3)
    assert {e["query"] for e in budget["ledger"]} == {"memory_stats"}
    assert budget["ledger"][0]["parameters"] == {"epsilon": 0.1, "sensitivity": 2.0, "noise_multiplier": 10.0,
                                                 "scale": 20.0}


def test_each_charge_is_a_privacy_spend_signal(client: TestClient, auth: dict[str, str]) -> None:
    client.get(f"{P}/memory-stats?epsilon=0.6", headers=auth)
    client.get(f"{P}/memory-stats?epsilon=0.6", headers=auth)  # refused
    signals = client.get("/api/v1/signals?kind=PrivacySpend", headers=auth).json()["signals"]
    assert [s["data"]["refused"] for s in signals] == [False, True]


def test_a_read_only_key_spends_its_users_budget(client: TestClient, services: Services) -> None:
    key, principal = services.keys.create("reader", user_id=uuid4(), role="read-only")
    reader = {"X-API-Key": key}
    assert client.get(f"{P}/memory-stats?epsilon=0.5", headers=reader).status_code == 200
    assert client.get(f"{P}/budget", headers=reader).json()["spent"] == pytest.approx(0.5, abs=1e-3)


def test_another_users_spend_does_not_show(client: TestClient, auth: dict[str, str], services: Services) -> None:
    other, _ = services.keys.create("other", user_id=uuid4())
    other_auth = {"Authorization": f"Bearer {other}"}
    charge = client.get(f"{P}/memory-stats?epsilon=0.9", headers=other_auth).json()["charge"]
    mine = client.get(f"{P}/budget", headers=auth)
    assert mine.json()["spent"] == 0.0 and charge["id"] not in mine.text
    assert client.get(f"{P}/memory-stats?epsilon=0.9", headers=auth).status_code == 200  # my budget is whole


def test_quality_components_spend_the_budget(client: TestClient, auth: dict[str, str]) -> None:
    for message in ("What is the weather in Paris?", "Actually, I meant Lyon"):
        assert client.post("/v1/chat", json={"message": message}, headers=auth).status_code == 200
    body = client.get(f"{P}/quality?epsilon=0.5", headers=auth).json()
    assert (body["sensitivity"], body["noise_scale"], body["privacy_unit"]) == (4.0, 8.0, "one conversation")
    assert all(0.0 <= body[k] <= 1.0 for k in ("re_ask_rate", "correction_rate", "abandonment_rate", "score"))
    assert body["charge"]["query"] == "quality_components"
    assert client.get(f"{P}/budget", headers=auth).json()["spent"] == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize(("query", "error"), [("epsilon=0", "greater than or equal"), ("epsilon=abc", "number"),
                                              ("epsilon=101", "less than or equal"),
                                              ("epsilon=2", "privacy.epsilon")])
def test_a_bad_epsilon_is_422_naming_it(client: TestClient, auth: dict[str, str], query: str, error: str) -> None:
    for route in ("memory-stats", "quality"):
        response = client.get(f"{P}/{route}?{query}", headers=auth)
        assert response.status_code == 422, response.text
        [field] = response.json()["error"]["details"]["fields"]
        assert field["field"] == "epsilon" and error in field["error"]
    assert client.get(f"{P}/budget", headers=auth).json()["ledger"] == []


def test_without_a_key_401(client: TestClient) -> None:
    for route in ("budget", "memory-stats", "quality"):
        assert client.get(f"{P}/{route}").status_code == 401


def test_disabled_is_503_naming_the_setting_before_the_parameters(make_settings, make_services, make_client,
                                                                   model) -> None:  # noqa: ANN001
    services = make_services(make_settings(privacy={"enabled": False}), model)
    client = make_client(services)
    key, _ = services.keys.create("k")
    assert services.privacy is None
    for route in ("budget", "memory-stats?epsilon=abc", "quality?epsilon=0.1"):
        response = client.get(f"{P}/{route}", headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
        assert "privacy.enabled" in response.json()["error"]["message"]


def test_memory_stats_need_the_memory_store(make_settings, make_services, make_client, model) -> None:  # noqa: ANN001
    services = make_services(make_settings(memory={"enabled": False}), model)
    client = make_client(services)
    key, _ = services.keys.create("k")
    auth = {"Authorization": f"Bearer {key}"}
    response = client.get(f"{P}/memory-stats", headers=auth)
    assert response.status_code == 503 and "memory.enabled" in response.json()["error"]["message"]
    assert "sanitation.enabled" in client.get(f"{P}/quality", headers=auth).json()["error"]["message"]
    assert client.get(f"{P}/budget", headers=auth).json()["ledger"] == []  # nothing was charged
