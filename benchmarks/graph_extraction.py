"""Knowledge-graph extraction throughput: ``rules`` on every LoCoMo dev turn, ``llm`` with the
default embedded model on a sample.

Each turn of ``../shared/benchmarks/locomo/locomo_dev5.json`` (CC BY-NC 4.0: read in place, never
copied) becomes a passage as the memory store holds it (:func:`evaluation.memory_text`, the turn's
speaker as ``Passage.speaker``). ``rules`` extracts them all in one call; ``llm`` extracts an evenly
spaced sample (``--llm-sample``, 0 to skip) in batches of ``[knowledge_graph] batch_size`` through
an :class:`InferenceQueue` on the packaged Qwen2.5-Coder-0.5B (llama.cpp, grammar-constrained
JSON). Prints passages/s, what was found per passage, and the llm's failures, retries and dropped
facts; no timing is asserted.

    .venv/bin/python benchmarks/graph_extraction.py [--limit N] [--llm-sample 24] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import InferenceSettings, KnowledgeGraphSettings, Settings  # noqa: E402
from assistant.graph.extract.llm import LlmExtractor  # noqa: E402
from assistant.graph.extract.rules import RulesExtractor  # noqa: E402
from assistant.graph.types import RELATED, Extraction, Extractor, Passage  # noqa: E402
from assistant.llm.base import ChatModel  # noqa: E402
from assistant.llm.queue import InferenceQueue  # noqa: E402
from assistant.memory import evaluation  # noqa: E402


def load_passages(path: Path | None = None, conversations: int | None = None, limit: int | None = None) -> list[Passage]:
    turns = [t for c in evaluation.load(path, conversations) for t in c.turns]
    return [Passage(evaluation.memory_text(t), t.speaker, t.dia_id) for t in turns[:limit]]


def sample(passages: Sequence[Passage], n: int) -> list[Passage]:
    """``n`` passages evenly spaced over the list (deterministic)."""
    if n <= 0 or not passages:
        return []
    step = max(len(passages) / n, 1.0)
    return [passages[int(i * step)] for i in range(min(n, len(passages)))]


def describe(extractions: Sequence[Extraction]) -> dict[str, Any]:
    n = max(len(extractions), 1)
    facts = [f for e in extractions for f in e.facts if f.relation != RELATED]
    kinds = collections.Counter(e.kind.value for x in extractions for e in x.entities)
    return {
        "entities_per_passage": round(sum(len(e.entities) for e in extractions) / n, 2),
        "facts_per_passage": round(len(facts) / n, 3),
        "related_per_passage": round(sum(f.relation == RELATED for e in extractions for f in e.facts) / n, 2),
        "passages_with_facts": round(sum(any(f.relation != RELATED for f in e.facts) for e in extractions) / n, 3),
        "kinds": dict(kinds.most_common()),
        "relations": dict(collections.Counter(f.relation for f in facts).most_common(12)),
    }


def measure(extractor: Extractor, passages: Sequence[Passage], batch: int | None = None) -> dict[str, Any]:
    """Extract ``passages`` (in calls of ``batch``, with a progress line each, or in one call)."""
    start = time.perf_counter()
    extractions: list[Extraction] = []
    size = batch or max(len(passages), 1)
    for first in range(0, len(passages), size):
        extractions += extractor.extract(passages[first:first + size])
        if batch:
            print(f"  {extractor.id}: {len(extractions)}/{len(passages)} passages, "
                  f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - start
    counters = extractor.counters() if hasattr(extractor, "counters") else {}
    return {
        "extractor": extractor.id,
        "passages": len(passages),
        "seconds": round(seconds, 3),
        "passages_per_s": round(len(passages) / seconds, 3) if seconds > 0 else None,
        **{k: v for k, v in counters.items() if k in ("failures", "retries", "dropped_facts")},
        **describe(extractions),
    }


def default_model(threads: int) -> ChatModel:
    from assistant.llm.catalog import DEFAULT_MODEL, install_model
    from assistant.llm.llama_cpp import LlamaCppChatModel

    data_dir = Settings().data_dir
    path = install_model(DEFAULT_MODEL, data_dir)  # sha256-checked; already there after `make setup`
    return LlamaCppChatModel(DEFAULT_MODEL, data_dir, model_path=path, threads=threads)


def measure_llm(model: ChatModel, passages: Sequence[Passage], batch_size: int, max_tokens: int) -> dict[str, Any]:
    # Generous deadlines: on a busy two-core machine the 0.5B model writes a few tokens a second.
    queue = InferenceQueue(model, queue_timeout_secs=600, request_timeout_secs=1800)
    extractor = LlmExtractor(queue, batch_size=batch_size, max_tokens_per_passage=max_tokens,
                             max_tokens=max(max_tokens, 2048), timeout_secs=3600)
    try:
        return {**measure(extractor, passages, batch=batch_size), "batch_size": batch_size}
    finally:
        extractor.close()
        queue.close()


def main(argv: list[str] | None = None, *, model: ChatModel | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="path of locomo_dev5.json")
    parser.add_argument("--conversations", type=int, default=None, help="how many conversations (default all)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many turns for rules")
    parser.add_argument("--llm-sample", type=int, default=24, help="turns for the llm (0: skip it)")
    graph = KnowledgeGraphSettings()
    parser.add_argument("--batch-size", type=int, default=graph.batch_size)
    parser.add_argument("--max-tokens", type=int, default=graph.llm_max_tokens, help="per passage")
    parser.add_argument("--threads", type=int, default=InferenceSettings().threads)
    parser.add_argument("--json", action="store_true", help="also print one machine-readable JSON line")
    args = parser.parse_args(argv)

    passages = load_passages(args.data, args.conversations, args.limit)
    report: dict[str, Any] = {"turns": len(passages)}
    report["rules"] = measure(RulesExtractor(), passages)
    rules = report["rules"]
    print(f"rules: {rules['passages']} passages in {rules['seconds']:.2f} s = {rules['passages_per_s']:.0f} "
          f"passages/s; {rules['entities_per_passage']} entities, {rules['facts_per_passage']} facts, "
          f"{rules['related_per_passage']} co-occurrence edges per passage")
    print(f"       relations: {rules['relations']}")
    chosen = sample(passages, args.llm_sample)
    if chosen:
        llm = measure_llm(model or default_model(args.threads), chosen, args.batch_size, args.max_tokens)
        report["llm"] = llm
        print(f"llm:   {llm['passages']} passages in {llm['seconds']:.1f} s = {llm['passages_per_s']:.3f} passages/s "
              f"(batches of {llm['batch_size']}); failures {llm['failures']}, retries {llm['retries']}, "
              f"dropped facts {llm['dropped_facts']}; {llm['entities_per_passage']} entities, "
              f"{llm['facts_per_passage']} facts per passage")
        print(f"       relations: {llm['relations']}")
        if rules["passages_per_s"] and llm["passages_per_s"]:
            report["rules_over_llm"] = round(rules["passages_per_s"] / llm["passages_per_s"], 1)
            print(f"rules / llm throughput: {report['rules_over_llm']}x")
    if args.json:
        print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
