"""REM with the real parts: the packaged MiniLM embedder, a real SQLite file with encryption on, the
knowledge graph (rules extractor), and, for the hypotheses, the embedded llama.cpp model
(Qwen2.5-Coder-0.5B) answering under the schema's grammar."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jsonschema
import pytest

from assistant.dream.engine import schema_for
from assistant.dream.rem import EVIDENCE_THRESHOLD
from assistant.dream.types import EntryStatus, InsightStatus, InsightType, Operation, SessionStatus
from assistant.llm.base import Delta
from assistant.llm.catalog import DEFAULT_MODEL
from assistant.llm.llama_cpp import LlamaCppChatModel
from assistant.services import Services

pytestmark = pytest.mark.integration

DAY = 86_400.0
WEEK = [
    "I went bouldering in Sintra with Ana on Saturday.",
    "Ana says the granite in Sintra is perfect for climbing.",
    "Booked a climbing course with Ana for next month.",
    "Work: the quarterly budget review is on Monday.",
    "Climbing in Sintra again with Ana, my forearms are sore.",
    "I viewed two apartments in Porto today.",
    "The estate agent in Porto called about the flat near the river.",
    "Bought new climbing shoes for the Sintra trips with Ana.",
]
OTHERS = [  # the rest of a week: each about something else
    "Dentist appointment moved to Thursday.", "Finished reading Dune, the ending was great.",
    "Mum's birthday dinner at the Italian place.", "The boiler makes a strange noise again.",
    "Watched a documentary about octopuses.", "Paid the electricity bill.", "Tried a new ramen recipe.",
    "Sam lent me his drill.", "Renewed my passport online.", "Planted tomatoes on the balcony.",
    "Ana and I climbed the Sintra boulders at sunrise.", "Sintra with Ana: we topped out on the big slab.",
]


def write(services: Services, texts: list[str], start: float, step: float = 3 * 3600.0) -> list[str]:
    t = [start - step]

    def clock() -> float:
        t[0] += step
        return t[0]

    services.memory.clock = clock
    try:
        ids = [services.memory.add("u1", text).id for text in texts]
    finally:
        services.memory.clock = time.time
    assert services.graph is not None and services.graph.wait_idle()
    return ids


@pytest.fixture
def real(make_settings, make_services) -> Services:
    settings = make_settings(memory={"embedding_backend": "sentence-transformers"}, dream={"max_cycles": 1})
    services = make_services(settings)
    services.dream.nrem_steps = []
    return services


def test_patterns_evidence_and_surfacing_with_minilm(real: Services, tmp_path: Path) -> None:
    services, deps = real, real.dream.deps
    deps.queue = None  # statistics only here; the engine has its own test below
    write(services, WEEK + OTHERS, time.time() - 4 * DAY)
    deps.store.clock = lambda: time.time() - DAY
    vector = services.memory.embedder.embed(["You may be planning to move to Porto. You are looking at flats."])[0]
    hypothesis, _ = deps.store.add_insight("u1", InsightType.HYPOTHESIS, "You may be planning to move to Porto",
                                           "You are looking at flats.", 0.4, [], "porto", embedding=vector)
    deps.store.clock = time.time
    later = ["I am thinking about moving to Porto next year.", "Porto won the football match."]
    write(services, later, time.time() - 600, step=60)
    sims = services.memory.embedder.embed(later) @ vector
    assert sims[0] >= EVIDENCE_THRESHOLD > sims[1]  # a supporting memory, and one that only shares a name

    session = services.dream.trigger("u1", background=False)
    assert session.status is SessionStatus.COMPLETED and "failed" not in session.counts
    raised = deps.store.insight("u1", hypothesis.id)
    assert raised.evidence_count == 1 and raised.confidence == pytest.approx(0.4 + 0.6 * 0.25)
    patterns = services.dream.insights.list("u1", insight_type=InsightType.PATTERN)[0]
    titles = " | ".join(p.title for p in patterns)
    assert "Ana" in titles or "Sintra" in titles, titles

    # confirmed insights surface for a related message, not for an unrelated one
    store = deps.store
    climbing = next(p for p in patterns if "Ana" in p.title or "Sintra" in p.title)
    store.update_insight(climbing, confidence=max(climbing.confidence, 0.6), status=InsightStatus.CONFIRMED)
    assert services.dream.insights.surface("u1", f"Tell me more: {climbing.title}?", None, 2000)
    assert services.dream.insights.surface("u1", "What should I cook tonight?", None, 2000) == ""

    # sealed at rest: no insight text in the database file
    services.memory.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = b"".join(p.read_bytes() for p in Path(services.settings.data_dir).glob("*.db*"))
    assert b"planning to move to Porto" not in raw and climbing.title.encode() not in raw


def test_the_embedded_model_proposes_grounded_hypotheses(real: Services, tmp_path: Path,
                                                         default_model_path: Path) -> None:
    model = LlamaCppChatModel(DEFAULT_MODEL, tmp_path, model_path=default_model_path, threads=2)
    answers: list[tuple[str, dict]] = []
    stream = model.stream

    def recording(messages, options):
        parts = []
        for event in stream(messages, options):
            if isinstance(event, Delta):
                parts.append(event.text)
            yield event
        answers.append(("".join(parts), options.json_schema))

    model.stream = recording  # type: ignore[method-assign]
    real.queue.model = model
    real.queue.request_timeout_secs = 900  # two shared cores: a few tokens a second
    ids = write(real, WEEK[:6], time.time() - 2 * DAY)
    session = real.dream.trigger("u1", background=False)
    assert session.status is SessionStatus.COMPLETED
    assert answers, "the engine was never called"
    text, schema = answers[0]
    assert schema == schema_for([f"m{i}" for i in range(1, 7)])
    jsonschema.validate(json.loads(text), schema)  # the grammar's doing
    failed, _ = real.dream.journal("u1", session.id, status=EntryStatus.FAILED)
    assert failed == []
    proposed, _ = real.dream.journal("u1", session.id, operation=Operation.HYPOTHESIS_GENERATED)
    for insight in real.dream.insights.list("u1")[0]:
        assert set(insight.source_memory_ids) <= set(ids)
        if insight.insight_type is InsightType.HYPOTHESIS:
            assert insight.confidence >= 0.3 and insight.status is InsightStatus.ACTIVE
    print(f"engine answer: {text}")
    print(f"stored: {[(i.insight_type.value, i.title, i.confidence) for i in real.dream.insights.list('u1')[0]]}")
    assert real.dream.counters.snapshot()["llm_calls"] == len(answers)
    assert len(proposed) <= 3
