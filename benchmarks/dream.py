"""Dream mode: what a night's NREM costs at scale, and what one night does to LoCoMo recall.

``--part nrem``: a store of ``--sizes`` memories (default 10k and 100k) of LoCoMo-like text, with
near-duplicates planted at known rates, then one NREM phase (a dream session of one cycle, REM
off, through :class:`DreamService`): its time, the RSS, the 10k -> 100k time ratio (target <= 15:
sub-quadratic) and the precision / recall of the planted duplicates (target >= 0.95).

- Text: each base memory is ``"On <day>, <speaker> said: <s1> <s2>"``, two sentences (five words
  or more) of two different LoCoMo turns (``../shared/benchmarks/locomo/locomo_dev5.json``, read in
  place), a speaker and a day drawn at random (seeded). After a base memory, with probability
  ``--near-rate`` a near-duplicate is planted (one of: "said" -> "told me", one word dropped, the
  text case-folded without punctuation), and with probability ``--exact-rate`` an exact copy.
- Truth: a base memory and its planted copies are one family; precision and recall are over the
  pairs of memories the night put together (a consolidation group, a deduplication group, joined
  transitively) against the pairs of each family. Detected pairs outside any family are also
  checked against the exact cosine (are they above the threshold all the same?).
- Embeddings: MiniLM (``--embedder minilm``, the default) computed once and cached under
  ``--cache`` (``/tmp/dream-bench``) by a digest of the texts; stored through ``add_many(embeddings=)``.
  The merged memories are re-embedded by the store's embedder during the night (that is measured).
- ``--embedder hashing --night-embedder minilm``: the stored vectors from the hashing embedder
  (instant: MiniLM over 100k texts takes about an hour on a busy two-core machine) while the night
  re-embeds merged texts with MiniLM (its real cost); precision and recall then say little.
- Also printed: the time of the pair search alone and, with ``--exact-check`` (or for sizes up to
  20k), its recall against every pair above the threshold computed exactly.

``--part locomo``: each LoCoMo dev conversation (``--conversations``) stored turn by turn
(:func:`evaluation.prepare`, MiniLM, encryption on), R@5 (categories 1-4) per mode before and
after one night (a dream session with the default settings, REM steps as configured in this
branch: empty ones change nothing), with a merged memory counting for all its sources' turns
(:func:`evaluation.add_merged`); the store size before and after (memories not archived); with
``--graph`` (default) the conversation's graph (rules extractor) is built before, is the dream's
graph (edge review, node merges), is brought up to date after, and mode hybrid+graph is measured
(multi-hop before/after). Target: R@5 does not drop by more than 0.01.

    .venv/bin/python benchmarks/dream.py --part nrem [--sizes 10000,100000] [--near-rate 0.02] [--exact-rate 0.01]
    .venv/bin/python benchmarks/dream.py --part locomo [--conversations 5] [--no-graph]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from assistant.config import DreamSettings, MemorySettings  # noqa: E402
from assistant.crypto import open_sealer  # noqa: E402
from assistant.dream.activity import ActivityTracker  # noqa: E402
from assistant.dream.deps import DreamDeps  # noqa: E402
from assistant.dream.service import DreamService  # noqa: E402
from assistant.dream.store import DreamStore  # noqa: E402
from assistant.dream.types import Operation  # noqa: E402
from assistant.memory import evaluation, pairs  # noqa: E402
from assistant.memory.consolidate import candidates  # noqa: E402
from assistant.memory.store import MemoryStore, NewMemory  # noqa: E402
from assistant.storage.db import Database  # noqa: E402
from benchmarks._measure import rss_mb  # noqa: E402

CATEGORIES = (1, 2, 3, 4)
USER = "bench"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_PUNCT = re.compile(r"[^\w\s]+")


def embedder_of(name: str):  # noqa: ANN201
    if name == "hashing":
        from assistant.embeddings.hashing import HashingEmbedder

        return HashingEmbedder(384)
    from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


# --- the synthetic store --------------------------------------------------------------------------


def corpus(total: int, near_rate: float, exact_rate: float, seed: int = 0) -> tuple[list[str], list[int]]:
    """``total`` texts and the family of each (a base memory and its planted copies share one)."""
    conversations = evaluation.load()
    sentences = sorted({s.strip() for c in conversations for t in c.turns for s in _SENTENCE.split(t.text)
                        if len(s.split()) >= 5})
    speakers = sorted({t.speaker for c in conversations for t in c.turns}) + [
        "Anna", "Tom", "Priya", "Lukas", "Mei", "Omar", "Sofia", "Jonas", "Aisha", "Mateo"]
    months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
              "November", "December"]
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    family: list[int] = []
    fam = 0
    while len(texts) < total:
        a, b = rng.choice(len(sentences), 2, replace=False)
        day = f"{int(rng.integers(1, 29))} {months[int(rng.integers(0, 12))]} {int(rng.integers(2019, 2025))}"
        speaker = speakers[int(rng.integers(0, len(speakers)))]
        base = f"On {day}, {speaker} said: {sentences[a]} {sentences[b]}"
        texts.append(base)
        family.append(fam)
        if rng.random() < near_rate and len(texts) < total:
            kind = int(rng.integers(0, 3))
            if kind == 0:
                near = base.replace(" said: ", " told me: ", 1)
            elif kind == 1:
                head, body = base.split(": ", 1)
                words = body.split()
                drop = int(rng.integers(1, len(words) - 1))
                near = f"{head}: {' '.join(words[:drop] + words[drop + 1:])}"
            else:
                near = " ".join(_PUNCT.sub(" ", base.casefold()).split())
            texts.append(near)
            family.append(fam)
        if rng.random() < exact_rate and len(texts) < total:
            texts.append(base)
            family.append(fam)
        fam += 1
    return texts, family


def embeddings(texts: list[str], embedder_name: str, cache: Path) -> np.ndarray:
    """MiniLM vectors of ``texts``, cached by digest (a prefix of a cached list is reused)."""
    cache.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"{embedder_name}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    known = np.zeros((0, 384), dtype=np.float32)  # the longest cached prefix of ``texts``
    for other in sorted(cache.glob(f"{embedder_name}-*.npy")):
        if not (cache / f"{other.stem}.txt").exists():
            continue
        held = (cache / f"{other.stem}.txt").read_text().split("\n")
        n = min(len(held), len(texts))
        if n > len(known) and held[:n] == texts[:n]:
            known = np.load(other)[:n]
    if len(known) == len(texts):
        return known
    from tqdm.auto import tqdm

    embedder = embedder_of(embedder_name)
    parts = [known] + [embedder.embed(texts[i:i + 512])
                       for i in tqdm(range(len(known), len(texts), 512), desc="embedding", unit="512")]
    vectors = np.vstack(parts).astype(np.float32)
    np.save(path, vectors)
    (cache / f"{path.stem}.txt").write_text("\n".join(texts))
    return vectors


class Timed:
    """An embedder that adds up the time spent in it (the night's re-embedding of merged texts)."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    def embed(self, texts):  # noqa: ANN001, ANN201
        t0 = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - t0
            self.texts += len(texts)


def open_store(path: Path, embedder) -> tuple[Database, MemoryStore]:  # noqa: ANN001
    db = Database(path / "assistant.db")
    store = MemoryStore(db, open_sealer(db, path / "memory.key"), embedder, MemorySettings())
    return db, store


def dream_service(db: Database, store: MemoryStore, graph=None, **settings) -> DreamService:  # noqa: ANN001, ANN003
    deps = DreamDeps(store=DreamStore(db, store.sealer), memory=store, settings=DreamSettings(**settings),
                     memory_settings=store.settings, graph=graph)
    service = DreamService(deps, ActivityTracker())
    service.rem_steps = []
    return service


def night_groups(service: DreamService, user: str, session_id: str) -> tuple[list[list[str]], dict[str, list[str]]]:
    """The groups a night put together (consolidated, deduplicated) and merged id -> sources."""
    out, merged = [], {}
    offset = 0
    while True:
        entries, total = service.journal(user, session_id, limit=1000, offset=offset)
        for e in entries:
            if e.status.value != "applied":
                continue
            if e.operation is Operation.MEMORY_CONSOLIDATED and e.details.get("replayed") is None:
                out.append(list(e.details["merged_from"]))
                merged[e.details["memory_id"]] = list(e.details["merged_from"])
            elif e.operation is Operation.MEMORY_DEDUPLICATED:
                out.append([e.details["kept"], *e.details["duplicates"]])
        offset += len(entries)
        if offset >= total or not entries:
            return out, merged


def run_nrem(size: int, args: argparse.Namespace, texts_all: list[str], family_all: list[int],
             vectors_all: np.ndarray) -> dict:
    texts, family, vectors = texts_all[:size], family_all[:size], vectors_all[:size]
    work = Path(tempfile.mkdtemp(prefix=f"dream-nrem-{size}-", dir=args.cache))
    embedder = Timed(embedder_of(args.night_embedder or args.embedder))
    embedder.embed(["warm up"])  # the model is loaded before the night (a running server has it)
    embedder.seconds = 0.0
    db, store = open_store(work, embedder)
    ids: list[str] = []
    for start in range(0, size, 10_000):
        ids += store.add_many(USER, [NewMemory(t) for t in texts[start:start + 10_000]],
                              embeddings=vectors[start:start + 10_000])
    store.index(USER)  # the index is built before the night (it exists in a running server)
    found = candidates(store, USER)
    t0 = time.perf_counter()
    pi, pj, _ = pairs.near_pairs(found.vectors, args.threshold)
    pair_seconds = time.perf_counter() - t0
    pair_recall = None
    if args.exact_check or size <= 20_000:
        ei, ej, _ = pairs.exact_pairs(found.vectors, args.threshold)
        exact = set(zip(ei.tolist(), ej.tolist(), strict=True))
        pair_recall = len(exact & set(zip(pi.tolist(), pj.tolist(), strict=True))) / max(1, len(exact))
    service = dream_service(db, store, max_cycles=1, nrem={"merge_threshold": args.threshold})
    steps: list[tuple[str, float]] = []
    service.subscribe(lambda e: steps.append((e.data["step"], time.perf_counter())) if e.kind == "step_started"
                      else steps.append(("end", time.perf_counter())) if e.kind == "phase_finished" else None)
    rss_before = rss_mb()[0]
    t0 = time.perf_counter()
    embedder.seconds, embedder.texts = 0.0, 0
    session = service.trigger(USER, background=False)
    seconds = time.perf_counter() - t0
    step_seconds = {name: round(steps[k + 1][1] - at, 2) for k, (name, at) in enumerate(steps[:-1])}
    rss_after, rss_peak = rss_mb()
    groups, _ = night_groups(service, USER, session.id)
    position = {m: n for n, m in enumerate(ids)}
    parent = list(range(size))

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for g in groups:
        for m in g[1:]:
            if m in position and g[0] in position:
                parent[root(position[m])] = root(position[g[0]])
    detected: dict[int, list[int]] = {}
    for x in range(size):
        detected.setdefault(root(x), []).append(x)
    det_pairs = {(a, b) for g in detected.values() for i, a in enumerate(g) for b in g[i + 1:]}
    fams: dict[int, list[int]] = {}
    for x, f in enumerate(family):
        fams.setdefault(f, []).append(x)
    true_pairs = {(a, b) for g in fams.values() for i, a in enumerate(g) for b in g[i + 1:]}
    hit = det_pairs & true_pairs
    other = det_pairs - true_pairs
    other_above = sum(1 for a, b in other if float(vectors[a] @ vectors[b]) > args.threshold)
    live = int(db.scalar("SELECT count(*) FROM memories WHERE user_id = ? AND memory_type != 'Archived'", (USER,)))
    out = {
        "size": size, "seconds": round(seconds, 2), "pair_search_seconds": round(pair_seconds, 2),
        "pairs_found": int(len(pi)), "pair_recall_vs_exact": None if pair_recall is None else round(pair_recall, 4),
        "planted_pairs": len(true_pairs), "detected_pairs": len(det_pairs),
        "precision": round(len(hit) / max(1, len(det_pairs)), 4), "recall": round(len(hit) / max(1, len(true_pairs)), 4),
        "detected_outside_families": len(other), "of_which_above_threshold": other_above,
        "step_seconds": step_seconds, "embedding_seconds": round(embedder.seconds, 2),
        "texts_embedded": embedder.texts, "counts": session.counts, "status": session.status.value, "live_after": live,
        "rss_mb_before": round(rss_before), "rss_mb_after": round(rss_after), "rss_mb_peak": round(rss_peak),
    }
    db.close()
    shutil.rmtree(work, ignore_errors=True)
    return out


def clean(texts: list[str], family: list[int], vectors: np.ndarray, threshold: float):  # noqa: ANN201
    """Drop the families with a member above ``threshold`` to a member of another family: the base
    text generator reuses sentences, so some base memories are near-duplicates by chance; left in,
    they are duplicates nobody planted. Exact pairs up to 30k vectors, else the pair search with
    twice the probes."""
    if len(vectors) <= 30_000:
        i, j, _ = pairs.exact_pairs(vectors, threshold)
    else:
        i, j, _ = pairs.near_pairs(vectors, threshold, probe=2 * pairs.PROBE)
    fam = np.asarray(family)
    bad = set(fam[i[fam[i] != fam[j]]].tolist()) | set(fam[j[fam[i] != fam[j]]].tolist())
    keep = np.array([f not in bad for f in family])
    return [t for t, k in zip(texts, keep, strict=True) if k], fam[keep].tolist(), vectors[keep], len(bad)


def part_nrem(args: argparse.Namespace) -> list[dict]:
    sizes = sorted(int(s) for s in args.sizes.split(","))
    texts, family = corpus(args.corpus or max(sizes), args.near_rate, args.exact_rate)
    vectors = embeddings(texts, args.embedder, Path(args.cache))
    texts, family, vectors, dropped = clean(texts, family, vectors, args.threshold)
    print(f"corpus: {len(texts)} texts, {len(set(family))} families (near-duplicate rate {args.near_rate}, exact "
          f"{args.exact_rate}; {dropped} families dropped: near-duplicates of another by chance)", flush=True)
    sizes = [min(s, len(texts)) for s in sizes]
    results = []
    for size in sizes:
        r = run_nrem(size, args, texts, family, vectors)
        results.append(r)
        print(f"\n{size:>7} memories: NREM {r['seconds']:.1f} s (pair search {r['pair_search_seconds']:.1f} s, "
              f"{r['pairs_found']} pairs above {args.threshold}; recall vs exact pairs "
              f"{r['pair_recall_vs_exact'] if r['pair_recall_vs_exact'] is not None else 'not checked'})")
        print(f"         planted pairs {r['planted_pairs']}, detected {r['detected_pairs']}: precision "
              f"{r['precision']:.3f}, recall {r['recall']:.3f}; detected outside the planted families "
              f"{r['detected_outside_families']} (of which above the threshold by exact cosine: "
              f"{r['of_which_above_threshold']})")
        print(f"         seconds per step {r['step_seconds']}; of which re-embedding {r['texts_embedded']} merged "
              f"texts: {r['embedding_seconds']:.1f} s")
        print(f"         operations {r['counts']}; memories not archived after: {r['live_after']}; "
              f"RSS {r['rss_mb_before']} -> {r['rss_mb_after']} MB (peak {r['rss_mb_peak']} MB)", flush=True)
    if len(results) >= 2:
        a, b = results[0], results[-1]
        ratio = b["seconds"] / max(a["seconds"], 1e-9)
        print(f"\ntime ratio {a['size']} -> {b['size']}: {ratio:.1f} (target <= 15; size ratio "
              f"{b['size'] / a['size']:.0f}); largest: {b['seconds']:.1f} s (target <= 60 s); precision "
              f"{b['precision']:.3f} / recall {b['recall']:.3f} (target >= 0.95)")
    return results


# --- LoCoMo ----------------------------------------------------------------------------------------


def part_locomo(args: argparse.Namespace) -> dict:
    from assistant.graph.retrieval import attach_graph

    conversations = evaluation.load(conversations=args.conversations)
    embedder = embedder_of(args.embedder)
    modes = ("hybrid", "hybrid+graph") if args.graph else ("hybrid",)
    before_rows, after_rows, sizes = [], [], []
    counts: dict[str, int] = {}
    work = tempfile.TemporaryDirectory(prefix="dream-locomo-", dir=args.cache)
    for conv in conversations:
        path = Path(tempfile.mkdtemp(dir=work.name))
        db, store = open_store(path, embedder)
        p = evaluation.prepare(store, conv, categories=CATEGORIES)
        graph = attach_graph(store, p.user) if args.graph else None
        before_rows += evaluation.score(p, modes, (5,))
        size_before = int(db.scalar("SELECT count(*) FROM memories WHERE user_id = ? AND memory_type != 'Archived'",
                                    (p.user,)))
        service = dream_service(db, store, graph, **json.loads(args.dream))
        t0 = time.perf_counter()
        session = service.trigger(p.user, background=False)
        seconds = time.perf_counter() - t0
        for k, v in session.counts.items():
            counts[k] = counts.get(k, 0) + v
        _, merged = night_groups(service, p.user, session.id)
        evaluation.add_merged(p, merged)
        if graph is not None:
            graph.backfill(p.user)  # the merged memories join the graph (a server's listener does this)
        after_rows += evaluation.score(p, modes, (5,))
        size_after = int(db.scalar("SELECT count(*) FROM memories WHERE user_id = ? AND memory_type != 'Archived'",
                                   (p.user,)))
        sizes.append((conv.sample_id, size_before, size_after, round(seconds, 1), session.status.value))
        print(f"{conv.sample_id}: {size_before} -> {size_after} memories not archived, night {seconds:.1f} s, "
              f"{session.counts}", flush=True)
        if graph is not None:
            graph.close()
        db.close()
    work.cleanup()
    before = evaluation.summarise(before_rows, (5,), CATEGORIES)
    after = evaluation.summarise(after_rows, (5,), CATEGORIES)
    table = before.merge(after, on=["mode", "category"], suffixes=(" before", " after"))
    table["delta"] = table["R@5 after"] - table["R@5 before"]
    print()
    print(table.round(3).to_string(index=False))
    total_before, total_after = sum(s[1] for s in sizes), sum(s[2] for s in sizes)
    print(f"\nstore: {total_before} -> {total_after} memories not archived "
          f"({100 * (total_before - total_after) / max(1, total_before):.1f} % smaller); operations {counts}")
    for mode in modes:
        row = table[(table["mode"] == mode) & table["category"].str.startswith("all")].iloc[0]
        print(f"{mode}: R@5 {row['R@5 before']:.3f} -> {row['R@5 after']:.3f} ({row['delta']:+.3f}; target >= -0.01)")
    return {"table": table.round(4).to_dict("records"), "sizes": sizes, "counts": counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("nrem", "locomo"), required=True)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--near-rate", type=float, default=0.02)
    parser.add_argument("--exact-rate", type=float, default=0.01)
    parser.add_argument("--threshold", type=float, default=0.85)
    parser.add_argument("--corpus", type=int, default=None, help="texts generated (default: the largest size)")
    parser.add_argument("--exact-check", action="store_true", help="check the pair search against exact pairs")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--night-embedder", choices=("minilm", "hashing"), default=None,
                        help="nrem: the store's embedder during the night (re-embedding merged texts), when it "
                             "should differ from --embedder (hashing vectors for a quick large store, MiniLM's cost)")
    parser.add_argument("--cache", default="/tmp/dream-bench")
    parser.add_argument("--conversations", type=int, default=5)
    parser.add_argument("--no-graph", dest="graph", action="store_false")
    parser.add_argument("--dream", default="{}", help='locomo: dream settings as JSON, e.g. {"nrem": {...}}')
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    Path(args.cache).mkdir(parents=True, exist_ok=True)
    result = part_nrem(args) if args.part == "nrem" else part_locomo(args)
    if args.json:
        print(json.dumps({"benchmark": f"dream_{args.part}", "result": result}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
