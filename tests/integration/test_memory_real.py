"""Memory with the real parts: the packaged MiniLM embedder (the default `sentence-transformers`
backend), a real SQLite file, the real key file, uvicorn on loopback. Only the chat model is the
scripted fake, so that what the model RECEIVED (its system prompt) can be inspected."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import math
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import uuid4

import httpx
import pytest

from assistant.chat.service import ChatRequest
from assistant.config import Settings
from assistant.crypto import KeyMismatchError
from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder
from assistant.errors import ConfigError
from assistant.llm.scripted import ScriptedChatModel
from assistant.memory.records import sealed_at
from assistant.memory.scoring import PREAMBLE
from assistant.memory.store import MemoryStore
from assistant.memory.types import MemoryType
from assistant.services import DB_FILE, Services, build_services
from tests.integration.support import LiveServer, serve, stream_chat

pytestmark = pytest.mark.integration

DAY = 86400.0


@pytest.fixture
def real_settings(make_settings: Callable[..., Settings]) -> Settings:
    settings = make_settings(memory={"embedding_backend": "sentence-transformers"},
                             security={"rate_limit_enabled": False},
                             tool_calling={"selection": "auto"})  # as deployed: these messages need no tool
    assert settings.memory.embedding_backend == "sentence-transformers"
    assert settings.memory.embedding_model == "all-MiniLM-L6-v2"
    assert settings.memory.enable_encryption is True
    return settings


@pytest.fixture
def opened() -> Iterator[list[Services]]:
    built: list[Services] = []
    yield built
    for services in built:
        services.close()


def user_of(services: Services, key: str) -> str:
    return str(services.keys.authenticate(key).user_id)


def raw_bytes(data_dir: Path) -> bytes:
    out = b""
    for suffix in ("", "-wal"):
        path = data_dir / (DB_FILE + suffix)
        if path.exists():
            out += path.read_bytes()
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- encryption and the key file -------------------------------------------------------------------------


def test_encryption_round_trip_through_build_services(real_settings: Settings) -> None:
    data_dir = real_settings.data_dir
    user = str(uuid4())
    services = build_services(real_settings, chat_model=ScriptedChatModel())
    try:
        assert isinstance(getattr(services.memory.embedder, "inner", services.memory.embedder),  # behind its breaker
                          SentenceTransformerEmbedder)
        assert services.sealer.encrypted
        memory = services.memory.add(user, "Alice's passport number is Q7781-Zeta.", "passport Quixotic",
                                     "fact", 0.8, ["travelDocumentTag"])
        row = services.db.one("SELECT length(embedding) AS n, content FROM memories WHERE id = ?", (memory.id,))
        assert row["n"] == 384 * 4  # the embedding is stored, unencrypted, as 384 float32
        assert b"Q7781" not in row["content"]
    finally:
        services.close()
    raw = raw_bytes(data_dir)
    for needle in (b"Q7781-Zeta", b"passport", b"Quixotic", b"travelDocumentTag", b"traveldocumenttag"):
        assert needle not in raw

    again = build_services(real_settings, chat_model=ScriptedChatModel())
    try:
        back = again.memory.get(user, memory.id)
        assert back.content == "Alice's passport number is Q7781-Zeta."
        assert back.summary == "passport Quixotic"
        assert back.tags == ["travelDocumentTag"]
        assert back.memory_type is MemoryType.FACT
        found = again.memory.search(user, "What is Alice's passport number?")
        assert found[0].memory.id == memory.id
    finally:
        again.close()


def test_key_file_is_0600_and_32_bytes(real_settings: Settings, minilm, opened) -> None:  # noqa: ANN001
    services = build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    opened.append(services)
    key_path = real_settings.data_dir / "memory.key"
    assert key_path.exists()
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert len(key_path.read_bytes()) == 32


def test_restart_with_a_wrong_key_is_refused_and_the_db_is_untouched(real_settings: Settings, minilm) -> None:  # noqa: ANN001
    data_dir = real_settings.data_dir
    user = str(uuid4())
    services = build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    memory = services.memory.add(user, "The safe code is 4711.", memory_type="fact")
    services.close()
    key_path = data_dir / "memory.key"
    good_key = key_path.read_bytes()
    db_file = data_dir / DB_FILE
    before = digest(db_file)

    key_path.write_bytes(os.urandom(32))
    with pytest.raises(ConfigError) as caught:
        build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    assert isinstance(caught.value, KeyMismatchError)
    message = caught.value.message
    assert "wrong key" in message
    assert str(key_path) in message
    gc.collect()  # the refused open must not have written anything, even once collected
    assert digest(db_file) == before

    # a missing key file is refused too, and no new key appears
    key_path.unlink()
    with pytest.raises(ConfigError, match="missing"):
        build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    gc.collect()
    assert not key_path.exists()
    assert digest(db_file) == before

    # the right key opens it again, and the memory is intact
    key_path.write_bytes(good_key)
    os.chmod(key_path, 0o600)
    services = build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    try:
        assert services.memory.get(user, memory.id).content == "The safe code is 4711."
    finally:
        services.close()


# --- merge and decay with real embeddings ------------------------------------------------------------


def test_merge_with_real_embeddings(real_settings: Settings, minilm, opened) -> None:  # noqa: ANN001
    services = build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    opened.append(services)
    store, user = services.memory, str(uuid4())
    first, merged = store.learn(user, "My name is Alice.")
    assert not merged
    assert first.memory_type is MemoryType.FACT
    second, merged = store.learn(user, "my name is Alice")
    assert merged
    assert second.id == first.id
    assert second.content == "My name is Alice."
    assert store.count(user) == 1
    other, merged = store.learn(user, "The car needs new winter tyres before December.")
    assert not merged
    assert store.count(user) == 2
    raw = raw_bytes(real_settings.data_dir)
    assert b"Alice" not in raw and b"winter tyres" not in raw
    assert store.sealer.open(
        services.db.scalar("SELECT content FROM memories WHERE id = ?", (first.id,)), sealed_at("content", first.id, user)
    ) == "My name is Alice."


def test_decay_over_simulated_days_through_the_store(real_settings: Settings, minilm, opened) -> None:  # noqa: ANN001
    services = build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    opened.append(services)
    t = [1_750_000_000.0]
    store = MemoryStore(services.db, services.sealer, minilm, real_settings.memory, clock=lambda: t[0])
    user = str(uuid4())
    pref = store.add(user, "Alice prefers window seats on trains.", memory_type="preference", importance=0.9)
    ctx = store.add(user, "Alice asked about the weather in Hamburg.", memory_type="context", importance=0.9)
    context, used = store.retrieve_for_prompt(user, "Does Alice prefer window seats on trains?")
    assert pref.id in [s.memory.id for s in used]
    assert store.get(user, pref.id).access_count == 1

    base = -math.log(real_settings.memory.decay_factor)
    rate = base * 0.80 / (1.0 + math.log(2.0))  # Preference, one access
    t[0] += 10 * DAY
    store.decay(user)
    pref_10 = max(0.9 * math.exp(-rate * 10) + 0.005, 0.25)
    assert store.get(user, pref.id).importance == pytest.approx(pref_10, abs=1e-9)
    assert store.get(user, ctx.id).importance == pytest.approx(0.9 * 0.95 ** 10, abs=1e-9)
    store.decay(user)  # same day: only the reinforcement
    assert store.get(user, pref.id).importance == pytest.approx(pref_10 + 0.005, abs=1e-9)
    assert store.get(user, ctx.id).importance == pytest.approx(0.9 * 0.95 ** 10, abs=1e-9)
    t[0] += 10 * DAY
    store.decay(user)
    expected = max((pref_10 + 0.005) * math.exp(-rate * 10) + 0.005, 0.25)
    assert store.get(user, pref.id).importance == pytest.approx(expected, abs=1e-9)
    assert store.get(user, ctx.id).importance == pytest.approx(0.9 * 0.95 ** 20, abs=1e-9)
    t[0] += 400 * DAY
    store.decay(user)
    assert store.get(user, pref.id).importance == pytest.approx(0.25)
    assert store.get(user, ctx.id).importance == pytest.approx(0.10)
    # the clean-up: the Context memory has sat at its floor (= min_importance) since that run
    t[0] += 29 * DAY
    assert store.decay(user).cleaned_up == 0
    t[0] += DAY
    assert store.decay(user).cleaned_up == 1
    assert store.get(user, ctx.id).memory_type is MemoryType.ARCHIVED
    assert store.get(user, ctx.id).original_memory_type is MemoryType.CONTEXT
    assert store.get(user, pref.id).memory_type is MemoryType.PREFERENCE  # floor 0.25 > 0.10: kept


def test_rag_threshold_modes_with_minilm(real_settings: Settings, minilm, opened) -> None:  # noqa: ANN001
    """MiniLM puts a question and the fact that answers it under cosine 0.5: the default "fused"
    threshold lets the fact in (it shares the word "live"), the spec's "cosine" reading does not."""
    services = build_services(real_settings, chat_model=ScriptedChatModel(), embedder=minilm)
    opened.append(services)
    fact, question = "My name is Zanzibar and I live in Reykjavik.", "Where do I live?"
    vectors = minilm.embed([fact, question])
    cosine = float(vectors[0] @ vectors[1])
    assert 0.3 < cosine < 0.5, cosine

    def retrieved(mode: str, threshold: float = 0.5) -> list[str]:
        settings = real_settings.memory.model_copy(update={"rag_threshold_mode": mode, "rag_threshold": threshold})
        store = MemoryStore(services.db, services.sealer, minilm, settings)
        return [m.memory.content for m in store.retrieve_for_prompt(user, question)[1]]

    user = str(uuid4())
    services.memory.add(user, fact, memory_type="fact")
    services.memory.add(user, "The car needs new winter tyres before December.")
    assert retrieved("fused") == [fact]
    assert retrieved("cosine") == []
    assert retrieved("cosine", threshold=round(cosine, 2) - 0.01) == [fact]


# --- HTTP: cross-user isolation ------------------------------------------------------------------


def test_cross_user_isolation_over_http(tmp_path: Path) -> None:
    live, key_a = serve(tmp_path, inference={"backend": "scripted"}, security={"rate_limit_enabled": False})
    key_b, _ = live.services.keys.create("other", user_id=uuid4())
    a = {"Authorization": f"Bearer {key_a}"}
    b = {"Authorization": f"Bearer {key_b}"}
    with live, httpx.Client(base_url=live.base_url, timeout=120) as client:
        mine = client.post("/v1/memories", headers=a, json={
            "content": "Alice's locker combination is 12-34-56.", "summary": "locker", "memory_type": "fact"})
        assert mine.status_code == 201, mine.text
        mine = mine.json()
        theirs = client.post("/v1/memories", headers=b, json={
            "content": "Bob's bike lock code is 9876.", "summary": "bike lock", "memory_type": "fact"})
        assert theirs.status_code == 201
        theirs = theirs.json()

        assert client.get(f"/v1/memories/{mine['id']}", headers=b).status_code == 404
        assert client.delete(f"/v1/memories/{mine['id']}", headers=b).status_code == 404
        assert [m["id"] for m in client.get("/v1/memories", headers=b).json()] == [theirs["id"]]
        found = client.get("/v1/memories/search", headers=b, params={"q": "locker combination"}).json()
        assert mine["id"] not in [m["id"] for m in found]
        assert client.get("/v1/memories/stats", headers=b).json() == {
            "total": 1, "by_type": [{"memory_type": "Fact", "count": 1}]}
        assert client.post("/v1/memories/decay", headers=b).json()["processed"] == 1

        assert client.get(f"/v1/memories/{theirs['id']}", headers=a).status_code == 404
        found = client.get("/v1/memories/search", headers=a, params={"q": "bike lock code"}).json()
        assert theirs["id"] not in [m["id"] for m in found]
        assert found[0]["id"] == mine["id"]
        assert client.get(f"/v1/memories/{mine['id']}", headers=a).json()["content"] == \
            "Alice's locker combination is 12-34-56."

        # chat retrieval never crosses users either
        model = live.services.chat_model
        client.post("/v1/chat", headers=b, json={"message": "What is Alice's locker combination?"})
        system = model.calls[-1][0][0]
        assert "12-34-56" not in system.content


# --- chat: learning and retrieval with the scripted model --------------------------------------------------


@pytest.fixture
def chat_server(real_settings: Settings, minilm) -> Iterator[tuple[httpx.Client, dict[str, str], Services, ScriptedChatModel]]:  # noqa: ANN001
    model = ScriptedChatModel()
    services = build_services(real_settings, chat_model=model, embedder=minilm)
    key, _ = services.keys.create("chat")
    with LiveServer(services) as live, httpx.Client(base_url=live.base_url, timeout=120) as client:
        yield client, {"Authorization": f"Bearer {key}"}, services, model


def test_a_fact_told_in_chat_reaches_the_system_prompt_of_a_new_conversation(chat_server) -> None:  # noqa: ANN001
    client, headers, services, model = chat_server
    told = client.post("/v1/chat", headers=headers, json={"message": "My name is Alice and I live in Berlin"})
    assert told.status_code == 200, told.text
    first_system = model.calls[-1][0][0]
    assert first_system.role == "system"
    assert PREAMBLE not in first_system.content  # nothing known yet

    user = str(services.keys.authenticate(headers["Authorization"].split()[1]).user_id)
    learned = [m for m in services.memory.list(user) if m.content == "My name is Alice and I live in Berlin"]
    assert len(learned) == 1
    assert learned[0].memory_type is MemoryType.FACT
    assert learned[0].importance == pytest.approx(0.65)  # 0.30 + identity 0.35

    asked = client.post("/v1/chat", headers=headers, json={"message": "Where do I live?"})
    assert asked.status_code == 200, asked.text
    assert asked.json()["conversation_id"] != told.json()["conversation_id"]
    messages, _ = model.calls[-1]
    system = messages[0]
    assert system.role == "system"
    assert PREAMBLE in system.content
    assert "My name is Alice and I live in Berlin" in system.content
    assert system.content.index(PREAMBLE) < system.content.index("My name is Alice and I live in Berlin")
    # a new conversation: no history, only the system prompt and the question
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[1].content == "Where do I live?"
    assert services.memory.get(user, learned[0].id).access_count == 1


def test_the_streamed_route_learns_and_retrieves(chat_server, sse) -> None:  # noqa: ANN001
    client, headers, services, model = chat_server
    with client.stream("POST", "/v1/chat/stream", headers=headers,
                       json={"message": "I prefer green tea over coffee"}) as response:
        assert response.status_code == 200
        body = "".join(response.iter_text())
    events = sse(body)
    assert [e for e, _ in events][-1] == "done"
    user = str(services.keys.authenticate(headers["Authorization"].split()[1]).user_id)
    learned = [m for m in services.memory.list(user) if m.content == "I prefer green tea over coffee"]
    assert len(learned) == 1
    assert learned[0].memory_type is MemoryType.PREFERENCE
    assert learned[0].importance == pytest.approx(0.55)  # 0.30 + preference 0.25

    status, events = stream_chat(client, str(client.base_url).rstrip("/"), headers,
                                 {"message": "Do I prefer tea or coffee?"})
    assert status == 200
    assert events[-1][0] == "done"
    assert json.loads(events[-1][1])["conversation_id"]
    system = model.calls[-1][0][0]
    assert PREAMBLE in system.content
    assert "I prefer green tea over coffee" in system.content


def test_learning_off_learns_nothing(make_settings: Callable[..., Settings], minilm) -> None:  # noqa: ANN001
    settings = make_settings(memory={"embedding_backend": "sentence-transformers", "enable_learning": False})
    model = ScriptedChatModel()
    services = build_services(settings, chat_model=model, embedder=minilm)
    key, principal = services.keys.create("chat")
    try:
        asyncio.run(services.chat.chat(principal.user_id, ChatRequest("My name is Alice and I live in Berlin")))
        assert services.memory.list(str(principal.user_id)) == []
        assert services.memory.count(str(principal.user_id)) == 0
    finally:
        services.close()
