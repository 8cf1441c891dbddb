"""A missing model or an unreachable engine: a clear 503, never a hang."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.support import free_port, serve, stream_chat

pytestmark = pytest.mark.integration


def test_missing_model_gives_503_on_ready_and_chat(tmp_path):
    live, key = serve(tmp_path / "data", inference={"model": "smollm2-135m-instruct"})
    headers = {"Authorization": f"Bearer {key}"}
    with live, httpx.Client(timeout=30) as client:
        ready = client.get(f"{live.base_url}/ready")
        assert ready.status_code == 503
        assert ready.json()["inference"]["healthy"] is False
        assert "assistant models install smollm2-135m-instruct" in ready.json()["inference"]["detail"]

        chat = client.post(f"{live.base_url}/v1/chat", headers=headers, json={"message": "hi"})
        assert chat.status_code == 503
        assert chat.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
        assert "not installed" in chat.json()["error"]["message"]

        status, events = stream_chat(client, live.base_url, headers, {"message": "hi"})
        assert status == 503
        metrics = client.get(f"{live.base_url}/metrics").json()
        assert metrics["inference"]["healthy"] is False
        assert metrics["inference"]["requests_failed"] == 2


@pytest.mark.parametrize("backend", ["ollama", "openai"])
def test_unreachable_engine_gives_503_quickly(tmp_path, backend):
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    live, key = serve(tmp_path, inference={"backend": backend, "base_url": closed, "model": "m"})
    headers = {"Authorization": f"Bearer {key}"}
    with live, httpx.Client(timeout=30) as client:
        ready = client.get(f"{live.base_url}/ready")
        assert ready.status_code == 503
        assert "unreachable" in ready.json()["inference"]["detail"]
        chat = client.post(f"{live.base_url}/v1/chat", headers=headers, json={"message": "hi"})
        assert chat.status_code == 503
        assert chat.json()["error"]["code"] == "SERVICE_UNAVAILABLE"
        assert chat.headers["x-request-id"] == chat.json()["error"]["request_id"]
