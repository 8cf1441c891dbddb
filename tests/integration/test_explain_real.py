"""Explanations with the real parts: the embedded llama.cpp engine (the default packaged model, one short
answer), the packaged MiniLM embedder, an encrypted SQLite store, served by uvicorn on loopback. The
explanation read back over HTTP must hold the real provenance: the memory MiniLM retrieved with its
cosine and score parts, 384 dimensions, the engine's model and token counts as stored with the answer."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from assistant.config import Settings
from assistant.services import build_services
from tests.integration.support import LiveServer

pytestmark = pytest.mark.integration


def test_a_real_answer_is_explained(tmp_path: Path, default_model_path: Path, minilm) -> None:  # noqa: ANN001
    settings = Settings.load(server={"data_dir": str(tmp_path)},
                             inference={"model_path": str(default_model_path), "threads": 2, "temperature": 0.0,
                                        "max_tokens": 16},
                             memory={"embedding_backend": "sentence-transformers"},
                             security={"rate_limit_enabled": False},
                             tool_calling={"selection": "auto"})  # this question needs no tool
    services = build_services(settings, embedder=minilm)
    user = services.keys.owner_user_id()
    memory = services.memory.add(str(user), "My sister Anna lives in Reykjavik.", memory_type="Fact", importance=0.8)
    key, _ = services.keys.create("integration")
    auth = {"Authorization": f"Bearer {key}"}
    with LiveServer(services) as live, httpx.Client(base_url=live.base_url, timeout=300) as client:
        reply = client.post("/v1/chat", json={"message": "Where does my sister Anna live?"}, headers=auth)
        assert reply.status_code == 200, reply.text
        reply = reply.json()
        assert reply["content"].strip()
        response = client.get(f"/api/chat/{reply['id']}/explain", headers=auth)
        assert response.status_code == 200, response.text
        e = response.json()
        stored = services.db.one("SELECT model, prompt_tokens, completion_tokens FROM messages WHERE id = ?",
                                 (reply["id"],))
    assert e["engine"] == "llama-cpp" and e["model"] == reply["model"] == stored["model"]
    assert (e["tokens"]["prompt"], e["tokens"]["completion"]) == (stored["prompt_tokens"], stored["completion_tokens"])
    assert e["tokens"]["prompt"] > 50 and 0 < e["tokens"]["completion"] <= 16
    steps = {s["kind"]: s for s in e["steps"]}
    assert steps["embedding"]["data"]["dimensions"] == 384
    (anna,) = [c for c in steps["memories"]["data"]["candidates"] if c["id"] == memory.id]
    assert anna["status"] == "injected" and 0.3 < anna["cosine"] < 1.0  # MiniLM's cosine, question to fact
    assert anna["importance"] == pytest.approx(0.8) and anna["relevance"] == reply["memories"][0]["relevance"]
    parts = anna["parts"]
    assert parts["similarity"] + parts["importance"] + parts["freshness"] == pytest.approx(anna["relevance"], abs=1e-3)
    generation = [s for s in e["steps"] if s["kind"] == "generation"]
    if steps["prompt"]["data"]["tools"]:  # the tool loop: one step per model turn
        assert [g["label"] for g in generation][0] == "model turn 1"
    else:  # the plain flow: one answer with the engine's own counts
        (answer,) = generation
        assert answer["data"]["completion_tokens"] == e["tokens"]["completion"]
        assert answer["data"]["model"] == e["model"] and answer["data"]["engine"] == "llama-cpp"
    assert e["timings"]["first_token_ms"] > e["timings"]["recall_ms"] > 0
    assert e["timings"]["total_ms"] >= e["timings"]["generation_ms"] > 0
    sections = {s["name"]: s["chars"] for s in steps["prompt"]["data"]["sections"]}
    assert sections["memory_context"] > len(memory.content) and sections["message"] == len(
        "Where does my sister Anna live?")
    assert e["summary"][0].startswith(f"Answered by {reply['model']} (llama-cpp)")
    assert any("1 memory reached the prompt" in line for line in e["summary"])
