"""Whether a new adapter may become the user's active adapter.

Two measurements, each the **mean negative log-likelihood of the reference answers** (nats per answer
token, averaged over the samples; the prompt's tokens are not scored), under three models: the base
model, the user's current active adapter (when there is one) and the candidate:

1. **held-back feedback**: ``lora.held_out_fraction`` (0.2) of the user's samples, chosen by a hash of
   each sample's id (:func:`split`), so a held-back sample is held back in every run and never trained
   on; at most ``lora.eval_max_samples`` are scored. The reference is what serves the user now: the
   active adapter, or the base model before the first.
2. **the regression set** shipped with the package (``assistant/learning/data/regression_set.json``):
   20 prompt/answer pairs written for this project (general questions, and tool calls in the project's
   own ``{"name", "arguments"}`` JSON format); no benchmark data.

The rule (:func:`decide`): activate only when the candidate's held-back NLL is **strictly lower** than
the reference's AND its regression NLL is at most the **base model's** times ``1 + lora.regression_tolerance``
(0.05). The regression set is anchored to the base model, not to the previous adapter, so successive
adapters cannot drift 5 % at a time. Without held-back samples nothing shows the adapter is better:
rejected. After the GGUF conversion a smoke check (:func:`engine_smoke_check`) loads the base model with the
adapter in llama-cpp (through the engine's own per-request adapter code) and generates a few tokens; a failure fails the run (nothing activated).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from assistant.learning.feedback import LabelledSample
from assistant.learning.types import TrainingSample

REGRESSION_FILE = "regression_set.json"
BASE, ACTIVE, CANDIDATE = "base", "active", "candidate"


class Scorer(Protocol):
    """Mean answer NLL of each named sample set under the base model with each adapter (None: the base
    alone): ``{set: {adapter: nll}}``; the model is loaded once for all of them."""

    def nll(self, base_model: Path, sets: Mapping[str, Sequence[TrainingSample]],
            adapters: Mapping[str, Path | None]) -> dict[str, dict[str, float]]: ...


SmokeCheck = Callable[[Path, Path], str]  # (base GGUF, adapter GGUF) -> the generated text


def regression_set() -> list[TrainingSample]:
    """The packaged regression set (see the module docstring)."""
    text = resources.files("assistant.learning").joinpath("data", REGRESSION_FILE).read_text(encoding="utf-8")
    return [TrainingSample(tuple(item["messages"]), item["answer"], "file") for item in json.loads(text)["items"]]


def _unit(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def split(samples: Sequence[LabelledSample], fraction: float) -> tuple[list[LabelledSample], list[LabelledSample]]:
    """``(train, held_back)``: a sample is held back when the hash of its key falls under ``fraction``.
    With two samples or more each side gets at least one (the lowest hash is held back, the highest
    trained on); a single sample is trained on."""
    ranked = sorted(samples, key=lambda s: _unit(s.key))
    held = [s for s in ranked if _unit(s.key) < fraction]
    if len(ranked) >= 2:
        if not held:
            held = ranked[:1]
        if len(held) == len(ranked):
            held = held[:-1]
    keys = {s.key for s in held}
    return [s for s in samples if s.key not in keys], [s for s in samples if s.key in keys]


@dataclass(frozen=True)
class Decision:
    activate: bool
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)


def decide(held: Mapping[str, float] | None, regression: Mapping[str, float], tolerance: float) -> Decision:
    """The activation rule (module docstring). ``held``/``regression`` map ``base``, ``candidate`` and,
    when the user has one, ``active`` to a mean NLL; ``held`` None: no held-back samples."""
    reference = ACTIVE if ACTIVE in regression else BASE
    limit = regression[BASE] * (1 + tolerance)
    metrics: dict[str, Any] = {"reference": reference, "regression": dict(regression),
                               "regression_limit": round(limit, 6), "tolerance": tolerance,
                               "held_out": None if held is None else dict(held)}
    if held is None:
        return Decision(False, "no held-back samples to show the adapter is better", metrics)
    better = held[CANDIDATE] < held[reference]
    kept = regression[CANDIDATE] <= limit
    metrics.update(held_out_gain=round(held[reference] - held[CANDIDATE], 6),
                   regression_change=round(regression[CANDIDATE] / regression[BASE] - 1, 6) if regression[BASE] else None)
    if not better:
        return Decision(False, f"not better on the held-back feedback: NLL {held[CANDIDATE]:.4f} vs {held[reference]:.4f} "
                               f"({reference})", metrics)
    if not kept:
        return Decision(False, f"worse on the regression set: NLL {regression[CANDIDATE]:.4f} above the limit {limit:.4f} "
                               f"(base {regression[BASE]:.4f} + {tolerance:.0%})", metrics)
    return Decision(True, f"better on the held-back feedback (NLL {held[CANDIDATE]:.4f} vs {held[reference]:.4f}, "
                          f"{reference}) and within {tolerance:.0%} of the base on the regression set", metrics)


class PeftScorer:
    """The real :class:`Scorer`: the base GGUF in transformers, each peft adapter loaded onto it by name."""

    def __init__(self, max_seq_tokens: int = 512, threads: int = 1):
        self.max_seq_tokens = max_seq_tokens
        self.threads = threads

    def nll(self, base_model: Path, sets: Mapping[str, Sequence[TrainingSample]],
            adapters: Mapping[str, Path | None]) -> dict[str, dict[str, float]]:
        from assistant.learning.hf import answer_nll, encode, load_base, torch_threads

        sets = {name: samples for name, samples in sets.items() if samples}
        if not sets:
            return {}
        with torch_threads(self.threads):
            model, tokenizer = load_base(Path(base_model))
            encoded = {name: [encode(tokenizer, s, self.max_seq_tokens) for s in samples]
                       for name, samples in sets.items()}
            out: dict[str, dict[str, float]] = {name: {} for name in sets}
            named = {name: path for name, path in adapters.items() if path is not None}
            if named:
                from peft import PeftModel

                first, *rest = named.items()
                model = PeftModel.from_pretrained(model, str(first[1]), adapter_name=first[0])
                for name, path in rest:
                    model.load_adapter(str(path), adapter_name=name)
                model.eval()
            for name, path in adapters.items():
                if path is not None:
                    model.set_adapter(name)
                with model.disable_adapter() if path is None and named else contextlib.nullcontext():
                    for set_name, items in encoded.items():
                        out[set_name][name] = _mean([answer_nll(model, ids, labels) for ids, labels in items])
            return out


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 6) if values else float("nan")


def engine_smoke_check(threads: int = 1, max_tokens: int = 8) -> SmokeCheck:
    """A :data:`SmokeCheck` through the engine's own code: a :class:`~assistant.llm.llama_cpp.LlamaCppChatModel`
    of the base GGUF answers a short question with ``GenerationOptions.adapter`` set to the new adapter
    (llama.cpp puts it on the context for that request); the text (non-empty) is returned, a failure
    raises. The engine instance is private to the check and freed after it."""

    def check(base_model: Path, adapter: Path) -> str:
        from assistant.llm.base import ChatMessage, GenerationOptions, collect
        from assistant.llm.llama_cpp import LlamaCppChatModel

        base_model = Path(base_model)
        engine = LlamaCppChatModel(base_model.stem, base_model.parent, model_path=base_model, threads=threads,
                                   context_length=512)
        try:
            result = collect(engine.stream([ChatMessage("user", "Say hello.")],
                                           GenerationOptions(temperature=0.0, max_tokens=max_tokens,
                                                             adapter=str(adapter))))
        finally:
            for name, (llm, _) in list(engine._loaded.items()):  # the engine has no public unload
                engine.adapters.release_model(name, llm)
                llm.close()
            engine._loaded.clear()
        text = result.content.strip() or " ".join(c.name for c in result.tool_calls)
        if not text:
            raise RuntimeError("the base model with the adapter generated nothing")
        return text

    return check
