"""The classifier layer: logistic regression over hashed character n-grams (3-5 grams, 2^14 signed
buckets, L2-normalised: HashingVectorizer's idea, with a vectorised 64-bit multiply-xorshift hash of
our own so numpy alone computes it) and, when the packaged MiniLM embedder is there, its 384-d
sentence vector. Trained by ``benchmarks/train_injection.py``; the weights file holds two models,
``full`` (n-grams + MiniLM) and ``ngram`` (n-grams only: used without an embedder, or with any
embedder that is not the 384-d MiniLM, e.g. the test hashing embedder).

The source is a feature: every feature appears twice, once as is and once multiplied by
"indirect" (plus an indirect bias), so one model learns what is suspicious anywhere and what is
suspicious only inside indirect content ("What is the capital of Brazil?" is an ordinary request
from the user but an injection inside an email). Indirect content is scored per chunk (sentences
merged up to ``chunk_chars``, stored with the weights; ``CHUNK_CHARS`` in older files) and the
text's probability is the highest chunk's; the chunks over
the threshold are the spans to neutralise. Runtime needs numpy only.

The weights file also holds, per model, the threshold from which INDIRECT content is flagged
(``<model>_indirect_threshold``), the regularisation it was fitted with (``<model>_c``) and the
unit size of indirect content (``chunk_chars``), all chosen by the training script's 5-fold
cross-validation on the train split (see benchmarks/train_injection.py for the rule); build_detector hands that threshold to the detector for indirect
sources unless ``[defence] threshold`` was set explicitly (then it applies to every source).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from assistant.defence.types import Hit, Layer, Normalised, Source

WEIGHTS = Path(__file__).with_name("data") / "classifier.npz"
BUCKETS = 1 << 14
NGRAMS = (3, 4, 5)
EMBED_DIM = 384
CHUNK_CHARS = 300
MAX_CHUNKS = 48
MAX_TEXT = 6000  # characters of a unit hashed
EMBED_CHARS = 256  # characters of a unit embedded (the opening of a long text: n-grams read all of it)
REPORT_FLOOR = 0.05
# The n-gram model's sure range: below/above it the full model (and its embedding) is skipped.
CASCADE = (0.03, 0.97)
_M1 = np.uint64(0x100000001B3)
_M2 = np.uint64(0xFF51AFD7ED558CCD)
_S = np.uint64(33)
_SENTENCE = re.compile(r"[^\n.!?]*(?:[.!?]+|\n|$)")


def hash_ngrams(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Sparse signed counts of the character 3-5 grams of `` text `` (bucket indices, L2-normalised
    values)."""
    s = " " + text[:MAX_TEXT] + " "
    codes = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    parts = []
    with np.errstate(over="ignore"):
        for n in NGRAMS:
            m = len(codes) - n + 1
            if m <= 0:
                continue
            h = np.full(m, np.uint64(n * 0x9E3779B97F4A7C15 % (1 << 64)), dtype=np.uint64)
            for k in range(n):
                h = (h ^ codes[k:k + m]) * _M1
            h ^= h >> _S
            h *= _M2
            h ^= h >> _S
            parts.append(h)
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.float32)
    h = np.concatenate(parts)
    idx = (h & np.uint64(BUCKETS - 1)).astype(np.int64)
    sign = np.where((h >> np.uint64(40)) & np.uint64(1), 1.0, -1.0)
    uniq, inv = np.unique(idx, return_inverse=True)
    vals = np.bincount(inv, weights=sign).astype(np.float32)
    norm = float(np.linalg.norm(vals)) or 1.0
    return uniq, vals / norm


def chunks(folded: str, chunk_chars: int = CHUNK_CHARS) -> list[tuple[int, int]]:
    """Spans of ``folded``: sentences and lines merged up to ``chunk_chars`` (a piece shorter than a
    third of it joins its neighbour; at most ``MAX_CHUNKS``: longer texts get longer chunks)."""
    pieces = [m.span() for m in _SENTENCE.finditer(folded) if m.end() > m.start()]
    limit = max(chunk_chars, len(folded) // MAX_CHUNKS + 1)
    out: list[list[int]] = []
    for a, b in pieces:
        if not folded[a:b].strip():
            continue
        if out and b - out[-1][0] <= limit and (out[-1][1] - out[-1][0] < limit // 3 or b - a < limit // 3):
            out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out] or [(0, len(folded))]


@dataclass(frozen=True)
class Unit:
    """One piece the model scores: its text, whether it is indirect, and the span of the ORIGINAL
    text it stands for (None: the whole text)."""

    text: str
    indirect: bool
    span: tuple[int, int] | None
    how: str = ""  # "" or how it was hidden (base64, rot13, leet)


def units(norm: Normalised, source: Source, chunk_chars: int = CHUNK_CHARS) -> list[Unit]:
    """The user's text is scored whole; indirect content longer than ``chunk_chars`` per chunk;
    decoded forms whole."""
    from assistant.defence.normalise import decoded_span

    indirect = source.indirect
    out: list[Unit] = []
    if indirect and len(norm.folded) > chunk_chars:
        for a, b in chunks(norm.folded, chunk_chars):
            piece = norm.folded[a:b].strip()
            if piece:
                out.append(Unit(piece, True, norm.span_in_text(a, b)))
    else:
        out.append(Unit(norm.folded, indirect, norm.span_in_text(0, len(norm.folded)) if indirect and norm.folded else None))
    for i, (kind, plain) in enumerate(norm.decoded):
        out.append(Unit(plain, indirect, decoded_span(norm, i, 0, len(plain)), kind))
    return out


class Model:
    """One fitted logistic regression: ``coef`` over [block, block × indirect], block = n-gram
    buckets (+ embedding) + bias; ``indirect_threshold``: the probability from which indirect
    content is flagged, chosen by cross-validation on the train split (None: the detector's own)."""

    def __init__(self, coef: np.ndarray, intercept: float, embed: bool, indirect_threshold: float | None = None,
                 chunk_chars: int = CHUNK_CHARS):
        self.coef = np.asarray(coef, dtype=np.float32)
        self.intercept = float(intercept)
        self.embed = embed
        self.indirect_threshold = indirect_threshold
        self.chunk_chars = chunk_chars  # the unit size it was trained on (units())
        self.block = BUCKETS + (EMBED_DIM if embed else 0) + 1
        if self.coef.shape != (2 * self.block,):
            raise ValueError(f"classifier weights have shape {self.coef.shape}, expected {(2 * self.block,)}")

    def logits(self, grams: Sequence[tuple[np.ndarray, np.ndarray]], indirect: Sequence[bool],
               vectors: np.ndarray | None) -> np.ndarray:
        out = np.empty(len(grams), dtype=np.float64)
        bias = self.block - 1
        for i, (idx, vals) in enumerate(grams):
            z = float(self.coef[idx] @ vals) + float(self.coef[bias])
            if indirect[i]:
                z += float(self.coef[self.block + idx] @ vals) + float(self.coef[self.block + bias])
            out[i] = z
        if self.embed and vectors is not None and len(grams):
            w_user = self.coef[BUCKETS:BUCKETS + EMBED_DIM]
            w_ind = self.coef[self.block + BUCKETS:self.block + BUCKETS + EMBED_DIM]
            out += vectors @ w_user + (vectors @ w_ind) * np.asarray(indirect, dtype=np.float32)
        return out + self.intercept

    def probabilities(self, grams, indirect, vectors) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-np.clip(self.logits(grams, indirect, vectors), -30, 30)))


def uses_minilm(embedder) -> bool:
    """Whether ``embedder`` gives the packaged MiniLM vectors the ``full`` model was trained on."""
    if embedder is None or getattr(embedder, "dimension", None) != EMBED_DIM:
        return False
    return "minilm" in str(getattr(embedder, "id", "")).lower() or "minilm" in str(getattr(embedder, "model_name", "")).lower()


def load_models(path: Path = WEIGHTS) -> dict[str, Model]:
    data = np.load(path)
    chunk_chars = int(data["chunk_chars"]) if "chunk_chars" in data else CHUNK_CHARS
    return {name: Model(data[f"{name}_coef"], float(data[f"{name}_intercept"]), name == "full",
                        round(float(data[f"{name}_indirect_threshold"]), 4) if f"{name}_indirect_threshold" in data else None,
                        chunk_chars)
            for name in ("full", "ngram") if f"{name}_coef" in data}


class ClassifierLayer:
    """Scores units with the n-gram model first; with MiniLM, only the units it is not sure about
    (probability inside ``cascade``) are embedded and scored by the full model, so most everyday
    text costs no embedding at all."""

    layer = Layer.CLASSIFIER

    def __init__(self, embedder=None, models: dict[str, Model] | None = None, floor: float = REPORT_FLOOR,
                 cascade: tuple[float, float] = CASCADE):
        models = models if models is not None else load_models()
        self.embedder = embedder if uses_minilm(embedder) and "full" in models else None
        self.model = models["full"] if self.embedder is not None else models["ngram"]
        self.ngram = models["ngram"]
        self.floor = floor
        self.cascade = cascade

    @property
    def variant(self) -> str:
        return "full" if self.embedder is not None else "ngram"

    @property
    def indirect_threshold(self) -> float | None:
        """The model in use's cross-validated threshold for indirect content (None: not in the file)."""
        return self.model.indirect_threshold

    def score_units(self, all_units: Sequence[Unit]) -> np.ndarray:
        """Probabilities of many units at once (one embedding call)."""
        if not all_units:
            return np.zeros(0)
        grams = [hash_ngrams(u.text) for u in all_units]
        indirect = [u.indirect for u in all_units]
        probs = self.ngram.probabilities(grams, indirect, None)
        if self.embedder is None:
            return probs
        low, high = self.cascade
        unsure = [i for i, p in enumerate(probs) if low <= p < high]
        if unsure:
            vectors = np.asarray(self.embedder.embed([all_units[i].text[:EMBED_CHARS] for i in unsure]), dtype=np.float32)
            probs[unsure] = self.model.probabilities([grams[i] for i in unsure], [indirect[i] for i in unsure], vectors)
        return probs

    def hits_for(self, us: Sequence[Unit], probs: np.ndarray) -> list[Hit]:
        hits = []
        for u, p in zip(us, probs, strict=True):
            if p >= self.floor:
                where = f" (hidden as {u.how})" if u.how else (" in this part of the content" if u.indirect and u.span else "")
                hits.append(Hit(Layer.CLASSIFIER, f"classifier.{self.variant}",
                                f"the trained model rates it {p:.0%} likely an injection{where}", u.span, float(p)))
        return hits

    def check(self, text: Normalised, source: Source, user_id: str | None = None) -> list[Hit]:
        us = self.units(text, source)
        return self.hits_for(us, self.score_units(us))

    def units(self, text: Normalised, source: Source) -> list[Unit]:
        """The units scored, cut as the models were trained (their ``chunk_chars``)."""
        return units(text, source, self.ngram.chunk_chars)
