"""The extractor registry: ids, "auto", unknown ids, what "llm" is built as."""

from __future__ import annotations

import pytest

from assistant.config import InferenceSettings, KnowledgeGraphSettings
from assistant.errors import ConfigError
from assistant.graph.extract import (
    FallbackExtractor,
    create_extractor,
    extractor_ids,
    register_extractor,
    resolve_id,
)
from assistant.graph.extract.llm import LlmExtractor
from assistant.graph.extract.rules import RulesExtractor
from assistant.graph.types import Extractor
from assistant.llm.queue import InferenceQueue
from assistant.llm.scripted import ScriptedChatModel


@pytest.fixture
def queue():
    q = InferenceQueue(ScriptedChatModel())
    yield q
    q.close()


def kg(**values) -> KnowledgeGraphSettings:
    return KnowledgeGraphSettings(**values)


@pytest.mark.parametrize(("backend", "expected"), [
    ("llama-cpp", "llm"), ("ollama", "llm"), ("openai", "llm"), ("scripted", "rules"),
])
def test_auto_is_llm_for_a_real_engine(backend: str, expected: str) -> None:
    assert resolve_id(kg(extractor="auto"), InferenceSettings(backend=backend)) == expected


def test_known_ids() -> None:
    assert {"llm", "rules"} <= set(extractor_ids())


def test_unknown_id_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        create_extractor(kg(extractor="spacy"), InferenceSettings())
    assert "spacy" in caught.value.message
    for known in ("auto", "llm", "rules"):
        assert known in caught.value.message


def test_rules(queue) -> None:
    extractor = create_extractor(kg(extractor="rules"), InferenceSettings(), queue)
    assert isinstance(extractor, RulesExtractor) and isinstance(extractor, Extractor)
    assert extractor.id == "rules"


def test_llm_is_the_engine_with_the_rules_as_fallback(queue) -> None:
    settings = kg(extractor="LLM", batch_size=4, llm_max_tokens=200)
    extractor = create_extractor(settings, InferenceSettings(backend="scripted"), queue)
    assert isinstance(extractor, FallbackExtractor) and isinstance(extractor, Extractor)
    assert extractor.id == "llm"
    assert isinstance(extractor.primary, LlmExtractor) and isinstance(extractor.fallback, RulesExtractor)
    assert extractor.primary.batch_size == 4 and extractor.primary.max_tokens_per_passage == 200
    assert extractor.primary.queue is queue
    assert set(extractor.counters()) == {"calls", "passages", "failures", "seconds", "fallbacks"}
    extractor.close()


def test_auto_without_an_engine_is_rules_and_llm_without_one_is_an_error() -> None:
    assert isinstance(create_extractor(kg(), InferenceSettings(backend="llama-cpp"), None), RulesExtractor)
    with pytest.raises(ConfigError, match="inference engine"):
        create_extractor(kg(extractor="llm"), InferenceSettings(), None)


def test_register_another_extractor(monkeypatch) -> None:
    from assistant.graph import extract

    monkeypatch.setitem(extract._EXTRACTORS, "mine", "assistant.graph.extract:create_rules")
    assert "mine" in extractor_ids()
    assert isinstance(create_extractor(kg(extractor="mine"), InferenceSettings()), RulesExtractor)
    register_extractor("mine", "assistant.graph.extract:create_rules")  # idempotent
