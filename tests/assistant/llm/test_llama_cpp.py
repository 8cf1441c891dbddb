"""The embedded engine's file resolution and its answers when models are missing (no model is
loaded here: loading needs a real GGUF, which the integration tests cover)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.base import ChatMessage, GenerationOptions, ToolSpec
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


# --- tool_choice and constrained decoding, on a fake llama.cpp ---------------------------------------

VOCAB = [b"Sure", b"{\"", b"<tool_call>", b"The", b" answer", b"\n"]
TAG_TOKENS = [2, 5]
WEATHER = ToolSpec("get_weather", "Weather.", {"type": "object", "properties": {"location": {"type": "string"}},
                                               "required": ["location"]})
TIME = ToolSpec("get_time", "Time.", {"type": "object", "properties": {"zone": {"type": "string"}},
                                      "required": ["zone"]})


class _Rendered:
    prompt = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    stop = "<|im_end|>"


class _ToolLlama:
    """A loaded model as the tool path uses it: tokenizer, completions (recorded) and a fixed call."""

    def __init__(self) -> None:
        self.completions: list[dict] = []

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return TAG_TOKENS if text == b"<tool_call>\n" else [100 + i for i in range(len(text.split()))]

    def detokenize(self, tokens: list[int], prev_tokens=None, special: bool = False) -> bytes:
        return b"".join(VOCAB[t] for t in tokens)

    def create_completion(self, prompt, **kwargs):
        self.completions.append({"prompt": prompt, **kwargs})
        if kwargs.get("grammar") is not None:
            name = "get_time" if "get_time" in kwargs["grammar"]._grammar else "get_weather"
            return {"choices": [{"text": json.dumps({"name": name, "arguments": {"location": "Paris"}})}]}
        texts = ["Sunny", " today."] if isinstance(prompt, str) else [" answer"]  # free / after the first token
        return (dict(choices=[{"text": t, "finish_reason": "stop" if t == texts[-1] else None}]) for t in texts)


@pytest.fixture
def tool_engine(embedded: LlamaCppChatModel, monkeypatch):
    from assistant.llm import llama_cpp
    from assistant.llm.call_decision import FirstTokens
    from assistant.llm.llama_cpp import _Counts

    fake = _ToolLlama()
    monkeypatch.setattr(embedded, "load", lambda name=None: fake)
    embedded._loaded[DEFAULT_MODEL] = (fake, _Counts())
    monkeypatch.setattr(embedded, "_formatter", lambda name, llm: (lambda messages, tools: _Rendered(), True))
    embedded._first[DEFAULT_MODEL] = FirstTokens.build(len(VOCAB), VOCAB.__getitem__, lambda t: False)
    logits = np.log(np.array([0.05, 0.4, 0.3, 0.25, 1e-9, 1e-9]))  # p(call) = 0.7; "The" the likeliest answer
    evaluated: list[list[int]] = []

    def prompt_logits(llm, tokens):
        evaluated.append(tokens)
        return logits, 0

    monkeypatch.setattr(llama_cpp, "_prompt_logits", prompt_logits)
    return embedded, fake, evaluated


def _run(engine: LlamaCppChatModel, **options):
    from assistant.llm.base import collect

    return collect(engine.stream([ChatMessage("user", "Weather in Paris?")],
                                 GenerationOptions(tools=(WEATHER, TIME), temperature=0.0, **options)))


def test_required_and_named_choices_decode_a_call_from_the_first_token(tool_engine) -> None:
    engine, fake, evaluated = tool_engine
    result = _run(engine, tool_choice="required")
    assert result.tool_calls[0].name in {"get_weather", "get_time"} and result.finish_reason == "tool_calls"
    (completion,) = fake.completions
    assert completion["prompt"].endswith("<|im_start|>assistant\n<tool_call>\n")  # no free text first
    grammar = completion["grammar"]._grammar
    assert "get_weather" in grammar and "get_time" in grammar
    result = _run(engine, tool_choice="get_time")
    assert [c.name for c in result.tool_calls] == ["get_time"]
    grammar = fake.completions[-1]["grammar"]._grammar
    assert "get_time" in grammar and "get_weather" not in grammar
    assert evaluated == []  # no call decision to make


def test_none_answers_and_the_first_token_cannot_open_a_call(tool_engine) -> None:
    engine, fake, evaluated = tool_engine
    result = _run(engine, tool_choice="none")
    assert result.content == "The answer" and result.tool_calls == ()
    (completion,) = fake.completions
    assert completion["prompt"] == [*evaluated[0], 3] and completion.get("grammar") is None
    assert completion["stream"] is True


def test_constrained_auto_compares_the_call_probability_with_the_threshold(tool_engine) -> None:
    engine, fake, evaluated = tool_engine
    engine.call_threshold = 0.5
    result = _run(engine)
    assert abs(engine.last_call_probability - 0.7) < 1e-6
    assert result.tool_calls and fake.completions[-1]["prompt"] == [*evaluated[0], *TAG_TOKENS]
    engine.call_threshold = 0.8  # above p_call, but the likeliest first token opens a call: greedy would call
    result = _run(engine)
    assert result.tool_calls
    engine.call_threshold = 1.0  # never
    result = _run(engine)
    assert result.tool_calls == () and result.content == "The answer"
    engine.call_threshold = None  # free decoding, as before: the prompt goes as text, no probe
    result = _run(engine)
    assert result.content == "Sunny today." and len(evaluated) == 3
    assert fake.completions[-1]["prompt"] == _Rendered.prompt


def test_unknown_tool_choice_is_a_validation_error(tool_engine) -> None:
    engine, fake, _ = tool_engine
    with pytest.raises(ValidationFailed) as info:
        _run(engine, tool_choice="get_news")
    assert info.value.details["fields"][0]["field"] == "tool_choice"
    assert fake.completions == []
