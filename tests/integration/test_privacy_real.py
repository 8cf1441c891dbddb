"""The privacy budget through the real server: uvicorn on loopback, the packaged MiniLM embedder (memory
writes and sanitation's re-ask judge), a real SQLite ledger and Google's dp-accounting. Only the chat
model is the scripted fake.

With the spec's budget (epsilon 1.0, delta 1e-5), ten memory-statistics queries at 0.1 are granted and
the eleventh is 429 with the remaining budget; then, with a large budget swapped in (epsilon 200, queries of 99:
noise of scale 0.02 and 0.04), the released counts equal the true ones once rounded and the quality components are
those of the conversations written over HTTP (a MiniLM-judged re-ask, a correction). Nothing asserts a
time."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from assistant.config import PrivacySettings
from assistant.extended.privacy import PrivacyBudget
from assistant.extended.privacy_queries import per_conversation_sums
from tests.integration.support import serve

pytestmark = pytest.mark.integration

P = "/api/v1/privacy"
MEMORIES = [("I prefer green tea to coffee", "preference", 0.6), ("My sister Anna lives in Porto", "fact", 0.9),
            ("My locker code is 4711", "fact", 0.7), ("I am allergic to peanuts", "fact", 1.0)]


def test_memory_stats_and_quality_through_the_real_server(tmp_path: Path) -> None:
    live, key = serve(tmp_path, inference={"backend": "scripted"}, security={"rate_limit_enabled": False},
                      memory={"embedding_backend": "sentence-transformers"}, knowledge_graph={"extractor": "rules"})
    services = live.services
    with live, httpx.Client(base_url=live.base_url, headers={"X-API-Key": key}, timeout=300) as http:
        assert services.memory.embedder.id == "sentence-transformers"  # MiniLM, not a test double
        for text, kind, importance in MEMORIES:
            created = http.post("/v1/memories", json={"content": text, "summary": text[:30], "memory_type": kind,
                                                      "importance": importance})
            assert created.status_code == 201, created.text

        # the spec's budget: ten queries of 0.1, the eleventh refused
        for _ in range(10):
            assert http.get(f"{P}/memory-stats", params={"epsilon": 0.1}).status_code == 200
        refused = http.get(f"{P}/memory-stats", params={"epsilon": 0.1})
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == "RATE_LIMITED" and int(refused.headers["Retry-After"]) == error["retry_after"]
        assert error["details"]["remaining_epsilon"] == pytest.approx(0.01, abs=1e-3)
        budget = http.get(f"{P}/budget").json()
        assert len(budget["ledger"]) == 10 and budget["accountant"] == "pld"
        assert budget["spent"] == pytest.approx(0.990, abs=1e-3)

        # a budget of 200 over the same ledger, queries of 99: the noise (scale 2/99) is far below the rounding step
        services.privacy = PrivacyBudget(PrivacySettings(epsilon=200.0), services.db, services.signals)
        stats = http.get(f"{P}/memory-stats", params={"epsilon": 99}).json()
        counts = {row["memory_type"]: row["count"] for row in stats["by_type"]}
        assert counts["Fact"] == 3 and counts["Preference"] == 1 and stats["total"] == 4
        assert stats["mean_importance"] == pytest.approx(0.8, abs=0.05)

        # conversations over HTTP: a rephrased question (MiniLM says re-ask), a follow-up and a correction
        def say(text: str, conversation: str | None = None) -> str:
            body = {"message": text, **({"conversation_id": conversation} if conversation else {})}
            reply = http.post("/v1/chat", json=body)
            assert reply.status_code == 200, reply.text
            return reply.json()["conversation_id"]

        weather = say("What's the weather in Paris tomorrow?")
        say("What will the weather be like in Paris tomorrow?", weather)
        router = say("How do I reset my router?")
        say("Which button do I press on the back?", router)
        say("Actually, I meant the modem, not the router", router)
        # per conversation: weather re-ask 1/1; router re-ask 0/2, correction 1/3; none abandoned (exact, unreleased)
        user = str(services.keys.authenticate(key).user_id)
        deps = services.sanitation.deps
        assert per_conversation_sums(deps, user, None, deps.clock()) == pytest.approx([2, 1.0, 1 / 3, 0])
        quality = http.get(f"{P}/quality", params={"epsilon": 99}).json()
        # released: Laplace of scale 4/99 on the count and the three sums (an error past 0.15 has odds ~1e-3)
        assert quality["conversations"] == 2
        assert quality["re_ask_rate"] == pytest.approx(0.5, abs=0.15)
        assert quality["correction_rate"] == pytest.approx(1 / 6, abs=0.15)
        assert quality["abandonment_rate"] == pytest.approx(0.0, abs=0.15)

        # another user sees none of this user's charges
        other, _ = services.keys.create("other", user_id=uuid4())
        theirs = http.get(f"{P}/budget", headers={"X-API-Key": other}).json()
        assert theirs["ledger"] == [] and theirs["spent"] == 0.0
