"""Mesh inference between two live servers on loopback, both running the real small model (SmolLM2-135M on
llama.cpp): the peer is an instance of this service reached through its OpenAI-compatible endpoint with its
own key; the mesh instance forwards to it and the answer names the peer. Once the peer is stopped, the same
request is answered by the local engine with the reason, and without fallback it is refused (503, the peer
being marked down)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from assistant.llm.catalog import SMALL_MODEL
from tests.integration.support import serve

pytestmark = pytest.mark.integration

ASK = {"messages": [{"role": "user", "content": "Name one planet of the solar system."}], "max_tokens": 12,
       "temperature": 0.0}


def engine(model_path: Path) -> dict[str, object]:
    return {"model": SMALL_MODEL, "model_path": str(model_path), "threads": 1, "temperature": 0.0, "max_tokens": 12}


def test_a_peer_serves_then_its_absence_falls_back_to_local(tmp_path: Path, small_model_path: Path) -> None:
    common = {"security": {"rate_limit_enabled": False}, "memory": {"enabled": False}}
    peer, peer_key = serve(tmp_path / "peer", inference=engine(small_model_path), **common)
    mesh = {"enabled": True, "timeout_secs": 120, "health_interval_secs": 3600, "down_secs": 600,
            "health_timeout_secs": 300,  # the first /ready loads the peer's model: a bound against hangs
            "peers": [{"name": "loopback-peer", "url": peer.base_url, "api_key": peer_key}]}
    node, key = serve(tmp_path / "node", inference=engine(small_model_path), mesh=mesh, **common)
    headers = {"Authorization": f"Bearer {key}"}
    admin, _ = node.services.keys.create("mesh admin", role="admin")
    with node, httpx.Client(base_url=node.base_url, headers=headers, timeout=300) as client:
        with peer:
            served = client.post("/api/v1/mesh/inference", json=ASK)
            assert served.status_code == 200, served.text
            body = served.json()
            assert body["served_by"] == "loopback-peer" and body["fallback_reason"] is None
            assert body["content"].strip() and body["model"] == SMALL_MODEL
            assert body["usage"]["completion_tokens"] > 0
            assert body["route"][0]["outcome"] == "served" and body["route"][0]["latency_ms"] > 0
            view = client.get("/api/v1/mesh/peers", headers={"Authorization": f"Bearer {admin}"}).json()["peers"][0]
            assert (view["healthy"], view["served"], view["in_flight"]) == (True, 1, 0)
            assert view["latency_ewma_ms"] > 0
            assert not node.services.chat_model.is_loaded()  # the local model was never needed
        # the peer is stopped: its health is still cached as good, so the forward is tried, fails, and falls back
        local = client.post("/api/v1/mesh/inference", json=ASK)
        assert local.status_code == 200, local.text
        body = local.json()
        assert body["served_by"] == "local" and body["content"].strip() and body["model"] == SMALL_MODEL
        assert body["fallback_reason"].startswith("peer 'loopback-peer' failed: ")
        assert body["route"][0]["outcome"] == "failed"
        refused = client.post("/api/v1/mesh/inference", json={**ASK, "allow_fallback": False})
        assert refused.status_code == 503
        assert refused.json()["error"]["message"].startswith("no peer can serve: loopback-peer down")
