"""Rate limiting per client IP: headers, 429 with Retry-After, and the routes it leaves alone."""

from __future__ import annotations

from uuid import UUID

import pytest
from fastapi.testclient import TestClient

from api.main import create_app

UNLIMITED = ["/health", "/ready", "/ready/all", "/metrics", "/metrics/prometheus"]


@pytest.fixture
def limited(make_settings, make_services, make_client):  # noqa: ANN001, ANN201
    services = make_services(make_settings(security={"rate_limit_rpm": 3}))
    key, _ = services.keys.create("k")
    return make_client(services), {"Authorization": f"Bearer {key}"}, services


def test_fourth_request_is_429(limited) -> None:  # noqa: ANN001
    client, auth, _ = limited
    remaining = []
    for _ in range(3):
        response = client.get("/v1/system/status", headers=auth)
        assert response.status_code == 200
        assert response.headers["x-ratelimit-limit"] == "3"
        reset = int(response.headers["x-ratelimit-reset"])
        assert 1 <= reset <= 60
        remaining.append(int(response.headers["x-ratelimit-remaining"]))
    assert remaining == [2, 1, 0]
    response = client.get("/v1/system/status", headers=auth)
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "RATE_LIMITED"
    assert error["request_id"] == response.headers["x-request-id"]
    assert str(UUID(error["request_id"])) == error["request_id"]
    retry_after = int(response.headers["retry-after"])
    assert 1 <= retry_after <= 60
    assert isinstance(error["retry_after"], int)
    assert error["retry_after"] == retry_after
    assert response.headers["x-ratelimit-remaining"] == "0"


def test_health_readiness_and_metrics_are_not_limited(limited) -> None:  # noqa: ANN001
    client, auth, _ = limited
    for _ in range(4):
        client.get("/v1/system/status", headers=auth)
    assert client.get("/v1/system/status", headers=auth).status_code == 429
    for _ in range(3):
        for path in UNLIMITED:
            response = client.get(path)
            assert response.status_code == 200, path
            assert "x-ratelimit-limit" not in response.headers


def test_all_other_routes_share_the_budget(limited) -> None:  # noqa: ANN001
    client, auth, _ = limited
    assert client.post("/v1/chat", json={"message": "hi"}, headers=auth).status_code == 200
    assert client.get("/v1/system/status").status_code == 401  # unauthenticated requests count too
    assert client.get("/no-such-route").status_code == 404
    response = client.post("/v1/chat", json={"message": "hi"}, headers=auth)
    assert response.status_code == 429
    assert "retry-after" in response.headers


def test_rate_limit_headers_on_error_responses(limited) -> None:  # noqa: ANN001
    client, _, _ = limited
    response = client.get("/v1/system/status")
    assert response.status_code == 401
    assert response.headers["x-ratelimit-limit"] == "3"
    assert response.headers["x-ratelimit-remaining"] == "2"


def test_limits_are_per_client_ip(limited) -> None:  # noqa: ANN001
    client, auth, services = limited
    for _ in range(3):
        client.get("/v1/system/status", headers=auth)
    assert client.get("/v1/system/status", headers=auth).status_code == 429
    with TestClient(create_app(services), client=("10.0.0.2", 1234)) as other:
        response = other.get("/v1/system/status", headers=auth)
        assert response.status_code == 200
        assert response.headers["x-ratelimit-remaining"] == "2"


def test_default_limit_is_120(client, auth) -> None:
    statuses = [client.get("/v1/system/models", headers=auth).status_code for _ in range(121)]
    assert statuses[:120] == [200] * 120
    assert statuses[120] == 429


def test_disabled_rate_limiting(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(security={"rate_limit_enabled": False, "rate_limit_rpm": 1}))
    key, _ = services.keys.create("k")
    client = make_client(services)
    for _ in range(5):
        response = client.get("/v1/system/status", headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200
        assert "x-ratelimit-limit" not in response.headers
