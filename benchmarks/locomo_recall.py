"""LoCoMo retrieval recall of the memory store: dense, keyword, hybrid and hybrid+graph search.

Every turn of the five LoCoMo conversations (``../shared/benchmarks/locomo/locomo_dev5.json``,
CC BY-NC 4.0: read in place, never copied) is stored as a memory through the package's public
API: a :class:`MemoryStore` on a real SQLite file in a temporary directory, with encryption on
as in production (``open_sealer``) and the packaged MiniLM embedder. Each question is searched in
each mode (``--modes``; ranked by similarity; for hybrid+graph each conversation's knowledge graph is
built first with the ``rules`` extractor and its ``GraphExpander`` attached) and recall@k = |evidence ∩ top k| / |evidence| is
averaged per question category (LoCoMo's ``recall_acc``). Target: hybrid recall@5 >= 0.65 over
categories 1-4.

    .venv/bin/python benchmarks/locomo_recall.py [--conversations N] [--modes hybrid,hybrid+graph] [--json]

Ablations (what the defaults improved on): ``--undated`` stores "Speaker: text" instead of
"On <day>, Speaker said: text"; ``--no-sessions`` stores no conversation id (so no neighbouring
memories); ``--context 0`` turns the neighbour context off; ``--dense-weight``/``--keyword-weight``
and ``--bm25-b``/``--bm25-k1`` change the fusion and BM25 parameters.

Takes about two minutes on two cores (embedding ~2,800 turns dominates).

Leave-conversations-out cross-validation (``--cv``; :mod:`assistant.memory.crossval`): every
conversation is stored and embedded once; each method (``--methods``, see
``benchmarks/locomo_methods.py``) ranks every question once per point of its parameter grid; for each
of the 10 splits of the 5 conversations into 3 to tune on and 2 held out, the best point on the 3
is measured on the 2. Printed: R@5 per category and overall, averaged over the held-out sides, and
(for comparison) the best point tuned on all five.

    .venv/bin/python benchmarks/locomo_recall.py --cv [--methods hybrid,rrf] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tqdm.auto import tqdm  # noqa: E402

from assistant.config import MemorySettings  # noqa: E402
from assistant.crypto import open_sealer  # noqa: E402
from assistant.embeddings.hashing import HashingEmbedder  # noqa: E402
from assistant.embeddings.sentence_transformers import SentenceTransformerEmbedder  # noqa: E402
from assistant.memory import crossval, evaluation  # noqa: E402
from assistant.memory.store import HybridWeights, MemoryStore  # noqa: E402
from assistant.storage.db import Database  # noqa: E402
from benchmarks import locomo_methods  # noqa: E402

TARGET = 0.65
CATEGORIES = (1, 2, 3, 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=5, help="how many conversations (default all 5)")
    parser.add_argument("--json", action="store_true", help="also print one machine-readable JSON line")
    parser.add_argument("--data", type=Path, default=None, help="path of locomo_dev5.json")
    parser.add_argument("--undated", action="store_true", help='store "Speaker: text" (no session date)')
    parser.add_argument("--no-sessions", action="store_true", help="store no conversation id per session")
    defaults = HybridWeights()
    parser.add_argument("--dense-weight", type=float, default=defaults.dense)
    parser.add_argument("--keyword-weight", type=float, default=defaults.keyword)
    parser.add_argument("--context", type=float, default=defaults.context,
                        help="weight of the neighbouring memories in the hybrid ranking (0: off)")
    parser.add_argument("--bm25-k1", type=float, default=None)
    parser.add_argument("--bm25-b", type=float, default=None)
    parser.add_argument("--modes", default=",".join(evaluation.GRAPH_MODES),
                        help="without --cv: the search modes (hybrid+graph builds each conversation's graph "
                             "with the rules extractor)")
    parser.add_argument("--cv", action="store_true",
                        help="leave-conversations-out cross-validation of --methods (tune on --tune, report the rest)")
    parser.add_argument("--methods", default=",".join(locomo_methods.DEFAULT_METHODS),
                        help=f"with --cv: comma-separated, of {', '.join(locomo_methods.methods())}")
    parser.add_argument("--tune", type=int, default=3, help="with --cv: conversations to tune on per split")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm",
                        help="hashing: no model, for a quick test of the harness only")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    conversations = evaluation.load(args.data, conversations=args.conversations)
    embedder = SentenceTransformerEmbedder() if args.embedder == "minilm" else HashingEmbedder(384)
    settings = MemorySettings()
    hybrid = dataclasses.replace(defaults, dense=args.dense_weight, keyword=args.keyword_weight, context=args.context)
    workdir = tempfile.TemporaryDirectory(prefix="locomo-recall-")
    opened: list[Database] = []

    def store_factory() -> MemoryStore:
        path = Path(tempfile.mkdtemp(dir=workdir.name))
        db = Database(path / "memory.db")
        opened.append(db)
        store = MemoryStore(db, open_sealer(db, path / "memory.key"), embedder, settings, hybrid=hybrid)
        if args.bm25_k1 is not None:
            store.keywords.k1 = args.bm25_k1
        if args.bm25_b is not None:
            store.keywords.b = args.bm25_b
        return store

    turns = sum(len(c.turns) for c in conversations)
    questions = sum(1 for c in conversations for q in c.questions if q.category in CATEGORIES and q.evidence)
    print(f"LoCoMo: {len(conversations)} conversation(s), {turns} turns stored as memories, "
          f"{questions} questions (categories 1-4)", flush=True)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if unknown := [m for m in modes if m not in evaluation.GRAPH_MODES]:
        print(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(evaluation.GRAPH_MODES)}",
              file=sys.stderr)
        return 2
    if args.cv:
        try:
            return run_cv(args, conversations, store_factory, started)
        finally:
            for db in opened:
                db.close()
            workdir.cleanup()
    try:
        table = evaluation.evaluate(
            store_factory, conversations, categories=CATEGORIES,
            progress=partial(tqdm, desc="conversations", unit="conv"),
            text=partial(evaluation.memory_text, dated=not args.undated),
            sessions_as_conversations=not args.no_sessions, modes=modes,
            setup=locomo_methods.attach_graph if "hybrid+graph" in modes else None,
        )
    finally:
        for db in opened:
            db.close()
        workdir.cleanup()
    elapsed = time.perf_counter() - started

    ks = ["R@1", "R@5", "R@10"]
    wide = table.pivot(index="category", columns="mode", values=ks)
    wide = wide.reindex(columns=[(k, m) for k in ks for m in modes])
    print()
    print(wide.round(3).to_string())
    overall = table[table["category"].str.startswith("all")].set_index("mode")
    print()
    print("overall, categories 1-4:")
    for mode in modes:
        r = overall.loc[mode]
        print(f"  {mode:12s} R@1 {r['R@1']:.3f}  R@5 {r['R@5']:.3f}  R@10 {r['R@10']:.3f}")
    hybrid_r5 = float(overall.loc["hybrid", "R@5"]) if "hybrid" in modes else float("nan")
    met = hybrid_r5 >= TARGET
    print(f"\nhybrid R@5 = {hybrid_r5:.3f} (target >= {TARGET}): {'MET' if met else 'NOT MET'}"
          f"  [{elapsed:.0f} s]")
    if args.json:
        print(json.dumps({
            "benchmark": "locomo_recall",
            "conversations": len(conversations),
            "questions": questions,
            "settings": {"dated": not args.undated, "sessions": not args.no_sessions,
                         "hybrid": dataclasses.asdict(hybrid), "bm25_k1": args.bm25_k1, "bm25_b": args.bm25_b},
            "overall": {m: {k: round(float(overall.loc[m, k]), 4) for k in ks} for m in modes},
            "per_category": [
                {"mode": r["mode"], "category": r["category"], **{k: round(float(r[k]), 4) for k in ks}}
                for r in table.to_dict("records")
            ],
            "target": TARGET,
            "met": met,
            "seconds": round(elapsed, 1),
        }))
    return 0


def run_cv(args: argparse.Namespace, conversations: list, store_factory, started: float) -> int:  # noqa: ANN001
    """``--cv``: store each conversation once, score every method's grid, cross-validate, print."""
    available = locomo_methods.methods()
    names = [n.strip() for n in args.methods.split(",") if n.strip()]
    if unknown := [n for n in names if n not in available]:
        print(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(available)}", file=sys.stderr)
        return 2
    if len(conversations) <= args.tune:
        print(f"--cv needs more than --tune {args.tune} conversations", file=sys.stderr)
        return 2
    text = partial(evaluation.memory_text, dated=not args.undated)
    prepared = [evaluation.prepare(store_factory(), c, categories=CATEGORIES, text=text,
                                   sessions_as_conversations=not args.no_sessions)
                for c in tqdm(conversations, desc="storing", unit="conv")]
    results = []
    for name in names:
        method = available[name]()
        rows = crossval.score_grid(prepared, method, progress=partial(tqdm, desc=f"{name} ({len(method.grid)} points)",
                                                                      unit="conv"))
        results.append(crossval.cross_validate(rows, method, tune=args.tune, categories=CATEGORIES))
    frame = crossval.table(results)
    splits = len(results[0].chosen) if results else 0
    print(f"\nR@5, leave-conversations-out: tuned on {args.tune}, measured on {len(prepared) - args.tune}, "
          f"averaged over {splits} splits (and tuned on all {len(prepared)} for comparison)")
    print(frame.round(3).to_string())
    for res in results:
        if len(available[res.method]().grid) > 1:
            picks = sorted({json.dumps(dict(p), sort_keys=True) for p in res.chosen})
            print(f"  {res.method}: chosen per split {', '.join(picks)}; best on all {dict(res.best_full)}")
    print(f"[{time.perf_counter() - started:.0f} s]")
    if args.json:
        print(json.dumps({
            "benchmark": "locomo_recall_cv", "conversations": len(prepared), "tune": args.tune, "splits": splits,
            "methods": {r.method: {"held_out": {k: round(v, 4) for k, v in r.held_out.items()},
                                   "tuned_on_all": {k: round(v, 4) for k, v in r.full.items()},
                                   "chosen": [dict(p) for p in r.chosen], "best_on_all": dict(r.best_full),
                                   "ms_per_query": round(r.ms_per_query, 2)}
                        for r in results},
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
