"""Chat and stream with the real embedded model (Qwen2.5-Coder-0.5B via llama.cpp) over HTTP."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from assistant.llm.cpu_backend import lib_dir
from assistant.llm.cpu_variants import built_variants, candidates, machine_arch, parse_cpu_flags, read_cpuinfo
from assistant.llm.machine import physical_cores
from tests.integration.support import stream_chat

pytestmark = pytest.mark.integration


def test_ready_reports_the_loaded_model(embedded_server):
    base, _, _ = embedded_server
    body = httpx.get(f"{base}/ready", timeout=60).json()
    assert body["status"] == "ready"
    assert body["inference"]["healthy"] is True
    assert body["inference"]["model"] == "qwen2.5-coder-0.5b-instruct"
    assert isinstance(body["inference"]["latency_ms"], int)


def test_chat_answers_and_continues_the_conversation(embedded_server):
    base, headers, services = embedded_server
    with httpx.Client(timeout=300) as client:
        first = client.post(f"{base}/v1/chat", headers=headers,
                            json={"message": "What is the capital of France? Answer in one sentence."})
        assert first.status_code == 200, first.text
        reply = first.json()
        assert "paris" in reply["content"].lower()
        assert reply["model"] == "qwen2.5-coder-0.5b-instruct"
        tokens = reply["tokens"]
        assert tokens["prompt"] > 10 and tokens["completion"] > 0
        assert tokens["total"] == tokens["prompt"] + tokens["completion"]

        second = client.post(f"{base}/v1/chat", headers=headers,
                             json={"message": "And what is its population, roughly?",
                                   "conversation_id": reply["conversation_id"]})
        assert second.status_code == 200, second.text
        assert second.json()["conversation_id"] == reply["conversation_id"]
        # The continuation's prompt starts with the first exchange, already in llama.cpp's KV cache.
        status = client.get(f"{base}/v1/system/status", headers=headers).json()
        assert status["statistics"]["cache_hit_rate"] > 0
        assert status["statistics"]["inference_requests"] == 2
        # the engine runs the CPU variant chosen for this machine, with threads from its physical cores
        engine = status["engine"]
        eligible = [v.name for v in candidates(built_variants(lib_dir()), parse_cpu_flags(read_cpuinfo()),
                                               arch=machine_arch())]
        assert engine["backend"] == "llama-cpp" and engine["cpu_variant"] in eligible
        assert engine["cpu_variant_source"] in ("self-test", "cache")
        assert engine["threads"] == physical_cores() and engine["batch_size"] >= engine["ubatch_size"]

    stored = services.conversations.messages(reply["conversation_id"])
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]


def test_max_tokens_is_honoured(embedded_server):
    base, headers, _ = embedded_server
    reply = httpx.post(f"{base}/v1/chat", headers=headers, timeout=300,
                       json={"message": "Tell me a long story about a dragon.", "max_tokens": 5}).json()
    assert 0 < reply["tokens"]["completion"] <= 5


def test_stream_sends_deltas_then_done(embedded_server):
    base, headers, services = embedded_server
    with httpx.Client() as client:
        status, events = stream_chat(client, base, headers, {"message": "Count from one to five in words."})
    assert status == 200
    names = [e for e, _ in events]
    assert names[-1] == "done" and set(names[:-1]) == {"message"} and len(names) > 3
    text = "".join(json.loads(d)["delta"] for e, d in events if e == "message")
    assert "three" in text.lower()
    done = json.loads(events[-1][1])
    assert done["tokens"]["completion"] >= len(names) - 1 - 2  # multi-byte pieces may merge tokens
    assert done["tokens"]["total"] == done["tokens"]["prompt"] + done["tokens"]["completion"]
    stored = services.conversations.messages(done["conversation_id"])
    assert stored[-1].content == text


def test_concurrent_requests_queue_and_all_succeed(embedded_server):
    base, headers, _ = embedded_server

    def ask(i: int) -> httpx.Response:
        return httpx.post(f"{base}/v1/chat", headers=headers, timeout=300,
                          json={"message": f"Say the number {i}.", "max_tokens": 12})

    with ThreadPoolExecutor(3) as pool:
        responses = list(pool.map(ask, range(3)))
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert len({r.json()["conversation_id"] for r in responses}) == 3


def test_models_lists_the_installed_default(embedded_server):
    base, headers, _ = embedded_server
    models = httpx.get(f"{base}/v1/system/models", headers=headers, timeout=30).json()["models"]
    default = [m for m in models if m["default"]]
    assert default and default[0]["id"] == "qwen2.5-coder-0.5b-instruct"
    assert default[0]["parameters"] == "0.5B" and default[0]["context_length"] == 4096


def test_a_fact_told_once_is_remembered_in_a_new_conversation(embedded_server):
    """The real model, the real MiniLM: the fact is learned, retrieved and used."""
    base, headers, services = embedded_server
    with httpx.Client(timeout=300) as client:
        told = client.post(f"{base}/v1/chat", headers=headers,
                           json={"message": "My name is Zanzibar and I live in Reykjavik."})
        assert told.status_code == 200, told.text
        asked = client.post(f"{base}/v1/chat", headers=headers, json={"message": "Where do I live?"})
        assert asked.status_code == 200, asked.text
        assert "reykjavik" in asked.json()["content"].lower()
        status, events = stream_chat(client, base, headers, {"message": "What is my name?"})
    assert status == 200
    streamed = "".join(json.loads(d)["delta"] for e, d in events if e == "message")
    assert "zanzibar" in streamed.lower()
    remembered = [m for m in services.memory.list(next(iter(services.keys.list()))["user_id"])
                  if "Zanzibar" in m.content]
    assert len(remembered) == 1 and remembered[0].memory_type.value == "Fact"
    assert remembered[0].access_count >= 2
