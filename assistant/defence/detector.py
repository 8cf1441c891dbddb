"""The layered detector: normalise once, run every layer over the forms, combine.

Combination: the verdict's score is the highest suspicion any layer gave (a static or dynamic pattern
counts 1.0, hidden characters 0.7, the classifier its probability; a pattern found in a decoded form
also counts 1.0: instructions hidden in base64/rot13/leetspeak are never innocent); flagged when the
score reaches the threshold of the text's source (``threshold`` for the user's messages,
``indirect_threshold`` for indirect content: build_detector takes the latter from the classifier's
cross-validated value). The verdict lists the hits that reached the threshold, in the order the
layers ran, with their spans in the original text. In the uncertain band [judge_low, judge_high), when
no pattern fired and a judge is configured, the engine decides (its failure changes nothing).

Thread-safe: layers are read-only after construction (the dynamic layer's compile cache is locked).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from assistant.defence.normalise import normalise
from assistant.defence.types import Hit, Layer, Normalised, Source, Verdict

MEMORY_CLASSIFIER_MIN_WORDS = 12  # shorter memories are flagged by patterns, never by the classifier alone


class LayeredDetector:
    """``threshold`` applies to the user's messages, ``indirect_threshold`` (default: ``threshold``)
    to indirect content (tool results, memories, mail, web pages, documents)."""

    def __init__(self, layers: Sequence, threshold: float = 0.5, judge=None,
                 judge_band: tuple[float, float] = (0.35, 0.65), indirect_threshold: float | None = None):
        self.layers = list(layers)
        self.threshold = threshold
        self.indirect_threshold = threshold if indirect_threshold is None else indirect_threshold
        self.judge = judge
        self.judge_band = judge_band
        self.inspected = 0
        self.flagged = 0
        self._lock = threading.Lock()

    def inspect(self, text: str, source: Source = Source.USER, user_id: str | None = None) -> Verdict:
        return self.inspect_many([text], source, user_id)[0]

    def inspect_many(self, texts: Sequence[str], source: Source = Source.USER,
                     user_id: str | None = None) -> list[Verdict]:
        """Verdicts for many texts from one source; the classifier scores them in one batch."""
        source = Source(source)
        norms = [normalise(t if isinstance(t, str) else str(t)) for t in texts]
        hits: list[list[Hit]] = [list(n.hits) for n in norms]
        for layer in self.layers:
            if hasattr(layer, "score_units"):
                self._classify(layer, norms, source, hits)
            else:
                for i, n in enumerate(norms):
                    hits[i].extend(layer.check(n, source, user_id))
        verdicts = [self._combine(n, h, source) for n, h in zip(norms, hits, strict=True)]
        with self._lock:
            self.inspected += len(verdicts)
            self.flagged += sum(v.flagged for v in verdicts)
        return verdicts

    @staticmethod
    def _classify(layer, norms: Sequence[Normalised], source: Source, hits: list[list[Hit]]) -> None:
        per_text = [layer.units(n, source) for n in norms]
        flat = [u for us in per_text for u in us]
        probs = layer.score_units(flat)
        at = 0
        for i, us in enumerate(per_text):
            hits[i].extend(layer.hits_for(us, probs[at:at + len(us)]))
            at += len(us)

    def threshold_for(self, source: Source) -> float:
        return self.indirect_threshold if Source(source).indirect else self.threshold

    def _combine(self, norm: Normalised, hits: list[Hit], source: Source) -> Verdict:
        threshold = self.threshold_for(source)
        score = max((h.score for h in hits), default=0.0)
        low, high = self.judge_band
        patterns = any(h.layer in (Layer.STATIC, Layer.DYNAMIC) for h in hits)
        if self.judge is not None and not patterns and low <= score < high:
            answer = self.judge.ask(norm.text, source.indirect)
            if answer is not None:
                if answer.injection:
                    score = max(score, high, threshold)
                    hits.append(Hit(Layer.JUDGE, "judge", answer.reason or "the engine judged it an injection",
                                    None, score))
                else:
                    score = max(0.0, min(score, low, threshold - 0.01))
        fired = tuple(h for h in hits if h.score >= threshold)
        if (source is Source.MEMORY and fired and all(h.layer is Layer.CLASSIFIER for h in fired)
                and len(norm.text.split()) < MEMORY_CLASSIFIER_MIN_WORDS):
            # a short memory is most often the user's own sentence, learned from chat ("I prefer green
            # tea over coffee" scored 0.94): the classifier alone does not flag it (patterns still do)
            return Verdict(False, min(1.0, score), (), source)
        return Verdict(score >= threshold, min(1.0, score), fired, source)
