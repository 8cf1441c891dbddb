"""The embedded engine: llama-cpp-python running a packaged GGUF in-process.

Tool calling: the prompt is rendered by the model's own Jinja chat template with the tool schemas
(Qwen's template lists them and asks for ``{"name", "arguments"}`` JSON); a template without tool
support gets the same instructions in the system message. How the reply is decoded follows
``GenerationOptions.tool_choice``:

- ``required`` or a tool's name: a call from the first token, under a grammar built from the tools'
  (or the named tool's) JSON schemas (llama.cpp's schema-constrained sampling), so it always names an
  offered tool and has schema-shaped arguments;
- ``none``: an answer whose first token cannot open a call (no call parsing);
- ``auto`` with ``call_threshold`` (constrained decoding): the prompt is evaluated once and the
  model's probability that the reply opens a call (:mod:`assistant.llm.call_decision`) decides:
  at or above the threshold a call under the grammar, below it an answer as for ``none``;
- ``auto`` without a threshold (free decoding, as before): the reply streams as text until its first
  characters show a call (:func:`classify_start`); then the generation stops and the call is decoded
  again under the grammar.

Every second decode reuses the KV cache of the prompt, so it costs only its own tokens. A request
with ``json_schema`` (and no tools) is decoded under that schema's grammar from its first token.

``GenerationOptions.adapter`` puts a GGUF LoRA adapter on the model's context for that request
(:mod:`assistant.llm.adapters`: loaded once per model and file, the KV cache dropped whenever the
adapter changes; a missing or rejected file is a ServiceUnavailableError, never a silent base answer).

Not thread-safe by itself; :class:`assistant.llm.queue.InferenceQueue` runs one generation at a
time on its worker thread. Prompt-prefix reuse of llama.cpp's KV cache is measured by wrapping the
instance's ``generate``: the share of prompt tokens already in the cache is the cache hit rate.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from assistant.config import InferenceSettings
from assistant.errors import ServiceUnavailableError, ValidationFailed
from assistant.llm.adapters import LoraAdapters
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
    ToolCall,
    ToolCalls,
    ToolSpec,
)
from assistant.llm.call_decision import FirstTokens, call_probability, choose_first, decide_call, top_opens_call
from assistant.llm.catalog import PACKAGED_MODELS, models_dir
from assistant.llm.cpu_backend import ensure_cpu_backend
from assistant.llm.machine import engine_sizes
from assistant.llm.tool_format import (
    ANSWER,
    AUTO,
    CALL,
    UNDECIDED,
    _grammar_friendly,
    call_schema,
    classify_start,
    resolve_tool_choice,
    template_messages,
)

MAX_LOADED = 2
log = logging.getLogger("assistant.llm")


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
        for a, b in zip(llm._input_ids[: llm.n_tokens].tolist(), tokens, strict=False):
            if a != b:
                break
            reused += 1
        counts.cached = reused
        counts.generated = 0
        for token in original(tokens, *args, **kwargs):
            counts.generated += 1
            yield token

    llm.generate = generate


def _prompt_logits(llm: Any, tokens: list[int]) -> tuple[Any, int]:
    """Evaluate ``tokens`` on top of the longest prefix already in the KV cache and return the
    next-token logits and the number of reused tokens. The cache then holds exactly the prompt, so
    the completion that follows starts sampling at once (llama.cpp's exact-prompt cache hit)."""
    import numpy as np

    if len(tokens) >= llm.n_ctx():  # as create_completion says it
        raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llm.n_ctx()}")
    reused = 0
    for a, b in zip(llm._input_ids[: llm.n_tokens].tolist(), tokens, strict=False):
        if a != b:
            break
        reused += 1
    reused = min(reused, len(tokens) - 1)  # the last token is evaluated again for its logits
    if reused > 0 and llm._ctx.kv_cache_seq_rm(-1, reused, -1):
        llm.n_tokens = reused
    else:
        llm.reset()
        reused = 0
    llm.eval(tokens[reused:])
    logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).copy()
    return logits, reused


class LlamaCppChatModel:
    id = "llama-cpp"

    def __init__(
        self,
        model: str,
        data_dir: Path,
        *,
        model_path: Path | None = None,
        threads: int | None = None,
        context_length: int = 4096,
        call_threshold: float | None = None,
        batch_threads: int | None = None,
        batch_size: int | None = None,
        ubatch_size: int | None = None,
        cpu_variant: str = "auto",
    ):
        self.default_model = model
        # With tool_choice "auto": None lets the model write freely (a call it starts is finished
        # under the grammar); a number decides call vs answer by the model's call probability.
        self.call_threshold = call_threshold
        self.last_call_probability: float | None = None  # of the last constrained "auto" decision
        self.data_dir = Path(data_dir)
        self.model_path = model_path
        self.context_length = context_length
        # unset figures come from the machine (physical cores, memory): assistant/llm/machine.py
        self.sizes = engine_sizes(threads=threads, batch_threads=batch_threads, batch_size=batch_size,
                                  ubatch_size=ubatch_size, context_length=context_length)
        self.threads = self.sizes.threads
        self.cpu_variant = cpu_variant
        self.cache_stats = CacheStats()
        self._loaded: OrderedDict[str, tuple[Any, _Counts]] = OrderedDict()
        self._formatters: dict[str, Any] = {}
        self._first: dict[str, FirstTokens] = {}
        self._load_lock = threading.Lock()
        self.adapters = LoraAdapters()  # per-request LoRA adapters (GenerationOptions.adapter)

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

    def is_loaded(self, name: str | None = None) -> bool:
        """Whether the model (default: the default one) is in memory, with its KV cache."""
        return (name or self.default_model) in self._loaded

    def load(self, name: str | None = None) -> Any:
        name = name or self.default_model
        with self._load_lock:
            if name in self._loaded:
                self._loaded.move_to_end(name)
                return self._loaded[name][0]
            path = self.path_of(name)
            if path is None or not path.is_file():
                raise ServiceUnavailableError(self.missing_message(name))
            # the CPU variant first (process-wide, once): a variant that dies in its self-test is
            # rejected in a child process, and one that cannot run here is a clear error, not a segfault
            ensure_cpu_backend(requested=self.cpu_variant, model=path, threads=self.sizes.threads)
            from llama_cpp import Llama

            try:
                llm = Llama(
                    model_path=str(path),
                    n_ctx=self.context_length,
                    n_threads=self.sizes.threads,
                    n_threads_batch=self.sizes.batch_threads,
                    n_batch=self.sizes.batch_size,
                    n_ubatch=self.sizes.ubatch_size,
                    verbose=False,
                )
            except Exception as exc:  # llama.cpp raises ValueError for unreadable files
                raise ServiceUnavailableError(f"model {name!r} at {path} failed to load: {exc}") from exc
            counts = _Counts()
            _instrument(llm, counts)
            self._loaded[name] = (llm, counts)
            while len(self._loaded) > MAX_LOADED:
                old_name, (old, _) = self._loaded.popitem(last=False)
                self.adapters.release_model(old_name, old)
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
        self.adapters.apply(name, llm, options.adapter)
        counts = self._loaded[name][1]
        if options.tools or any(m.tool_calls or m.role == "tool" for m in messages):
            yield from self._stream_with_tools(name, llm, counts, messages, options)
            return
        chunks = llm.create_chat_completion(
            messages=[{"role": m.role, "content": m.content} for m in messages],
            temperature=options.temperature,
            max_tokens=options.max_tokens,
            stream=True,
            grammar=self._schema_grammar(options.json_schema) if options.json_schema else None,
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
            self._count_cache(counts)
        completion = counts.generated - (1 if finish_reason == "stop" and counts.generated else 0)
        yield Finished(name, TokenUsage(counts.prompt, completion, counts.cached), finish_reason)

    @staticmethod
    def _schema_grammar(schema: dict[str, Any]) -> Any:
        """llama.cpp's grammar of the JSON that ``schema`` admits."""
        from llama_cpp.llama_grammar import LlamaGrammar

        return LlamaGrammar.from_json_schema(json.dumps(_grammar_friendly(schema)), verbose=False)

    def _count_cache(self, counts: _Counts) -> None:
        """Add one generation's prompt tokens to the KV-cache hit rate (reused prefix = hits)."""
        self.cache_stats.hits += counts.cached
        self.cache_stats.misses += max(counts.prompt - counts.cached, 0)

    # --- tool calling ----------------------------------------------------------------------------

    def _formatter(self, name: str, llm: Any) -> tuple[Any, bool]:
        """The model's Jinja chat template as a formatter, and whether it renders ``tools``."""
        if name not in self._formatters:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise ServiceUnavailableError(f"model {name!r} has no chat template; tool calling needs one")
            eos, bos = llm.token_eos(), llm.token_bos()
            formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
                stop_token_ids=[eos],
            )
            self._formatters[name] = (formatter, "tools" in template)
        return self._formatters[name]

    def _stream_with_tools(self, name: str, llm: Any, counts: _Counts, messages: list[ChatMessage],
                           options: GenerationOptions) -> Iterator[StreamEvent]:
        mode, callable_tools = resolve_tool_choice(options)
        formatter, has_tools = self._formatter(name, llm)
        rendered = formatter(
            messages=template_messages(messages, options.tools, has_tools),
            tools=[t.openai() for t in options.tools] if has_tools else None,
        )
        stops = [s for s in ([rendered.stop] if isinstance(rendered.stop, str) else rendered.stop or [])]
        if mode == CALL:  # required, or a named tool: a call from the first token
            call = self._constrained_call(llm, rendered.prompt, stops, options, callable_tools)
            prompt_tokens, cached, generated = counts.prompt, counts.cached, counts.generated
            self._count_cache(counts)
            yield from self._call_events(name, call, TokenUsage(prompt_tokens, generated, cached))
            return
        # The request's threshold (the tool loop sets it from [tool_calling]) wins over the engine's.
        threshold = options.call_threshold if options.call_threshold is not None else self.call_threshold
        if threshold is None and (mode == AUTO or not options.tools):
            yield from self._stream_free(name, llm, counts, rendered.prompt, stops, options)
            return
        # Constrained: the prompt is evaluated once; its last logits decide call or answer.
        tokens = llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=True, special=True)
        logits, reused = _prompt_logits(llm, tokens)
        self.cache_stats.hits += reused
        self.cache_stats.misses += len(tokens) - reused
        first = self._first_tokens(name, llm)
        if mode == AUTO:
            self.last_call_probability = call_probability(logits, first.openers)
            calls = decide_call(self.last_call_probability, threshold or 0.0,
                                top_opens_call(logits, first.openers))
            log.debug("p_call %.3f, threshold %s: %s", self.last_call_probability, threshold,
                      "call" if calls else "answer")
            if calls:
                call = self._constrained_call(llm, tokens, stops, options, callable_tools)
                yield from self._call_events(name, call, TokenUsage(len(tokens), counts.generated, reused))
                return
        yield from self._stream_answer(name, llm, counts, tokens, logits, first, reused, stops, options)

    def call_odds(self, messages: list[ChatMessage], options: GenerationOptions) -> tuple[float, bool]:
        """The model's probability that its reply to ``messages`` with ``options.tools`` opens a call,
        and whether its likeliest first token does (what constrained ``auto`` decoding decides on),
        without generating."""
        name = self._resolve(options.model)
        llm = self.load(name)
        self.adapters.apply(name, llm, options.adapter)
        formatter, has_tools = self._formatter(name, llm)
        rendered = formatter(messages=template_messages(messages, options.tools, has_tools),
                             tools=[t.openai() for t in options.tools] if has_tools else None)
        tokens = llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=True, special=True)
        logits, _ = _prompt_logits(llm, tokens)
        openers = self._first_tokens(name, llm).openers
        return call_probability(logits, openers), top_opens_call(logits, openers)

    def _first_tokens(self, name: str, llm: Any) -> FirstTokens:
        """Which tokens open a call in this model's vocabulary (built once per model, ~0.5 s)."""
        if name not in self._first:
            from llama_cpp import llama_cpp as lib

            control = lib.LLAMA_TOKEN_ATTR_CONTROL
            self._first[name] = FirstTokens.build(
                llm.n_vocab(), lambda t: llm.detokenize([t], special=True),
                lambda t: bool(llm._model.token_get_attr(t) & control))
        return self._first[name]

    @staticmethod
    def _call_events(name: str, call: ToolCall | None, usage: TokenUsage) -> Iterator[StreamEvent]:
        if call is not None:
            yield ToolCalls((call,))
        yield Finished(name, usage, "tool_calls" if call else "length")

    def _stream_answer(self, name: str, llm: Any, counts: _Counts, tokens: list[int], logits: Any,
                       first: FirstTokens, reused: int, stops: list[str],
                       options: GenerationOptions) -> Iterator[StreamEvent]:
        """An answer whose first token (chosen here from the prompt's logits) cannot open a call; the
        rest streams from llama.cpp, which evaluates only that one token on top of the cached prompt."""
        token = choose_first(logits, first.banned, options.temperature)
        yield Delta(llm.detokenize([token], prev_tokens=tokens).decode("utf-8", errors="replace"))
        if options.max_tokens <= 1:  # llama.cpp reads max_tokens <= 0 as "no limit"
            yield Finished(name, TokenUsage(len(tokens), 1, reused), "length")
            return
        chunks = llm.create_completion([*tokens, token], temperature=options.temperature,
                                       max_tokens=options.max_tokens - 1, stop=stops, stream=True)
        finish_reason = "stop"
        try:
            for chunk in chunks:
                choice = chunk["choices"][0]
                if choice.get("text"):
                    yield Delta(choice["text"])
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"]
                if options.should_stop is not None and options.should_stop():
                    finish_reason = "cancelled"
                    break
        finally:
            chunks.close()
            generated = counts.generated
        completion = 1 + generated - (1 if finish_reason == "stop" and generated else 0)
        yield Finished(name, TokenUsage(len(tokens), completion, reused), finish_reason)

    def _stream_free(self, name: str, llm: Any, counts: _Counts, prompt: str, stops: list[str],
                     options: GenerationOptions) -> Iterator[StreamEvent]:
        """The model writes freely; a reply whose first characters open a call is decoded again as a
        call under the grammar (the behaviour before constrained decoding)."""
        chunks = llm.create_completion(
            prompt, temperature=options.temperature, max_tokens=options.max_tokens, stop=stops, stream=True,
        )
        # With no tools offered (the loop wants an answer now) every token is the answer.
        buffered, state, finish_reason = "", UNDECIDED if options.tools else ANSWER, "stop"
        prompt_tokens = cached = generated = 0
        try:
            for chunk in chunks:
                choice = chunk["choices"][0]
                text = choice.get("text") or ""
                if state == UNDECIDED:
                    buffered += text
                    state = classify_start(buffered)
                    if state == CALL:
                        break
                    if state != UNDECIDED and buffered:
                        yield Delta(buffered)
                elif text:
                    yield Delta(text)
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"]
                if options.should_stop is not None and options.should_stop():
                    finish_reason = "cancelled"
                    break
        finally:
            chunks.close()
            prompt_tokens, cached, generated = counts.prompt, counts.cached, counts.generated
            self._count_cache(counts)
        if state == UNDECIDED and buffered:
            yield Delta(buffered)  # a reply too short to tell is an answer
        if state != CALL:
            completion = generated - (1 if finish_reason == "stop" and generated else 0)
            yield Finished(name, TokenUsage(prompt_tokens, completion, cached), finish_reason)
            return
        call = self._constrained_call(llm, prompt, stops, options, options.tools)
        generated += counts.generated
        self._count_cache(counts)
        if call is not None:
            yield ToolCalls((call,))
        yield Finished(name, TokenUsage(prompt_tokens, generated, cached), "tool_calls" if call else "stop")

    def _constrained_call(self, llm: Any, prompt: str | list[int], stops: list[str], options: GenerationOptions,
                          tools: tuple[ToolSpec, ...]) -> ToolCall | None:
        """Decode a call under a grammar that admits only well-formed calls of ``tools``."""
        from llama_cpp.llama_grammar import LlamaGrammar

        grammar = LlamaGrammar.from_json_schema(json.dumps(call_schema(tools)), verbose=False)
        opened = (prompt + "<tool_call>\n" if isinstance(prompt, str)
                  else [*prompt, *llm.tokenize(b"<tool_call>\n", add_bos=False, special=True)])
        out = llm.create_completion(
            opened, grammar=grammar, temperature=options.temperature,
            max_tokens=options.max_tokens, stop=[*stops, "</tool_call>"],
        )
        text = out["choices"][0]["text"]
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            return None  # cut off by max_tokens: the loop reports a malformed call
        return ToolCall(f"call_{abs(hash(text)) % 10**8}", data["name"], data.get("arguments") or {})

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
        batch_threads=settings.batch_threads,
        batch_size=settings.batch_size,
        ubatch_size=settings.ubatch_size,
        cpu_variant=settings.cpu_variant,
    )
