"""The extractor registry: ids, "auto", unknown ids, what "llm" is built as."""

from __future__ import annotations

import pytest

from assistant.config import InferenceSettings, KnowledgeGraphSettings, Settings
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


def settings(backend: str = "llama-cpp", **graph) -> Settings:
    return Settings(inference=InferenceSettings(backend=backend), knowledge_graph=kg(**graph))


@pytest.mark.parametrize(("backend", "expected"), [
    ("llama-cpp", "rules"), ("ollama", "llm"), ("openai", "llm"), ("scripted", "rules"),
])
def test_auto_is_llm_for_an_engine_server_and_rules_for_the_embedded_model(backend: str, expected: str) -> None:
    assert resolve_id(kg(extractor="auto"), InferenceSettings(backend=backend)) == expected


def test_known_ids() -> None:
    assert {"llm", "rules"} <= set(extractor_ids())


def test_unknown_id_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        create_extractor(settings(extractor="spacy"))
    assert "spacy" in caught.value.message
    for known in ("auto", "llm", "rules"):
        assert known in caught.value.message


def test_rules(queue) -> None:
    extractor, fallback = create_extractor(settings(extractor="rules"), queue)
    assert isinstance(extractor, RulesExtractor) and isinstance(extractor, Extractor) and fallback is None
    assert extractor.id == "rules"


def test_llm_is_the_engine_with_the_rules_as_fallback(queue) -> None:
    extractor, fallback = create_extractor(settings("scripted", extractor="LLM", batch_size=4, llm_max_tokens=200),
                                           queue)
    assert isinstance(extractor, FallbackExtractor) and isinstance(extractor, Extractor)
    assert fallback is extractor.fallback  # reported with its own counters
    assert extractor.id == "llm"
    assert isinstance(extractor.primary, LlmExtractor) and isinstance(extractor.fallback, RulesExtractor)
    assert extractor.primary.batch_size == 4 and extractor.primary.max_tokens_per_passage == 200
    assert extractor.primary.queue is queue
    assert set(extractor.counters()) == {"calls", "passages", "failures", "seconds", "fallbacks"}
    extractor.close()


def test_auto_without_an_engine_is_rules_and_llm_without_one_is_an_error() -> None:
    extractor, fallback = create_extractor(settings("llama-cpp"), None)
    assert isinstance(extractor, RulesExtractor) and fallback is None
    with pytest.raises(ConfigError, match="inference engine"):
        create_extractor(settings(extractor="llm"), None)


def test_register_another_extractor(monkeypatch) -> None:
    from assistant.graph import extract

    monkeypatch.setitem(extract._EXTRACTORS, "mine", "assistant.graph.extract:create_rules")
    assert "mine" in extractor_ids()
    assert isinstance(create_extractor(settings(extractor="mine"))[0], RulesExtractor)
    register_extractor("mine", "assistant.graph.extract:create_rules")  # idempotent
