"""The knowledge-graph API with the real parts: uvicorn on loopback, the packaged MiniLM embedder (name
embeddings for entity resolution and search), a real SQLite file and key file, the `rules` extractor.
Only the chat model is the scripted fake (no chat happens here)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.integration.support import serve

pytestmark = pytest.mark.integration

G = "/api/v1/knowledge"


def test_a_posted_memory_becomes_nodes_with_its_summary(tmp_path: Path) -> None:
    live, key = serve(tmp_path, inference={"backend": "scripted"}, security={"rate_limit_enabled": False},
                      memory={"embedding_backend": "sentence-transformers"}, knowledge_graph={"extractor": "rules"})
    auth = {"Authorization": f"Bearer {key}"}
    with live, httpx.Client(base_url=live.base_url, headers=auth, timeout=120) as http:
        assert live.services.memory.embedder.id == "sentence-transformers"  # MiniLM, not a test double
        before = http.get(f"{G}/graph").json()
        assert before["nodes"] == [] and before["total_nodes"] == 0
        created = http.post("/v1/memories", json={
            "content": "Margarethe moved to Reykjavik in March and started at Landspitali hospital.",
            "summary": "Margarethe's move to Reykjavik"})
        assert created.status_code == 201, created.text
        assert live.services.graph is not None and live.services.graph.wait_idle(120)

        graph = http.get(f"{G}/graph")
        assert graph.status_code == 200 and graph.headers["content-type"] == "application/json"
        nodes = {n["name"]: n for n in graph.json()["nodes"]}
        place = next(n for name, n in nodes.items() if "Reykjavik" in name)
        assert any("Margarethe" in name for name in nodes), sorted(nodes)
        assert place["retention"] == 1.0 and place["mention_count"] == 1

        node = http.get(f"{G}/nodes/{place['id']}")
        assert node.status_code == 200, node.text
        sources = node.json()["sources"]
        assert [(s["id"], s["summary"]) for s in sources] == [(created.json()["id"], "Margarethe's move to Reykjavik")]

        hits = http.get(f"{G}/search", params={"q": "reykjavik"}).json()
        assert hits[0]["id"] == place["id"] and hits[0]["score"] > 0.6
