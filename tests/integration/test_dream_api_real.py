"""Dream mode through the real server: uvicorn on loopback, the packaged MiniLM embedder, a real SQLite file
and key file, the configured NREM and REM steps (whatever they are today), the `rules` graph extractor.
Only the chat model is the scripted fake: REM's engine-made insights are not what this test is about.

Memories go in over HTTP (near-duplicates among them), a dream is triggered with `X-API-Key` as the spec's
examples send it, the status is polled until the session ends, and the journal, sessions, insights and
metrics read back consistently. Nothing asserts a time."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.support import serve

pytestmark = pytest.mark.integration

D = "/v1/dream"
MEMORIES = [
    "I go running every Sunday morning along the river.",
    "Every Sunday morning I go running along the river.",
    "My sister Anna lives in Porto and works at the harbour.",
    "Anna, my sister, works at the harbour in Porto.",
    "I prefer green tea to coffee in the afternoon.",
    "My dentist appointment is on the first Monday of each month.",
    "I am learning Portuguese to talk with Anna's children.",
]


def wait_for_the_end(http: httpx.Client) -> dict:
    deadline = time.monotonic() + 600  # a bound against hangs (two cores, MiniLM), not a timing assertion
    while True:
        session = http.get(f"{D}/status").json()["session"]
        if session["status"] in ("completed", "failed") or time.monotonic() > deadline:
            return session
        time.sleep(0.2)


def test_a_dream_over_http_with_the_real_embedder(tmp_path: Path) -> None:
    live, key = serve(tmp_path, inference={"backend": "scripted"}, security={"rate_limit_enabled": False},
                      memory={"embedding_backend": "sentence-transformers"}, knowledge_graph={"extractor": "rules"},
                      dream={"max_cycles": 2})
    with live, httpx.Client(base_url=live.base_url, headers={"X-API-Key": key}, timeout=300) as http:
        assert live.services.memory.embedder.id == "sentence-transformers"  # MiniLM, not a test double
        user = http.get(f"{D}/status").json()
        assert user["session"] is None and user["enabled"] is True
        ids = []
        for text in MEMORIES:
            created = http.post("/v1/memories", json={"content": text, "summary": text[:40]})
            assert created.status_code == 201, created.text
            ids.append(created.json()["id"])
        assert live.services.graph is not None and live.services.graph.wait_idle(300)
        assert http.get(f"{D}/status").json()["idle_seconds"] is not None  # the writes were activity

        owner = str(live.services.keys.authenticate(key).user_id)
        started = http.post(f"{D}/trigger", json={"user_id": owner})
        assert started.status_code == 202, started.text
        assert (started.json()["status"], started.json()["phase"]) == ("running", "nrem")
        session = wait_for_the_end(http)
        assert session["id"] == started.json()["id"] and session["status"] == "completed", session
        assert session["current_cycle"] == session["total_cycles"] == 2
        assert session["counts"].get("MemoryConsolidated", 0) >= 2  # the two near-duplicate pairs (MiniLM cos > .85)

        journal = http.get(f"{D}/sessions/{session['id']}/journal", params={"limit": 1000}).json()
        assert journal["total"] == len(journal["entries"])
        assert all(e["phase"] in ("NREM", "REM") and 1 <= e["cycle_number"] <= 2 for e in journal["entries"])
        assert all(e["status"] != "pending" for e in journal["entries"])  # every operation finished
        applied = {e["operation"] for e in journal["entries"] if e["status"] == "applied"}
        assert applied <= set(session["counts"]), (applied, session["counts"])
        for phase in ("nrem", "REM"):
            part = http.get(f"{D}/sessions/{session['id']}/journal", params={"phase": phase, "limit": 1000}).json()
            assert {e["phase"] for e in part["entries"]} <= {phase.upper()}
        nrem = http.get(f"{D}/sessions/{session['id']}/journal", params={"phase": "NREM", "limit": 1}).json()
        rem = http.get(f"{D}/sessions/{session['id']}/journal", params={"phase": "REM", "limit": 1}).json()
        assert nrem["total"] + rem["total"] == journal["total"]

        sessions = http.get(f"{D}/sessions").json()
        assert sessions["total"] >= 1 and session["id"] in [s["id"] for s in sessions["sessions"]]
        insights = http.get(f"{D}/insights", params={"limit": 1000}).json()
        assert insights["total"] == len(insights["insights"])
        for insight in insights["insights"]:
            assert 0.0 <= insight["confidence"] <= 1.0 and insight["status"] == "active"
            assert http.get(f"{D}/insights/{insight['id']}").json() == insight

        # each consolidation: its originals archived (readable, type kept aside), the merged memory readable
        merges = [e for e in journal["entries"] if e["operation"] == "MemoryConsolidated" and e["status"] == "applied"]
        for entry in merges:
            merged = http.get(f"/v1/memories/{entry['details']['memory_id']}")
            assert merged.status_code == 200 and merged.json()["memory_type"] != "Archived"
            for original in entry["details"]["merged_from"]:
                assert original in ids and http.get(f"/v1/memories/{original}").json()["memory_type"] == "Archived"
        assert all(http.get(f"/v1/memories/{memory_id}").status_code == 200 for memory_id in ids)
        hits = http.get("/v1/memories/search", params={"q": "running on Sunday mornings"}).json()
        assert hits and "Sunday" in hits[0]["content"]

        # an insight the night found: confirm it, merge it into memory, and a second decision is refused
        if insights["insights"]:
            found = insights["insights"][0]
            assert set(found["source_memory_ids"]) and found["evidence_count"] == 0
            confirmed = http.post(f"{D}/insights/{found['id']}/confirm")
            if confirmed.status_code == 200:  # a hypothesis below the confirmation threshold is 409
                merged = http.post(f"{D}/insights/{found['id']}/merge", json={}).json()
                memory = http.get(f"/v1/memories/{merged['memory_id']}").json()
                assert memory["memory_type"] == "DreamInsight"
                refused = http.post(f"{D}/insights/{found['id']}/dismiss")
                assert refused.status_code == 409 and "confirmed" in refused.json()["error"]["message"]
            else:
                assert confirmed.status_code == 409, confirmed.text

        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for f in text_string_to_metric_families(http.get("/metrics/prometheus").text)
                   for s in f.samples if s.name.startswith("assistant_dream_")}
        assert samples[("assistant_dream_sessions_total", (("status", "completed"),))] >= 1
        assert samples[("assistant_dream_cycles_total", (("phase", "nrem"),))] >= 2

        config = http.get(f"{D}/config").json()
        assert config["max_cycles"] == 2 and config["nrem"]["merge_threshold"] == 0.85
