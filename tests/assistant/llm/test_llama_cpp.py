"""The embedded engine's file resolution and its answers when models are missing (no model is
loaded here: loading needs a real GGUF, which the integration tests cover)."""

from __future__ import annotations

from pathlib import Path

import pytest

from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.base import ChatMessage, GenerationOptions
from assistant.llm.catalog import DEFAULT_MODEL, PACKAGED_MODELS, SMALL_MODEL, models_dir
from assistant.llm.llama_cpp import LlamaCppChatModel


@pytest.fixture
def embedded(tmp_path: Path) -> LlamaCppChatModel:
    return LlamaCppChatModel(DEFAULT_MODEL, tmp_path, context_length=4096)


def install_placeholder(data_dir: Path, name: str) -> Path:
    path = PACKAGED_MODELS[name].path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"placeholder")
    return path


def test_paths_of_packaged_and_other_models(embedded: LlamaCppChatModel, tmp_path: Path) -> None:
    assert embedded.path_of(DEFAULT_MODEL) == PACKAGED_MODELS[DEFAULT_MODEL].path(tmp_path)
    assert embedded.path_of("custom.gguf") == models_dir(tmp_path) / "custom.gguf"
    assert embedded.path_of("not-a-file") is None


def test_model_path_overrides_the_default(tmp_path: Path) -> None:
    own = tmp_path / "elsewhere" / "mine.gguf"
    embedded = LlamaCppChatModel(DEFAULT_MODEL, tmp_path, model_path=own)
    assert embedded.path_of(DEFAULT_MODEL) == own
    assert embedded.path_of(SMALL_MODEL) == PACKAGED_MODELS[SMALL_MODEL].path(tmp_path)


def test_missing_default_model_is_unhealthy_with_a_hint(embedded: LlamaCppChatModel) -> None:
    health = embedded.health()
    assert health.healthy is False
    assert health.latency_ms is None
    assert "not installed" in health.detail
    assert f"assistant models install {DEFAULT_MODEL}" in health.detail
    with pytest.raises(ServiceUnavailableError, match="not installed"):
        list(embedded.stream([ChatMessage("user", "hi")], GenerationOptions()))


def test_unknown_model_option_is_a_validation_error(embedded: LlamaCppChatModel) -> None:
    with pytest.raises(ValidationFailed) as info:
        list(embedded.stream([ChatMessage("user", "hi")], GenerationOptions(model="gpt-5")))
    assert info.value.details["fields"][0]["field"] == "model"


def test_models_lists_the_installed_files(embedded: LlamaCppChatModel, tmp_path: Path) -> None:
    assert embedded.models() == []
    install_placeholder(tmp_path, SMALL_MODEL)
    install_placeholder(tmp_path, DEFAULT_MODEL)
    models = {m.id: m for m in embedded.models()}
    assert set(models) == {DEFAULT_MODEL, SMALL_MODEL}
    assert models[DEFAULT_MODEL].default is True
    assert models[SMALL_MODEL].default is False
    assert models[DEFAULT_MODEL].parameters == "0.5B"
    assert models[DEFAULT_MODEL].name == "Qwen2.5-Coder-0.5B-Instruct (Q4)"
    assert models[SMALL_MODEL].name == "SmolLM2-135M-Instruct (Q4_1)"
    assert models[DEFAULT_MODEL].context_length == 4096  # the configured context, smaller than the model's
    assert models[SMALL_MODEL].context_length == 4096
    assert embedded.cache_stats.hit_rate == 0.0


class _RecordingLlama:
    """Stands in for a loaded ``llama_cpp.Llama``: records the completion's arguments."""

    def __init__(self) -> None:
        self.kwargs: dict = {}

    def create_chat_completion(self, **kwargs):
        self.kwargs = kwargs

        def chunks():
            yield {"choices": [{"delta": {"content": '{"city": "Paris"}'}, "finish_reason": "stop"}]}

        return chunks()


def test_json_schema_decodes_under_its_grammar(embedded: LlamaCppChatModel, monkeypatch) -> None:
    from llama_cpp.llama_grammar import LlamaGrammar

    from assistant.llm.base import collect
    from assistant.llm.llama_cpp import _Counts

    fake = _RecordingLlama()
    monkeypatch.setattr(embedded, "load", lambda name=None: fake)
    embedded._loaded[DEFAULT_MODEL] = (fake, _Counts())
    schema = {"type": "object", "properties": {"city": {"type": "string", "description": "a city",
                                                        "maxLength": 20_000}},
              "required": ["city"], "additionalProperties": False}
    result = collect(embedded.stream([ChatMessage("user", "Where?")], GenerationOptions(json_schema=schema)))
    assert result.content == '{"city": "Paris"}'
    grammar = fake.kwargs["grammar"]
    assert isinstance(grammar, LlamaGrammar)  # built from the schema, without the 20,000-long repeat
    assert "city" in grammar._grammar and "{20000}" not in grammar._grammar
    collect(embedded.stream([ChatMessage("user", "Where?")], GenerationOptions()))
    assert fake.kwargs["grammar"] is None
