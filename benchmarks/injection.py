"""The prompt-injection defence on the HELD-OUT split (benchmarks/_injection_data.py: 30 % of every
source by a hash of its text; the classifier was trained on the other 70 % only).

    PYTHONPATH=. python benchmarks/injection.py [--limit N] [--ngram-only] [--lco]

The decision rule is the shipped one (assistant.defence.build): user messages flagged from 0.5,
indirect content from the classifier's indirect threshold, which benchmarks/train_injection.py chose
(with the regularisation C) by 5-fold cross-validation on the TRAIN split and stored in the weights
file; both are printed first. ``--threshold T`` applies one threshold to every source instead.

Prints: detection rate on attacks (dev_attacks, BIPIA attacks inside held-out email contexts,
generated variants of held-out attacks), false-positive rate on NotInject, clean BIPIA contexts and
LoCoMo turns (as memories and as user messages), per-layer contribution (flags by each layer alone,
the marginal gain in order), ms per text (batched and one at a time), and one line with all the data,
clearly labelled as including training data. ``--lco`` also fits a model with a third of the BIPIA
categories left out and reports BIPIA detection on those unseen categories. Figures only: nothing
is asserted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.defence.classifier import ClassifierLayer, load_models  # noqa: E402
from assistant.defence.detector import LayeredDetector  # noqa: E402
from assistant.defence.dynamic import DynamicLayer  # noqa: E402
from assistant.defence.static import StaticLayer  # noqa: E402
from assistant.defence.types import Layer, Source  # noqa: E402
from benchmarks import _injection_data as D  # noqa: E402
from benchmarks.train_injection import all_examples, variant_examples  # noqa: E402

ORDER = (Layer.NORMALISATION, Layer.STATIC, Layer.DYNAMIC, Layer.CLASSIFIER)


def evaluation_sets(split: str, limit: int | None, keep=None) -> dict[str, list[D.Example]]:
    """The benchmark's sets of ``split`` ("held_out", "train" or "all"); ``keep(text)`` restricts
    every source text further (a cross-validation fold of the train split)."""
    def take(xs):
        xs = [x for x in xs if (split == "all" or x.split == split) and (keep is None or keep(x.text))]
        return xs[:limit] if limit else xs

    dev = take(D.dev_attacks())
    bipia = take(D.bipia_attacks())
    contexts = [c for c in D.bipia_contexts() if keep is None or keep(c)]
    in_context = D.bipia_in_context(bipia, contexts, split) if split != "all" else \
        D.bipia_in_context([x for x in bipia if x.split == "train"], contexts, "train") + \
        D.bipia_in_context([x for x in bipia if x.split == "held_out"], contexts, "held_out")
    if limit:
        in_context = in_context[::max(1, len(in_context) // (limit * 3))]
    loc = take(D.locomo_turns())
    return {
        "attack: dev_attacks (user)": dev,
        "attack: BIPIA in email context": in_context,
        "attack: generated variants": variant_examples(dev + [x for x in bipia if x.corpus == "bipia_text"]),
        "benign: NotInject (user)": take(D.notinject()),
        "benign: clean BIPIA emails": take(D.clean_contexts()),
        "benign: LoCoMo turns (memory)": loc,
        "benign: LoCoMo turns (user)": [D.Example(x.text, 0, Source.USER, "locomo_as_user", x.split) for x in loc],
        "benign: BIPIA instructions (user)": [D.Example(x.text, 0, Source.USER, "bipia_as_user", x.split) for x in bipia],
    }


def run(detector: LayeredDetector, examples: list[D.Example]) -> tuple[list, float]:
    by_source: dict[Source, list[int]] = defaultdict(list)
    for i, e in enumerate(examples):
        by_source[e.source].append(i)
    verdicts: list = [None] * len(examples)
    t = time.perf_counter()
    for source, idx in by_source.items():
        for start in range(0, len(idx), 64):
            chunk = idx[start:start + 64]
            for i, v in zip(chunk, detector.inspect_many([examples[i].text for i in chunk], source), strict=True):
                verdicts[i] = v
    return verdicts, (time.perf_counter() - t) * 1000


def report(name: str, detector: LayeredDetector, sets: dict[str, list[D.Example]], per_layer: bool = True,
           cached: bool = False) -> None:
    print(f"\n== {name} ==")
    total_ms = total_n = 0
    for label, examples in sets.items():
        if not examples:
            continue
        verdicts, ms = run(detector, examples)
        total_ms += ms
        total_n += len(examples)
        flagged = sum(v.flagged for v in verdicts)
        rate = flagged / len(examples)
        what = "detected" if label.startswith("attack") else "flagged (false positives)"
        line = f"{label:40s} {flagged:5d}/{len(examples):<5d} {rate:7.1%} {what}"
        if per_layer:
            alone = {layer: sum(layer in v.layers for v in verdicts) for layer in ORDER}
            seen: set[int] = set()
            gains = []
            for layer in ORDER:
                new = {i for i, v in enumerate(verdicts) if layer in v.layers} - seen
                seen |= new
                gains.append(f"+{len(new)}")
            line += "  | alone " + " ".join(f"{la.value[:4]}={alone[la]}" for la in ORDER)
            line += "  | gain in order " + " ".join(gains)
        print(line)
    if total_n:
        note = " (MiniLM vectors from the run cache: not a latency)" if cached else ""
        print(f"{'batched time':40s} {total_ms / total_n:.2f} ms/text over {total_n} texts{note}")


def one_at_a_time(detector: LayeredDetector, examples: list[D.Example], n: int = 60) -> None:
    sample = examples[:: max(1, len(examples) // n)][:n]
    t = time.perf_counter()
    for e in sample:
        detector.inspect(e.text, e.source)
    print(f"{'one text at a time':40s} {(time.perf_counter() - t) * 1000 / len(sample):.2f} ms/text "
          f"over {len(sample)} texts (mean length {sum(len(e.text) for e in sample) / len(sample):.0f} chars)")


def leave_categories_out(limit: int | None, embedder) -> None:
    """Fit on the train split without a third of the BIPIA categories; BIPIA detection on those."""
    from assistant.defence.classifier import Model
    from benchmarks.train_injection import fit

    categories = sorted({x.category for x in D.bipia_attacks()})
    unseen = frozenset(c for c in categories if D.split_of(c, "lco") == "held_out")
    print(f"\n== leave-categories-out: {len(unseen)} of {len(categories)} BIPIA categories unseen in training ==")
    print("   unseen:", ", ".join(sorted(unseen)))
    shipped = load_models()["full"]
    c = float(load_c("full")) if load_c("full") != "?" else 4.0
    chunk = shipped.chunk_chars
    weights = fit(all_examples("train", limit, exclude_categories=unseen), embedder, log=print, c=c, chunk_chars=chunk)
    models = {"full": Model(weights["full_coef"], float(weights["full_intercept"]), True, shipped.indirect_threshold, chunk),
              "ngram": Model(weights["ngram_coef"], float(weights["ngram_intercept"]), False, None, chunk)}
    attacks = [x for x in D.bipia_attacks() if x.category in unseen]
    sets = {"attack: unseen-category BIPIA in context": D.bipia_in_context(
        [D.Example(a.text, 1, a.source, a.corpus, "held_out", a.family, a.category) for a in attacks],
        D.bipia_contexts(), "held_out")}
    detector = LayeredDetector([StaticLayer(), DynamicLayer(None), ClassifierLayer(embedder, models)], 0.5,
                               indirect_threshold=shipped.indirect_threshold)
    print(f"   (the shipped model's cross-validated C={c:g}, chunk_chars={chunk}, indirect threshold "
          f"{shipped.indirect_threshold})")
    report("leave-categories-out (held-out contexts, unseen categories)", detector, sets, cached=True)


def load_c(name: str) -> str:
    import numpy as np

    from assistant.defence.classifier import WEIGHTS

    data = np.load(WEIGHTS)
    return f"{float(data[f'{name}_c']):g}" if f"{name}_c" in data else "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N of each corpus (quick runs)")
    ap.add_argument("--ngram-only", action="store_true", help="skip the MiniLM classifier variant")
    ap.add_argument("--lco", action="store_true", help="also fit and report the leave-categories-out split")
    ap.add_argument("--threshold", type=float, default=None,
                    help="one threshold for every source (default: 0.5 for user messages, the classifier's "
                         "cross-validated threshold for indirect content, as build_detector does)")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/injection_embeddings.pkl"),
                    help="MiniLM vectors kept between runs (outside the repo); timings use the raw embedder")
    args = ap.parse_args(argv)
    models = load_models()
    user_threshold = 0.5 if args.threshold is None else args.threshold
    print("Decision rule (chosen by 5-fold cross-validation on the TRAIN split by benchmarks/train_injection.py, "
          "stored in the weights file; the held-out split chose nothing):")
    for name, model in models.items():
        c = load_c(name)
        print(f"  {name:5s} model: C={c}, chunk_chars={model.chunk_chars}, indirect threshold "
              f"{model.indirect_threshold}, user threshold {user_threshold}"
              + ("" if args.threshold is None else f" (overridden: --threshold {args.threshold} for every source)"))
    held_out = evaluation_sets("held_out", args.limit)
    variants_ = [("n-grams only (no embedder)", None, None)]
    cache = None
    if not args.ngram_only:
        from benchmarks.train_injection import EmbedCache, minilm

        raw = minilm()
        cache = EmbedCache(raw, args.cache)
        variants_.insert(0, ("MiniLM + n-grams", cache, raw))

    def detector_for(embedder, layers=None) -> LayeredDetector:
        classifier = ClassifierLayer(embedder, models)
        indirect = classifier.indirect_threshold if args.threshold is None else args.threshold
        return LayeredDetector(layers or [StaticLayer(), DynamicLayer(None), classifier], user_threshold,
                               indirect_threshold=indirect)

    for name, embedder, raw in variants_:
        detector = detector_for(embedder)
        what = f"thresholds user {detector.threshold:g} / indirect {detector.indirect_threshold:g}"
        report(f"HELD-OUT, {name}, {what}", detector, held_out, cached=raw is not None)
        if cache is not None:
            cache.save()
        timed = detector_for(raw)
        one_at_a_time(timed, held_out["attack: dev_attacks (user)"] + held_out["benign: NotInject (user)"]
                      + held_out["benign: clean BIPIA emails"])
        patterns = LayeredDetector([StaticLayer()], user_threshold)
        if embedder is not None or args.ngram_only:
            report("HELD-OUT, static patterns alone (the PiSovereign-style baseline)", patterns, held_out, per_layer=False)
            everything = evaluation_sets("all", args.limit)
            report(f"ALL DATA (INCLUDES THE TRAINING DATA: not a held-out figure), {name}, {what}", detector,
                   everything, per_layer=False, cached=raw is not None)
            if cache is not None:
                cache.save()
    if args.lco and cache is not None:
        leave_categories_out(args.limit, cache)
        cache.save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
