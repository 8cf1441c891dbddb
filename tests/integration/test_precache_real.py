"""Precache prediction with the real parts: the packaged MiniLM embedder, the real conversation store (the
history is made by real chats through the TestClient, then moved to earlier days), the real weather tool
against the replay server of recorded Open-Meteo answers, and the sysfs reader over a fake tree. Only the
chat model is the scripted fake.

The user asked about the weather in Berlin on 8 of 10 days at this time of day, in four wordings (each on
two days: only MiniLM's grouping makes them one query, 8/10 = 0.8), and about Hamburg on 6 (not
predicted). A refresh precomputes the retrieval and the weather; then the lookup answers exactly what
the retrieval would, a chat's weather call is answered without reaching the weather service, and a
paraphrase hits while Hamburg and "tomorrow" do not. Nothing asserts a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from assistant.extended.precache_entries import retrieve_untouched
from assistant.extended.thermal import SysfsThermal
from assistant.llm.scripted import ScriptedChatModel
from assistant.services import Services, build_services
from assistant.testing.replay import ReplayServer
from tests.assistant.extended.precache_support import backdate

pytestmark = pytest.mark.integration

WORDINGS = ("What is the weather in Berlin?", "What's the weather in Berlin?", "How is the weather in Berlin?",
            "Tell me the weather in Berlin")
HAMBURG = "What is the weather in Hamburg?"


@pytest.fixture
def live(make_settings: Callable[..., Any], minilm: Any, tmp_path: Path) -> Iterator[tuple[Services, TestClient,
                                                                                          ReplayServer]]:
    with ReplayServer() as replay:
        settings = make_settings(memory={"embedding_backend": "sentence-transformers"},
                                 security={"rate_limit_enabled": False}, **replay.settings_overrides())
        services = build_services(settings, chat_model=ScriptedChatModel(), embedder=minilm)
        zone = tmp_path / "sys" / "thermal" / "thermal_zone0"
        zone.mkdir(parents=True)
        (zone / "type").write_text("x86_pkg_temp\n")
        (zone / "temp").write_text("52000\n")
        services.precache.thermal = SysfsThermal(tmp_path / "sys")
        try:
            with TestClient(create_app(services)) as client:
                yield services, client, replay
        finally:
            services.close()


def chat(services: Services, client: TestClient, auth: dict[str, str], message: str, at: datetime | None = None,
         location: str | None = None) -> dict:
    """One real chat turn (a weather call first when ``location``), moved to ``at``."""
    model = services.chat_model
    if location is not None:
        model.enqueue(tool_calls=[("get_weather", {"location": location})])
        model.enqueue("It is overcast.")
    response = client.post("/v1/chat", headers=auth, json={"message": message})
    assert response.status_code == 200, response.text
    body = response.json()
    if at is not None:
        ids = [r["id"] for r in services.db.query("SELECT id FROM messages WHERE conversation_id = ?",
                                                  (body["conversation_id"],))]
        backdate(services, at, message_ids=ids)
        services.db.execute("UPDATE tool_runs SET created_at = ? WHERE conversation_id = ?",
                            (at.isoformat().replace("+00:00", "Z"), body["conversation_id"]))
    return body


def test_the_weather_query_is_predicted_precomputed_and_hit(live: tuple[Services, TestClient, ReplayServer],
                                                            minilm: Any) -> None:
    services, client, replay = live
    key, principal = services.keys.create("owner")
    auth, user = {"X-API-Key": key}, str(principal.user_id)
    assert services.memory.embedder.id == "sentence-transformers"
    fact = "I cycle to work in Berlin unless the weather is bad; then I take the U-Bahn."
    memory = client.post("/v1/memories", headers=auth, json={"content": fact, "summary": fact[:40],
                                                             "memory_type": "fact"})
    assert memory.status_code == 201, memory.text

    now = datetime.now(UTC)
    for n in range(1, 11):  # ten active days before today, at this time of day
        at = now - timedelta(days=n)
        chat(services, client, auth, f"Note number {n} for the diary", at.replace(hour=12, minute=0))
        if n <= 8:
            chat(services, client, auth, WORDINGS[(n - 1) // 2], at, location="Berlin")
        if n <= 6:
            chat(services, client, auth, HAMBURG, at)
    seeded = len(replay.requests)
    assert seeded == 16  # 8 weather calls: geocode and forecast each

    body = client.post("/api/v1/precache/refresh", headers=auth).json()
    assert body["thermal"] == {"status": "ok", "temperature_celsius": 52.0, "sensor": "x86_pkg_temp",
                               "threshold_celsius": 65.0}
    (predicted,) = body["predictions"]
    assert (predicted["query"], predicted["probability"], predicted["days_asked"]) == (WORDINGS[0], 0.8, 8)
    assert predicted["fresh"] and predicted["memories"] >= 1
    assert [(t["tool"], t["fresh"]) for t in predicted["tools"]] == [("get_weather", True)]
    assert len(replay.requests) == seeded + 2  # the refresh called the weather service once

    vector = minilm.embed([WORDINGS[0]])[0]
    # what retrieve_for_prompt returns now (run without its touch, which would make the entry stale)
    expected = retrieve_untouched(services.memory, user, WORDINGS[0], vector)
    hit = services.precache.lookup(user, WORDINGS[0], vector)
    assert hit is not None and expected[1]
    assert hit[0] == expected[0] and [m.memory.id for m in hit[1]] == [m.memory.id for m in expected[1]]
    services.precache.settle()  # the hit touched its memories: the entries are recomputed in the background
    paraphrase = "Tell me the weather in Berlin"
    assert services.precache.lookup(user, paraphrase, minilm.embed([paraphrase])[0]) is not None  # cosine 0.956
    for other in (HAMBURG, "What is the weather in Berlin tomorrow?"):
        assert services.precache.lookup(user, other, minilm.embed([other])[0]) is None

    services.precache.settle()
    before = client.get("/api/v1/precache/status", headers=auth).json()["hits"]
    reply = chat(services, client, auth, WORDINGS[0], location="Berlin")  # now, through the chat service
    assert client.get("/api/v1/precache/status", headers=auth).json()["hits"] == before + 1  # ChatService.recall
    assert len(replay.requests) == seeded + 2  # the weather came from the precache
    runs = client.get(f"/v1/tools/runs?conversation_id={reply['conversation_id']}", headers=auth).json()["runs"]
    assert [(r["tool"], r["status"], r["result"]["location"]["name"]) for r in runs] == [("get_weather", "ok",
                                                                                            "Berlin")]
    services.precache.settle()
    status = client.get("/api/v1/precache/status", headers=auth).json()
    assert status["tool_hits"] == 1 and status["tool_time_saved_ms"] > 0
    # hits: the lookup, the paraphrase and the chat turn; misses: Hamburg, "tomorrow" and the 24 seeding turns
    assert (status["hits"], status["misses"]) == (3, 26)
    assert status["predictions"][0]["fresh"]  # recomputed after the chat learned a memory

    signals = client.get("/api/v1/signals?kind=PrecacheHit", headers=auth).json()["signals"]
    (aggregate,) = [s for s in signals if s["data"]["kind"] == "aggregate"]  # the seeding turns, at the refresh
    assert (aggregate["data"]["hits"], aggregate["data"]["misses"], aggregate["value"]) == (0, 24, 0.0)
    assert sorted(s["data"]["kind"] for s in signals if s is not aggregate) == ["retrieval"] * 3 + ["tool"]
    thermal = client.get("/api/v1/signals?kind=ThermalUpdate", headers=auth).json()["signals"]
    assert thermal and thermal[-1]["value"] == 52.0
