"""Train the defence classifier (assistant/defence/data/classifier.npz) on the TRAIN split only.

    PYTHONPATH=. python benchmarks/train_injection.py [--limit N] [--out PATH] [--cache /tmp/vectors.pkl]

Data recipe: benchmarks/_injection_data.py (every source split 70/30 by a hash of its text before
anything is fitted; the held-out 30 % is what benchmarks/injection.py reports). Training units are
exactly what the detector scores at run time (assistant.defence.classifier.units: the user's text
whole, indirect content per chunk, decoded forms), labelled by their example; in an attack placed
inside content only the chunks that overlap the attack are positive. Requests to an assistant (the
train split's NotInject prompts and benign.txt) are user-source negatives AND, placed inside an email
context or a web page/tool result/document wrapper, indirect positives (BIPIA's threat model: any
instruction inside content is an injection). Each corpus gets a fixed share
of the sample weight, so the 2,000 LoCoMo turns do not drown the 240 NotInject prompts.

Decision rule by cross-validation (skipped with --no-cv): the train split's source texts are cut
into 5 folds by a hash (D.fold_of: an attack, its variants and its copies inside emails share a
fold; so do a context and the emails built on it); for each fold, each C in C_VALUES and each
unit size of indirect content in CHUNK_VALUES, both models are fitted on the other 4 folds and the
fold's benchmark sets are scored. On the pooled out-of-fold scores, the full model's (C,
chunk_chars, indirect threshold) with the highest recall on BIPIA attacks inside emails is chosen
such that clean emails and LoCoMo turns as memories each stay <= 2 % flagged and NotInject (user
messages, threshold 0.5) <= 5 %; ties go to the higher threshold. When no setting is within those
budgets (the case with this data: at least 3 of the 41 clean train emails are flagged at every
threshold that keeps 95 % recall), the fallback is the setting that reaches TARGET_RECALL (95 %)
with the lowest worst benign-indirect false-positive rate. The n-gram model then chooses its C and
threshold the same way with the full model's chunk_chars. The trade-off curves are printed. The
models are refitted on the whole train split with the chosen values, and the file stores
``<model>_c``, ``<model>_indirect_threshold`` and ``chunk_chars`` next to the weights. The held-out
split is never read here. Full run: about 8 minutes on 2 cores (--cache keeps the MiniLM vectors).

Two models are fitted with the same data and seed: ``full`` (n-grams + MiniLM vectors) and
``ngram`` (n-grams only, the fallback without the embedder). scikit-learn's liblinear with a fixed
random_state: the same data gives the same weights. Writes nothing but the weights file.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assistant.defence.classifier import BUCKETS, CHUNK_CHARS, EMBED_CHARS, EMBED_DIM, WEIGHTS, Unit, hash_ngrams, units  # noqa: E402
from assistant.defence.normalise import normalise  # noqa: E402
from assistant.defence.types import Source  # noqa: E402
from assistant.defence.variants import WRAPPERS, variants  # noqa: E402
from benchmarks import _injection_data as D  # noqa: E402

C = 4.0  # inverse regularisation when cross-validation is skipped (--no-cv)
# Candidates for cross-validation. C=1 was dropped after a first CV round (chunk_chars 300): at 95 %
# CV recall it flagged more clean emails than C=4 or 16 (full 29 % vs 24 %, n-grams 29 % vs 20 %).
C_VALUES = (4.0, 16.0)
CHUNK_VALUES = (CHUNK_CHARS, 120)  # unit sizes for indirect content: sentences merged up to 300 / 120 chars
SEED = 0
# Cross-validation on the TRAIN split (choose): FOLDS folds grouped by source text; thresholds tried
# for indirect content (user messages keep USER_THRESHOLD = the settings' default 0.5).
FOLDS = 5
USER_THRESHOLD = 0.5
THRESHOLDS = tuple(round(0.05 + 0.01 * i, 2) for i in range(91))  # 0.05 .. 0.95
INDIRECT_FP = 0.02  # budget on each benign indirect set (clean emails, LoCoMo turns as memories)
NOTINJECT_FP = 0.05  # budget on NotInject (user source)
TARGET_RECALL = 0.95  # the detection target (used only when no setting is within the budgets)
BIPIA = "attack: BIPIA in email context"
DEV = "attack: dev_attacks (user)"
VARIANTS = "attack: generated variants"
NOTINJECT = "benign: NotInject (user)"
BENIGN_INDIRECT = ("benign: clean BIPIA emails", "benign: LoCoMo turns (memory)")
IN_CONTEXT_PER_ATTACK = 4  # contexts each training attack is inserted into
# Share of the total sample weight of each (corpus, label) group.
SHARES = {
    ("dev_attacks", 1): 1.0, ("variants", 1): 1.0, ("bipia_text", 1): 0.5, ("bipia_code", 1): 0.3,
    ("bipia_in_context", 1): 1.0, ("requests_in_context", 1): 0.8,
    ("notinject", 0): 1.5, ("benign_txt", 0): 1.0, ("bipia_as_user", 0): 0.4, ("locomo", 0): 0.6,
    ("locomo_as_user", 0): 0.4, ("bipia_context", 0): 0.8, ("variants_context", 0): 0.2,
}


def variant_examples(bases: list[D.Example]) -> list[D.Example]:
    """The generated variants of attack ``bases`` (each inherits its base's split)."""
    out = []
    for b in bases:
        generated = list(variants(b.text))
        if len(b.text) > 300:  # long jailbreaks: three strategies each (a fixed choice per text)
            rng = random.Random(D.split_of(b.text) + b.text[:50])
            generated = rng.sample(generated, 3)
        for strategy, placement, text in generated:
            source = Source.USER if placement == "user" else {"email": Source.EMAIL, "web": Source.WEB,
                                                              "tool": Source.TOOL_RESULT}.get(placement, Source.DOCUMENT)
            inserted = b.text[:600] if placement != "user" else ""
            out.append(D.Example(text, 1, source, "variants", b.split, strategy, b.category, inserted))
    return out


def all_examples(split: str, limit: int | None = None, exclude_categories: frozenset[str] = frozenset(),
                 keep=None) -> list[D.Example]:
    """Every example of ``split`` (train or held_out); ``limit`` keeps the first N of each corpus;
    ``keep(text)`` (cross-validation folds) further restricts every source text (attacks, contexts,
    requests, turns: a variant or an in-context example follows its source texts)."""
    def take(xs):
        xs = [x for x in xs if x.split == split and (keep is None or keep(x.text))]
        return xs[:limit] if limit else xs

    dev = take(D.dev_attacks())
    bipia = [x for x in take(D.bipia_attacks()) if x.category not in exclude_categories]
    contexts = D.bipia_contexts()
    out = dev + bipia + [D.Example(x.text, 0, Source.USER, "bipia_as_user", x.split) for x in bipia]
    out += variant_examples(dev + [x for x in bipia if x.corpus == "bipia_text"])
    rng = random.Random(SEED)
    ctx = [c for c in contexts if D.split_of(c) == split and (keep is None or keep(c))]
    for a in bipia:
        for c in rng.sample(ctx, min(IN_CONTEXT_PER_ATTACK, len(ctx))):
            where = rng.choice(("start", "middle", "end"))
            out.append(D.Example(D.insert(c, a.text, where), 1, Source.EMAIL, "bipia_in_context", split, "bipia",
                                 a.category, a.text))
    benign_user = take(D.notinject()) + take(D.benign_txt())
    # Requests to an assistant are injections once they sit inside content (BIPIA's threat model):
    # the train split's NotInject prompts and benign.txt requests, each placed in one train email
    # context or one of the variants' wrappers (web page, tool result, document).
    for r in benign_user:
        host = rng.choice(ctx + [w for _, w in WRAPPERS])
        text = D.insert(host, r.text, rng.choice(("start", "middle", "end"))) if "{attack}" not in host \
            else host.format(attack=r.text)
        out.append(D.Example(text, 1, Source.EMAIL, "requests_in_context", split, "request", "", r.text))
    out += benign_user + take(D.clean_contexts())
    loc = take(D.locomo_turns())
    out += loc + [D.Example(x.text, 0, Source.USER, "locomo_as_user", x.split) for x in loc]
    return out


def attack_span(ex: D.Example) -> tuple[int, int] | None:
    """Where the attack sits inside an indirect example (None: the whole example is the attack)."""
    if ex.inserted:
        at = ex.text.find(ex.inserted)
        if at >= 0:
            return (at, at + len(ex.inserted))
    return None


def training_units(examples: list[D.Example], chunk_chars: int = CHUNK_CHARS) -> tuple[list[Unit], np.ndarray, list[str]]:
    """Units, their labels and their weight group."""
    us, labels, groups = [], [], []
    for ex in examples:
        span = attack_span(ex) if ex.label else None
        for u in units(normalise(ex.text), ex.source, chunk_chars):
            label = ex.label
            group = (ex.corpus, ex.label)
            if span is not None:
                inside = u.span is None or (u.span[0] < span[1] and span[0] < u.span[1])
                if not inside:
                    label, group = 0, ("variants_context", 0)
            us.append(u)
            labels.append(label)
            groups.append(group)
    return us, np.asarray(labels), groups


def weights_for(groups: list) -> np.ndarray:
    counts = Counter(groups)
    w = np.asarray([SHARES.get(g, 0.5) / counts[g] for g in groups], dtype=np.float64)
    return w * (len(w) / w.sum())


class EmbedCache:
    """MiniLM vectors by unit text (its first ``EMBED_CHARS`` characters), optionally kept in a file
    outside the repository between runs (``--cache``); also usable as an embedder (``embed``)."""

    def __init__(self, embedder, path: Path | None = None):
        self.embedder = embedder
        self.path = path
        self.cache: dict[str, np.ndarray] = {}
        self.id, self.model_name, self.dimension = "cache", getattr(embedder, "model_name", ""), EMBED_DIM
        if path is not None and path.exists():
            import pickle

            with open(path, "rb") as f:
                self.cache = pickle.load(f)

    def save(self) -> None:
        if self.path is not None:
            import pickle

            with open(self.path, "wb") as f:
                pickle.dump(self.cache, f)

    def embed(self, texts) -> np.ndarray:
        return self(list(texts))

    def __call__(self, texts: list[str]) -> np.ndarray:
        keys = [t[:EMBED_CHARS] for t in texts]
        todo = list(dict.fromkeys(k for k in keys if k not in self.cache))
        for i in range(0, len(todo), 256):
            batch = todo[i:i + 256]
            for k, v in zip(batch, np.asarray(self.embedder.embed(batch), dtype=np.float32), strict=True):
                self.cache[k] = v
        return np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, EMBED_DIM), np.float32)


def design(us: list[Unit], vectors: np.ndarray | None):
    """The sparse design matrix: [block, block × indirect], block = n-grams (+ embedding) + bias."""
    from scipy import sparse

    block = BUCKETS + (EMBED_DIM if vectors is not None else 0) + 1
    rows, cols, vals = [], [], []
    emb_idx = np.arange(BUCKETS, BUCKETS + EMBED_DIM)
    for i, u in enumerate(us):
        idx, v = hash_ngrams(u.text)
        parts_i = [idx, np.asarray([block - 1])]
        parts_v = [v, np.asarray([1.0], np.float32)]
        if vectors is not None:
            parts_i.insert(1, emb_idx)
            parts_v.insert(1, vectors[i])
        ci = np.concatenate(parts_i)
        cv = np.concatenate(parts_v).astype(np.float32)
        if u.indirect:
            ci = np.concatenate([ci, ci + block])
            cv = np.concatenate([cv, cv])
        rows.append(np.full(len(ci), i))
        cols.append(ci)
        vals.append(cv)
    return sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(len(us), 2 * block))


def fit(examples: list[D.Example], embed: EmbedCache | None, log=print, c: float = C,
        chunk_chars: int = CHUNK_CHARS) -> dict[str, np.ndarray]:
    """The weights of both models (``full`` only when ``embed`` is given), regularisation ``c``,
    indirect content cut into units of ``chunk_chars``."""
    from sklearn.linear_model import LogisticRegression

    us, y, groups = training_units(examples, chunk_chars)
    w = weights_for(groups)
    log(f"  {len(examples)} examples -> {len(us)} units ({int(y.sum())} positive)")
    out: dict[str, np.ndarray] = {}
    variants_ = [("ngram", None)]
    if embed is not None:
        t = time.perf_counter()
        vectors = embed([u.text for u in us])
        log(f"  embedded in {time.perf_counter() - t:.0f} s")
        variants_.insert(0, ("full", vectors))
    for name, vectors in variants_:
        x = design(us, vectors)
        model = LogisticRegression(C=c, solver="liblinear", random_state=SEED, max_iter=2000, tol=1e-5)
        model.fit(x, y, sample_weight=w)
        out[f"{name}_coef"] = model.coef_[0].astype(np.float32)
        out[f"{name}_intercept"] = np.float32(model.intercept_[0])
    return out


def models_from(weights: dict[str, np.ndarray], chunk_chars: int = CHUNK_CHARS) -> dict:
    from assistant.defence.classifier import Model

    return {name: Model(weights[f"{name}_coef"], float(weights[f"{name}_intercept"]), name == "full", None, chunk_chars)
            for name in ("full", "ngram") if f"{name}_coef" in weights}


def cv_scores(embed: EmbedCache | None, c_values: tuple[float, ...], limit: int | None = None, log=print,
              chunk_values: tuple[int, ...] = CHUNK_VALUES) -> dict[tuple[float, int, str], dict[str, tuple]]:
    """Out-of-fold verdict scores on the TRAIN split: for each fold k, fit on the other folds and
    score fold k's benchmark sets (benchmarks.injection.evaluation_sets restricted to the fold:
    its attacks inside its email contexts, its NotInject prompts, its LoCoMo turns...). Folds group
    by source text (D.fold_of), so a text, its variants and its in-context copies share one fold.
    Returns {(C, chunk_chars, variant): {set label: (scores, indirect?) pooled over the folds}}; the
    held-out split is never read."""
    from assistant.defence.classifier import ClassifierLayer
    from assistant.defence.detector import LayeredDetector
    from assistant.defence.dynamic import DynamicLayer
    from assistant.defence.static import StaticLayer
    from benchmarks.injection import evaluation_sets, run

    out: dict = {}
    for k in range(FOLDS):
        train = all_examples("train", limit, keep=lambda t, k=k: D.fold_of(t, FOLDS) != k)
        sets = evaluation_sets("train", limit, keep=lambda t, k=k: D.fold_of(t, FOLDS) == k)
        for c, chunk in [(c, chunk) for chunk in chunk_values for c in c_values]:
            t = time.perf_counter()
            models = models_from(fit(train, embed, log=lambda *_: None, c=c, chunk_chars=chunk), chunk)
            for variant, embedder in (("full", embed), ("ngram", None)):
                if variant not in models:
                    continue
                det = LayeredDetector([StaticLayer(), DynamicLayer(None), ClassifierLayer(embedder, models)], 0.5)
                got = out.setdefault((c, chunk, variant), {})
                for label, examples in sets.items():
                    verdicts, _ = run(det, examples)
                    scores, indirect = got.get(label, (np.zeros(0), np.zeros(0, bool)))
                    got[label] = (np.concatenate([scores, [v.score for v in verdicts]]),
                                  np.concatenate([indirect, [e.source.indirect for e in examples]]))
            log(f"  fold {k + 1}/{FOLDS}, C={c:g}, chunk_chars={chunk}: {time.perf_counter() - t:.0f} s", flush=True)
    return out


def rate(sets: dict, label: str, indirect_threshold: float) -> float:
    """The share of ``label``'s examples flagged: indirect ones from ``indirect_threshold``, user
    messages from ``USER_THRESHOLD``."""
    scores, indirect = sets[label]
    return float(np.mean(scores >= np.where(indirect, indirect_threshold, USER_THRESHOLD))) if len(scores) else 0.0


def choose(scores: dict[tuple[float, int, str], dict[str, tuple]], log=print) -> dict[str, tuple[float, int, float]]:
    """The decision rule from the out-of-fold scores: for the full model, the (C, chunk_chars,
    indirect threshold) with the highest recall on BIPIA attacks inside emails such that every benign
    indirect set stays within ``INDIRECT_FP`` and NotInject (user source, threshold 0.5) within
    ``NOTINJECT_FP``; ties go to the higher threshold, then the smaller C and the longer chunks; the
    n-gram model then chooses its C and threshold the same way with the full model's chunk_chars
    (both score the same units). Prints the trade-off curve. A model with no setting within the
    budgets is not in the result."""
    chosen: dict[str, tuple[float, int, float]] = {}
    for variant in ("full", "ngram"):
        best = fallback = None
        for (c, chunk, v), sets in sorted(scores.items()):
            if v != variant or ("full" in chosen and chunk != chosen["full"][1]):
                continue
            ni = rate(sets, NOTINJECT, USER_THRESHOLD)
            log(f"  CV {variant} C={c:g} chunk_chars={chunk}: NotInject flagged {ni:.1%} at {USER_THRESHOLD}; "
                f"dev_attacks {rate(sets, DEV, USER_THRESHOLD):.1%}")
            log(f"    {'thr':>5s} {'BIPIA':>6s} {'variants':>8s} " + " ".join(f"{x.split(': ')[1][:22]:>22s}" for x in BENIGN_INDIRECT))
            for t in THRESHOLDS:
                recall = rate(sets, BIPIA, t)
                fps = [rate(sets, x, t) for x in BENIGN_INDIRECT]
                ok = ni <= NOTINJECT_FP and all(f <= INDIRECT_FP for f in fps)
                if round(t * 100) % 5 == 0:
                    log(f"    {t:5.2f} {recall:6.1%} {rate(sets, VARIANTS, t):8.1%} "
                        + " ".join(f"{f:22.1%}" for f in fps) + ("" if ok else "  (over budget)"))
                key = (recall, t, -c, chunk)
                if ok and (best is None or key > best[0]):
                    best = (key, c, chunk, t)
                # fallback when nothing is within budget: reach the recall target with the lowest
                # worst false-positive rate (NotInject's budget still holds)
                spare = (-max(fps), t, -c, chunk)
                if ni <= NOTINJECT_FP and recall >= TARGET_RECALL and (fallback is None or spare > fallback[0]):
                    fallback = (spare, c, chunk, t, recall, max(fps))
        if best is None and fallback is not None:
            log(f"  CV: no setting of the {variant} model keeps every benign indirect set within "
                f"{INDIRECT_FP:.0%}; fallback: BIPIA recall >= {TARGET_RECALL:.0%} with the lowest worst "
                f"false-positive rate ({fallback[5]:.1%}, recall {fallback[4]:.1%})")
            best = ((fallback[4],), *fallback[1:4])
        if best is not None:
            chosen[variant] = (best[1], best[2], float(best[3]))
            log(f"  CV choice, {variant}: C={best[1]:g}, chunk_chars={best[2]}, indirect threshold {best[3]:.2f} "
                f"(CV BIPIA-in-email recall {best[0][0]:.1%})")
        else:
            log(f"  CV: no setting of the {variant} model is within the budgets or reaches the target")
    return chosen


def minilm():
    from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N examples of each corpus (quick runs)")
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    ap.add_argument("--no-embedder", action="store_true", help="fit the n-gram model only")
    ap.add_argument("--cache", type=Path, default=None, help="keep MiniLM vectors in this file (outside the repo)")
    ap.add_argument("--no-cv", action="store_true",
                    help=f"skip cross-validation: C={C:g}, indirect threshold {USER_THRESHOLD}")
    ap.add_argument("--c", type=float, nargs="+", default=list(C_VALUES), help="C values cross-validated")
    ap.add_argument("--chunk", type=int, nargs="+", default=list(CHUNK_VALUES), help="chunk_chars values cross-validated")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    examples = all_examples("train", args.limit)
    print(f"train split: {Counter(e.corpus for e in examples)}")
    cache = None if args.no_embedder else EmbedCache(minilm(), args.cache)
    chosen = {"full": (C, CHUNK_CHARS, USER_THRESHOLD), "ngram": (C, CHUNK_CHARS, USER_THRESHOLD)}
    if not args.no_cv:
        print(f"{FOLDS}-fold cross-validation on the train split, C in {args.c}, chunk_chars in {args.chunk}:")
        chosen.update(choose(cv_scores(cache, tuple(args.c), args.limit, chunk_values=tuple(args.chunk))))
        if cache is not None:
            cache.save()
    chunk = chosen["full"][1] if cache is not None else chosen["ngram"][1]
    weights: dict[str, np.ndarray] = {}
    for c in sorted({c for c, _, _ in chosen.values()}):
        print(f"fitting on the whole train split, C={c:g}, chunk_chars={chunk}:")
        fitted = fit(examples, cache, c=c, chunk_chars=chunk)
        for variant, (cv_c, _, threshold) in chosen.items():
            if cv_c == c and f"{variant}_coef" in fitted:
                weights[f"{variant}_coef"] = fitted[f"{variant}_coef"]
                weights[f"{variant}_intercept"] = fitted[f"{variant}_intercept"]
                weights[f"{variant}_c"] = np.float32(c)
                weights[f"{variant}_indirect_threshold"] = np.float32(threshold)
    if cache is not None:
        cache.save()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **weights, buckets=np.int32(BUCKETS), embed_dim=np.int32(EMBED_DIM),
                        chunk_chars=np.int32(chunk))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB) in {time.perf_counter() - t:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
