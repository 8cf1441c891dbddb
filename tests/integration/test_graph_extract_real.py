"""The ``llm`` extractor with the real embedded model (Qwen2.5-Coder-0.5B via llama.cpp): its answer
is decoded under the schema's grammar, so it is schema-valid, and it states where the user lives."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from assistant.graph.extract.llm import SCHEMA, LlmExtractor, schema_for
from assistant.graph.extract.rules import RulesExtractor
from assistant.graph.store import normalise_name
from assistant.graph.types import ME, Passage
from assistant.llm.base import Delta
from assistant.llm.catalog import DEFAULT_MODEL
from assistant.llm.llama_cpp import LlamaCppChatModel
from assistant.llm.queue import InferenceQueue

pytestmark = pytest.mark.integration

PASSAGES = [
    Passage("I live in Berlin and work at Siemens."),
    Passage("My sister Anna is a doctor in Munich."),
    Passage("I went to a support group on 8 May 2023 and met Mel there.", speaker="Caroline"),
]


def test_real_model_extracts_schema_valid_entities_and_a_lives_in_fact(tmp_path: Path, default_model_path: Path):
    model = LlamaCppChatModel(DEFAULT_MODEL, tmp_path, model_path=default_model_path, threads=2)
    answers: list[str] = []
    stream = model.stream

    def recording(messages, options):
        assert options.json_schema == schema_for(len(PASSAGES)) and options.temperature == 0.0
        parts = []
        for event in stream(messages, options):
            if isinstance(event, Delta):
                parts.append(event.text)
            yield event
        answers.append("".join(parts))

    model.stream = recording  # type: ignore[method-assign]
    # This machine's two shared cores generate a few tokens a second: generous deadlines.
    queue = InferenceQueue(model, request_timeout_secs=900, queue_timeout_secs=60)
    extractor = LlmExtractor(queue, batch_size=3, max_tokens=1024, timeout_secs=1200)
    try:
        extractions = extractor.extract(PASSAGES)
    finally:
        extractor.close()
        queue.close()

    assert answers, "the engine was never called"
    jsonschema.validate(json.loads(answers[0]), SCHEMA)  # the grammar's doing: valid, and complete
    assert len(extractions) == 3
    first = extractions[0]
    names = {normalise_name(e.name) for e in first.entities}
    assert "berlin" in names
    lives = [f for f in first.facts if normalise_name(f.object) == "berlin"]
    assert lives and any("live" in f.relation for f in lives), first.facts
    assert all(normalise_name(f.subject) == ME for f in lives)
    # every fact names entities of its own passage
    for extraction in extractions:
        known = {normalise_name(e.name) for e in extraction.entities}
        assert all(normalise_name(f.subject) in known and normalise_name(f.object) in known
                   for f in extraction.facts)
    counters = extractor.counters()
    assert counters["calls"] == 1 and counters["passages"] == 3 and counters["seconds"] > 0


def test_rules_on_the_same_passages_need_no_model():
    extraction = RulesExtractor().extract(PASSAGES)[0]
    assert (ME, "lives_in", "Berlin") in {(f.subject, f.relation, f.object) for f in extraction.facts}
