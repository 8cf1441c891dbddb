"""GET /v1/system/status and /v1/system/models."""

from __future__ import annotations

import assistant
from assistant.errors import ServiceUnavailableError
from assistant.llm.scripted import ScriptedChatModel


def status(client, auth) -> dict:  # noqa: ANN001
    response = client.get("/v1/system/status", headers=auth)
    assert response.status_code == 200
    return response.json()


def test_status_shape(client, auth) -> None:
    body = status(client, auth)
    assert set(body) == {"version", "uptime_seconds", "environment", "resources", "statistics", "engine"}
    assert body["version"] == assistant.__version__
    assert isinstance(body["uptime_seconds"], int)
    assert body["uptime_seconds"] >= 0
    assert body["environment"] == "development"
    resources = body["resources"]
    assert set(resources) == {"memory_used_mb", "cpu_percent", "database_size_mb"}
    assert resources["memory_used_mb"] > 0
    assert resources["database_size_mb"] > 0
    assert resources["cpu_percent"] >= 0
    statistics = body["statistics"]
    assert set(statistics) == {"requests_total", "inference_requests", "cache_hit_rate"}
    assert statistics["cache_hit_rate"] == 0.0


def test_status_engine_of_a_non_embedded_backend(client, auth) -> None:
    engine = status(client, auth)["engine"]
    assert engine["backend"] == "scripted"
    assert engine["cpu_variant"] is None and engine["threads"] is None and engine["rejected_variants"] == []


def test_status_engine_reports_the_cpu_variant_and_sizes(make_settings, make_services, make_client, tmp_path,
                                                         monkeypatch) -> None:
    from assistant.llm import cpu_backend
    from assistant.llm.llama_cpp import LlamaCppChatModel

    engine = LlamaCppChatModel("m", tmp_path, threads=3, batch_size=256, ubatch_size=128)
    services = make_services(make_settings(), chat_model=engine)
    key, _ = services.keys.create("k")
    info = cpu_backend.BackendInfo("haswell", "self-test", features=["AVX2", "FMA"],
                                   rejected=[{"variant": "zen4", "reason": "killed by SIGSEGV"}],
                                   self_test_tokens_per_second=21.5)
    monkeypatch.setattr(cpu_backend, "_current", info)
    body = status(make_client(services), {"Authorization": f"Bearer {key}"})["engine"]
    assert body["cpu_variant"] == "haswell" and body["cpu_variant_source"] == "self-test"
    assert body["rejected_variants"] == [{"variant": "zen4", "reason": "killed by SIGSEGV"}]
    assert (body["threads"], body["batch_threads"], body["batch_size"], body["ubatch_size"]) == (3, 3, 256, 128)
    assert body["cpu_features"] == ["AVX2", "FMA"] and body["self_test_tokens_per_second"] == 21.5


def test_status_counts_requests(client, auth) -> None:
    before = status(client, auth)["statistics"]["requests_total"]
    client.get("/health")
    client.get("/nope")
    client.get("/metrics")
    after = status(client, auth)["statistics"]["requests_total"]
    assert after == before + 4  # three requests and the first status call


def test_status_counts_inference(client, auth) -> None:
    assert status(client, auth)["statistics"]["inference_requests"] == 0
    client.post("/v1/chat", json={"message": "one"}, headers=auth)
    client.post("/v1/chat/stream", json={"message": "two"}, headers=auth)
    assert status(client, auth)["statistics"]["inference_requests"] == 2


def test_status_reports_the_configured_environment(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(server={"environment": "production"}))
    key, _ = services.keys.create("k")
    body = status(make_client(services), {"Authorization": f"Bearer {key}"})
    assert body["environment"] == "production"


def test_database_size_grows(client, auth, services) -> None:
    before = services.db.size_bytes()
    for i in range(20):
        client.post("/v1/chat", json={"message": f"message number {i} " + "padding " * 200}, headers=auth)
    assert services.db.size_bytes() > before
    assert status(client, auth)["resources"]["database_size_mb"] >= before / 2**20


def test_models(client, auth) -> None:
    response = client.get("/v1/system/models", headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert body == {
        "models": [
            {"id": "scripted", "name": "Scripted test model", "parameters": "0", "context_length": 4096, "default": True}
        ]
    }


class Unreachable(ScriptedChatModel):
    def models(self):  # noqa: ANN201
        raise ServiceUnavailableError("ollama at http://127.0.0.1:1 is unreachable")


def test_models_when_the_engine_is_unreachable(make_settings, make_services, make_client) -> None:
    services = make_services(make_settings(), Unreachable())
    key, _ = services.keys.create("k")
    response = make_client(services).get("/v1/system/models", headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "SERVICE_UNAVAILABLE"


def test_system_routes_need_a_key(client) -> None:
    assert client.get("/v1/system/status").status_code == 401
    assert client.get("/v1/system/models").status_code == 401
