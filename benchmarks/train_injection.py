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

from assistant.defence.classifier import BUCKETS, EMBED_CHARS, EMBED_DIM, WEIGHTS, Unit, hash_ngrams, units  # noqa: E402
from assistant.defence.normalise import normalise  # noqa: E402
from assistant.defence.types import Source  # noqa: E402
from assistant.defence.variants import WRAPPERS, variants  # noqa: E402
from benchmarks import _injection_data as D  # noqa: E402

C = 4.0  # inverse regularisation: fixed, never tuned on the held-out split
SEED = 0
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


def all_examples(split: str, limit: int | None = None, exclude_categories: frozenset[str] = frozenset()) -> list[D.Example]:
    """Every example of ``split`` (train or held_out); ``limit`` keeps the first N of each corpus."""
    def take(xs):
        xs = [x for x in xs if x.split == split]
        return xs[:limit] if limit else xs

    dev = take(D.dev_attacks())
    bipia = [x for x in take(D.bipia_attacks()) if x.category not in exclude_categories]
    contexts = D.bipia_contexts()
    out = dev + bipia + [D.Example(x.text, 0, Source.USER, "bipia_as_user", x.split) for x in bipia]
    out += variant_examples(dev + [x for x in bipia if x.corpus == "bipia_text"])
    rng = random.Random(SEED)
    ctx = [c for c in contexts if D.split_of(c) == split]
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


def training_units(examples: list[D.Example]) -> tuple[list[Unit], np.ndarray, list[str]]:
    """Units, their labels and their weight group."""
    us, labels, groups = [], [], []
    for ex in examples:
        span = attack_span(ex) if ex.label else None
        for u in units(normalise(ex.text), ex.source):
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


def fit(examples: list[D.Example], embed: EmbedCache | None, log=print) -> dict[str, np.ndarray]:
    """The weights of both models (``full`` only when ``embed`` is given)."""
    from sklearn.linear_model import LogisticRegression

    us, y, groups = training_units(examples)
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
        model = LogisticRegression(C=C, solver="liblinear", random_state=SEED, max_iter=2000, tol=1e-5)
        model.fit(x, y, sample_weight=w)
        out[f"{name}_coef"] = model.coef_[0].astype(np.float32)
        out[f"{name}_intercept"] = np.float32(model.intercept_[0])
    return out


def minilm():
    from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="first N examples of each corpus (quick runs)")
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    ap.add_argument("--no-embedder", action="store_true", help="fit the n-gram model only")
    ap.add_argument("--cache", type=Path, default=None, help="keep MiniLM vectors in this file (outside the repo)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    examples = all_examples("train", args.limit)
    print(f"train split: {Counter(e.corpus for e in examples)}")
    cache = None if args.no_embedder else EmbedCache(minilm(), args.cache)
    weights = fit(examples, cache)
    if cache is not None:
        cache.save()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **weights, buckets=np.int32(BUCKETS), embed_dim=np.int32(EMBED_DIM))
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB) in {time.perf_counter() - t:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
