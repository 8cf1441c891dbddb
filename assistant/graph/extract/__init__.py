"""Extractors of entities and facts (the :class:`~assistant.graph.types.Extractor` protocol) and their
registry: a stable id -> a factory, chosen by ``[knowledge_graph] extractor``.

- ``rules`` (:mod:`.rules`): no model; keyphrases, capitalised spans, speakers, dates, first-person
  fact patterns, co-occurrence edges.
- ``llm`` (:mod:`.llm`): the configured engine with a JSON schema, batched; built as a
  :class:`FallbackExtractor` whose batches go to ``rules`` while the engine is unavailable.
- ``auto`` (the default): ``llm`` when the inference backend is an engine server of its own
  (:data:`LLM_ENGINES`: Ollama, an OpenAI-compatible server), else ``rules``. Not the embedded
  llama.cpp model: measured on two cores (benchmarks/graph_extraction.py), the packaged 0.5B model
  extracted 0.016 passages/s with few usable facts, and each batch holds the one engine for minutes,
  so chat would wait behind the graph; ``extractor = "llm"`` still chooses it explicitly.

Every extractor counts ``calls``, ``passages``, ``failures`` and ``seconds`` (``counters()``), which
the graph exports as metrics; the fallback adds ``fallbacks``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from assistant.config import InferenceSettings, KnowledgeGraphSettings, Settings
from assistant.errors import ConfigError, ServiceUnavailableError
from assistant.graph.extract.common import Counters
from assistant.graph.types import Extraction, Extractor, Passage

log = logging.getLogger("assistant.graph")

AUTO = "auto"
LLM_ENGINES = frozenset({"ollama", "openai"})  # inference backends "auto" extracts with (see above)


@dataclass(frozen=True)
class ExtractorDeps:
    """What a factory may use: the graph's and the engine's settings, and the inference queue
    (None where no engine is running)."""

    settings: KnowledgeGraphSettings
    inference: InferenceSettings
    queue: Any = None  # assistant.llm.queue.InferenceQueue | None


Factory = Callable[[ExtractorDeps], Extractor]

# id -> "module:function"; resolved lazily so `import assistant.graph` stays light.
_EXTRACTORS: dict[str, str] = {
    "rules": "assistant.graph.extract:create_rules",
    "llm": "assistant.graph.extract:create_llm",
}


def register_extractor(extractor_id: str, target: str) -> None:
    """Add an extractor: ``target`` is ``"package.module:factory"`` taking :class:`ExtractorDeps`."""
    _EXTRACTORS[extractor_id] = target


def extractor_ids() -> list[str]:
    return sorted(_EXTRACTORS)


def resolve_id(settings: KnowledgeGraphSettings, inference: InferenceSettings) -> str:
    """The extractor ``settings.extractor`` names, with ``auto`` resolved."""
    wanted = settings.extractor.strip().lower()
    if wanted == AUTO:
        return "llm" if inference.backend in LLM_ENGINES else "rules"
    if wanted not in _EXTRACTORS:
        raise ConfigError(f"unknown knowledge-graph extractor {settings.extractor!r}; "
                          f"known extractors: {', '.join([AUTO, *extractor_ids()])}")
    return wanted


def get_factory(extractor_id: str) -> Factory:
    try:
        target = _EXTRACTORS[extractor_id]
    except KeyError:
        raise ConfigError(f"unknown knowledge-graph extractor {extractor_id!r}; "
                          f"known extractors: {', '.join([AUTO, *extractor_ids()])}") from None
    module, _, name = target.partition(":")
    return getattr(import_module(module), name)


def create_extractor(settings: Settings, queue: Any = None) -> tuple[Extractor, Extractor | None]:
    """The configured extractor and the one that takes a batch it fails on (None for ``rules``).
    ``queue`` is the :class:`~assistant.llm.queue.InferenceQueue` (``llm`` needs it; ``auto``
    without one is ``rules``).

    ``llm`` is a :class:`FallbackExtractor` that already hands a batch to its ``rules`` while the
    engine is unavailable (counting ``fallbacks``); that same ``rules`` extractor is returned as the
    fallback, for any other error of the primary and so that its counters are reported."""
    graph, inference = settings.knowledge_graph, settings.inference
    extractor_id = resolve_id(graph, inference)
    if extractor_id == "llm" and queue is None:
        if graph.extractor.strip().lower() != AUTO:
            raise ConfigError("the 'llm' knowledge-graph extractor needs the inference engine")
        extractor_id = "rules"
    extractor = get_factory(extractor_id)(ExtractorDeps(graph, inference, queue))
    return extractor, getattr(extractor, "fallback", None)


def create_rules(deps: ExtractorDeps) -> Extractor:
    from assistant.graph.extract.rules import RulesExtractor

    return RulesExtractor()


def create_llm(deps: ExtractorDeps) -> Extractor:
    from assistant.graph.extract.llm import LlmExtractor
    from assistant.graph.extract.rules import RulesExtractor

    settings = deps.settings
    engine = LlmExtractor(deps.queue, batch_size=settings.batch_size, max_tokens_per_passage=settings.llm_max_tokens,
                          max_tokens=max(settings.llm_max_tokens, min(4096, deps.inference.context_length // 2)),
                          timeout_secs=deps.inference.queue_timeout_secs + deps.inference.request_timeout_secs + 30)
    return FallbackExtractor(engine, RulesExtractor())


class FallbackExtractor(Counters):
    """``primary`` first; a batch it cannot do because its backend is unavailable (it raised
    :class:`ServiceUnavailableError`: engine down, circuit open, timed out) goes to ``fallback``,
    and ``fallbacks`` counts such batches. ``failures`` is the primary's skipped passages (the
    fallback counts its own)."""

    counter_names = (*Counters.counter_names, "fallbacks")

    def __init__(self, primary: Extractor, fallback: Extractor):
        super().__init__()
        self.primary = primary
        self.fallback = fallback
        self.id = primary.id
        self.fallbacks = 0

    def extract(self, passages: Sequence[Passage]) -> list[Extraction]:
        size = max(int(getattr(self.primary, "batch_size", 0) or len(passages) or 1), 1)
        out: list[Extraction] = []
        with self._timed(len(passages)):
            for start in range(0, len(passages), size):
                batch = passages[start:start + size]
                try:
                    out += self.primary.extract(batch)
                except ServiceUnavailableError as exc:
                    log.warning("knowledge-graph extractor %r unavailable (%s): %d passages to %r",
                                self.primary.id, exc.message, len(batch), self.fallback.id)
                    self._count("fallbacks")
                    out += self.fallback.extract(batch)
            self.failures = getattr(self.primary, "failures", 0)
        return out

    def bind_loop(self, loop: Any) -> None:
        """Pass the server's event loop to the primary (see :meth:`LlmExtractor.bind_loop`)."""
        if hasattr(self.primary, "bind_loop"):
            self.primary.bind_loop(loop)

    def close(self) -> None:
        for extractor in (self.primary, self.fallback):
            if hasattr(extractor, "close"):
                extractor.close()
