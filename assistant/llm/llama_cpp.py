"""The embedded engine: llama-cpp-python running a packaged GGUF in-process.

Not thread-safe by itself; :class:`assistant.llm.queue.InferenceQueue` runs one generation at a
time on its worker thread. Prompt-prefix reuse of llama.cpp's KV cache is measured by wrapping the
instance's ``generate``: the share of prompt tokens already in the cache is the cache hit rate.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assistant.config import InferenceSettings
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.base import (
    CacheStats,
    ChatMessage,
    Delta,
    Finished,
    GenerationOptions,
    Health,
    ModelInfo,
    StreamEvent,
    TokenUsage,
)
from assistant.llm.catalog import PACKAGED_MODELS, models_dir

MAX_LOADED = 2


class _Counts:
    def __init__(self) -> None:
        self.prompt = 0
        self.cached = 0
        self.generated = 0


def _instrument(llm: Any, counts: _Counts) -> None:
    """Wrap ``llm.generate`` to count prompt, reused-prefix and generated tokens."""
    original = llm.generate

    def generate(tokens: Any, *args: Any, **kwargs: Any) -> Iterator[int]:
        tokens = list(tokens)
        counts.prompt = len(tokens)
        reused = 0
        for a, b in zip(llm._input_ids[: llm.n_tokens].tolist(), tokens):
            if a != b:
                break
            reused += 1
        counts.cached = reused
        counts.generated = 0
        for token in original(tokens, *args, **kwargs):
            counts.generated += 1
            yield token

    llm.generate = generate


class LlamaCppChatModel:
    id = "llama-cpp"

    def __init__(
        self,
        model: str,
        data_dir: Path,
        *,
        model_path: Path | None = None,
        threads: int = 2,
        context_length: int = 4096,
    ):
        self.default_model = model
        self.data_dir = Path(data_dir)
        self.model_path = model_path
        self.threads = threads
        self.context_length = context_length
        self.cache_stats = CacheStats()
        self._loaded: OrderedDict[str, tuple[Any, _Counts]] = OrderedDict()
        self._load_lock = threading.Lock()

    # --- which files -----------------------------------------------------------------------------

    def path_of(self, name: str) -> Path | None:
        if name == self.default_model and self.model_path is not None:
            return self.model_path.expanduser()
        packaged = PACKAGED_MODELS.get(name)
        if packaged is not None:
            return packaged.path(self.data_dir)
        candidate = models_dir(self.data_dir) / name
        return candidate if candidate.suffix == ".gguf" else None

    def available(self) -> dict[str, Path]:
        found: dict[str, Path] = {}
        for name in [self.default_model, *PACKAGED_MODELS]:
            path = self.path_of(name)
            if path is not None and path.is_file():
                found[name] = path
        return found

    def missing_message(self, name: str) -> str:
        path = self.path_of(name)
        hint = (
            f"install it with `assistant models install {name}`"
            if name in PACKAGED_MODELS
            else f"packaged models: {', '.join(PACKAGED_MODELS)}"
        )
        return f"model {name!r} is not installed (expected at {path}); {hint}"

    # --- loading ---------------------------------------------------------------------------------

    def load(self, name: str | None = None) -> Any:
        name = name or self.default_model
        with self._load_lock:
            if name in self._loaded:
                self._loaded.move_to_end(name)
                return self._loaded[name][0]
            path = self.path_of(name)
            if path is None or not path.is_file():
                raise ServiceUnavailableError(self.missing_message(name))
            from llama_cpp import Llama

            try:
                llm = Llama(
                    model_path=str(path),
                    n_ctx=self.context_length,
                    n_threads=self.threads,
                    n_threads_batch=self.threads,
                    verbose=False,
                )
            except Exception as exc:  # llama.cpp raises ValueError for unreadable files
                raise ServiceUnavailableError(f"model {name!r} at {path} failed to load: {exc}") from exc
            counts = _Counts()
            _instrument(llm, counts)
            self._loaded[name] = (llm, counts)
            while len(self._loaded) > MAX_LOADED:
                self._loaded.popitem(last=False)
            return llm

    def _resolve(self, requested: str | None) -> str:
        name = requested or self.default_model
        if name != self.default_model and name not in self.available():
            raise ValidationFailed(
                f"model {name!r} is not available",
                [{"field": "model", "error": f"unknown model; available: {', '.join(self.available()) or 'none'}"}],
            )
        return name

    # --- ChatModel -------------------------------------------------------------------------------

    def stream(self, messages: list[ChatMessage], options: GenerationOptions) -> Iterator[StreamEvent]:
        name = self._resolve(options.model)
        llm = self.load(name)
        counts = self._loaded[name][1]
        chunks = llm.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            stream=True,
        )
        finish_reason = "stop"
        try:
            for chunk in chunks:
                choice = chunk["choices"][0]
                text = choice.get("delta", {}).get("content")
                if text:
                    yield Delta(text)
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"]
                if options.should_stop is not None and options.should_stop():
                    finish_reason = "cancelled"
                    break
        finally:
            chunks.close()
            # In `finally`: a consumer that stops early closes this generator at a `yield`.
            self.cache_stats.hits += counts.cached
            self.cache_stats.misses += max(counts.prompt - counts.cached, 0)
        completion = counts.generated - (1 if finish_reason == "stop" and counts.generated else 0)
        yield Finished(name, TokenUsage(counts.prompt, completion, counts.cached), finish_reason)

    def health(self) -> Health:
        name = self.default_model
        start = time.perf_counter()
        try:
            llm = self.load(name)
            llm.tokenize(b"ping")
        except ServiceUnavailableError as exc:
            return Health(False, name, None, exc.message)
        return Health(True, name, round((time.perf_counter() - start) * 1000))

    def models(self) -> list[ModelInfo]:
        infos = []
        for name in self.available():
            packaged = PACKAGED_MODELS.get(name)
            native = packaged.context_length if packaged else self.context_length
            infos.append(
                ModelInfo(
                    id=name,
                    name=packaged.description.split(",")[0].split(":")[0] if packaged else name,
                    parameters=packaged.parameters if packaged else "unknown",
                    context_length=min(native, self.context_length),
                    default=name == self.default_model,
                )
            )
        return infos


def create(settings: InferenceSettings, data_dir: Path) -> LlamaCppChatModel:
    return LlamaCppChatModel(
        settings.model,
        data_dir,
        model_path=settings.model_path,
        threads=settings.threads,
        context_length=settings.context_length,
    )
